"""What `edgekit demo` is asked (its sizes) and what it measured, as typed values that the
pipeline fills and the report reads."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgekit.demo.figures import Conversions, DemoFigures
    from edgekit.demo.steps import DetectRun, InspectRun
    from edgekit.runtimes.timing import BenchRow

__all__ = ["DemoOptions", "DemoResult"]


@dataclass(frozen=True)
class DemoOptions:
    """Sizes of the demo. The defaults are the full run (about 2.5 minutes on 2 quiet cores).

    ``train_steps``: optimizer steps of training (1008: about 8 passes over 4,000 images in batches of
    32). Steps, not seconds: a slower or busier machine takes longer and gets the same model.
    """

    out: Path = Path("edgekit-demo")
    n_train: int = 4000
    n_cal: int = 200
    n_val: int = 300
    train_steps: int = 1008
    video_frames: int = 300
    video_fps: float = 15.0
    max_drop: float = 3.0  # mAP points the int8 model may lose against the float model
    bench_runs: int = 50
    seed: int = 0
    quiet: bool = False

    @classmethod
    def quick(cls, out: Path, **changes: Any) -> DemoOptions:
        """A reduced run for tests: small data, 45 steps, short video (about a minute)."""
        base: dict[str, Any] = dict(out=out, n_train=480, n_cal=100, n_val=120, train_steps=45, video_frames=60, bench_runs=10,
                    max_drop=25.0)
        base.update(changes)
        return cls(**base)


@dataclass
class DemoResult:
    """What the demo measured, as the library's own typed results."""

    out: Path
    cpu: str = ""
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds
    train_steps: int = 0
    float_map: float = math.nan  # the Keras model against the validation split's labels
    int8_map: float = math.nan  # the int8 .tflite against the same labels
    conversions: Conversions | None = None
    bench: dict[str, BenchRow] = field(default_factory=dict)  # model file name -> latency
    figures: DemoFigures | None = None  # sizes, latencies and their ratios: what every file states
    detect: DetectRun | None = None
    inspect: InspectRun | None = None
    summary_path: Path | None = None

    @property
    def gate_passed(self) -> bool:
        return self.conversions is not None and self.conversions.int8.passed

    @property
    def int8_path(self) -> Path | None:
        """The int8 file convert() wrote (``*.FAILED-GATE.tflite`` when the gate failed)."""
        return self.conversions.int8.output if self.conversions else None

    @property
    def float_path(self) -> Path | None:
        return self.conversions.float32.output if self.conversions else None
