"""`edgekit demo`: the whole product on the built-in inspection example, offline.

generate data -> train a float detector -> `edgekit convert --mode int8` (accuracy check and
gate) -> `edgekit bench` float against int8 -> `edgekit detect --realtime --save` on a belt
video -> `edgekit inspect` (PASS/FAIL per frame into JSON-lines events) -> summary.md.

Every step after training runs the real `edgekit` command, in this process, exactly as a user
would type it, so the demo is also the worked example to copy.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgekit.errors import EdgekitError
from edgekit.demo.report import write_summary

__all__ = ["DemoOptions", "DemoResult", "run_demo"]

DEFECTS = ("scratch", "dent", "missing_hole")


@dataclass(frozen=True)
class DemoOptions:
    """Sizes of the demo. The defaults are the full run (about 4 minutes on 2 cores)."""

    out: Path = Path("edgekit-demo")
    n_train: int = 2000
    n_cal: int = 200
    n_val: int = 300
    epochs: int = 8
    time_limit: float | None = 100.0  # seconds of training at most
    video_frames: int = 300
    video_fps: float = 15.0
    max_drop: float = 3.0  # mAP points the int8 model may lose against the float model
    bench_runs: int = 50
    seed: int = 0
    quiet: bool = False

    @classmethod
    def quick(cls, out: Path, **changes: Any) -> DemoOptions:
        """A reduced run for tests: small data, few epochs, short video (about a minute)."""
        base = dict(out=out, n_train=480, n_cal=100, n_val=120, epochs=3, time_limit=None,
                    video_frames=60, bench_runs=10, max_drop=25.0)
        base.update(changes)
        return cls(**base)


@dataclass
class DemoResult:
    out: Path
    steps: dict[str, float] = field(default_factory=dict)  # step -> seconds
    float_map: float = math.nan
    int8_map: float = math.nan
    video_map: float = math.nan
    convert: dict[str, Any] = field(default_factory=dict)
    bench: list[dict[str, Any]] = field(default_factory=list)
    detect: dict[str, Any] = field(default_factory=dict)
    verdicts: dict[str, int] = field(default_factory=dict)
    gate_passed: bool = False
    summary_path: Path | None = None


class _Steps:
    """Numbered progress lines on stderr, and the time each step took."""

    def __init__(self, total: int, quiet: bool, result: DemoResult) -> None:
        self.total, self.quiet, self.result, self.n = total, quiet, result, 0

    @contextlib.contextmanager
    def step(self, name: str, what: str) -> Any:
        self.n += 1
        if not self.quiet:
            print(f"[{self.n}/{self.total}] {what} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        yield
        self.result.steps[name] = time.perf_counter() - t0
        if not self.quiet:
            print(f"      done in {self.result.steps[name]:.1f} s", file=sys.stderr, flush=True)


def _edgekit(argv: list[str], stdout_to: Path | None = None) -> int:
    """Run one `edgekit` command in this process; stdout to a file when asked."""
    from edgekit.cli import main

    if stdout_to is None:
        return main(argv)
    with open(stdout_to, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
        return main(argv)


def run_demo(options: DemoOptions, on_step: Callable[[str], None] | None = None) -> DemoResult:
    """Run the whole pipeline into ``options.out`` and return its figures.

    Raises:
        EdgekitError: a step failed (its own message says why); ConversionError when
            TensorFlow is missing (training and conversion need ``pip install 'edgekit-tflite[convert]'``).
    """
    from edgekit.demo import (CLASS_NAMES, TrainConfig, evaluate, evaluate_outputs, export_saved, load_split,
                              make_splits, make_video, mean_average_precision, train)
    from edgekit.runtimes import load_model

    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    result = DemoResult(out=out)
    steps = _Steps(7, options.quiet, result)
    verbose = [] if not options.quiet else ["-q"]

    with steps.step("generate", f"generating {options.n_train + options.n_cal + options.n_val} images "
                                f"and a {options.video_frames}-frame belt video"):
        splits = make_splits(out / "data", options.n_train, options.n_cal, options.n_val, seed=options.seed)
        truth = make_video(out / "belt.avi", n_frames=options.video_frames, fps=options.video_fps,
                           seed=options.seed)
        (out / "data" / "belt_truth.json").write_text(json.dumps(truth.to_dict()))

    with steps.step("train", "training the float detector (Keras, YOLO-style head)"):
        from edgekit.converters._native import import_tensorflow

        import_tensorflow()  # quietly: TensorFlow's start-up log says nothing a demo user can act on
        model = train(splits.train, TrainConfig(epochs=options.epochs, time_limit=options.time_limit,
                                                seed=options.seed), progress=not options.quiet)
        keras_path = export_saved(model, out / "detector.keras")
        val = load_split(splits.validation)
        result.float_map = evaluate(model, val).map

    int8 = out / "detector_int8.tflite"
    float_tfl = out / "detector_float32.tflite"
    with steps.step("convert", "converting to int8 and float32, checking int8 against the float model"):
        common = ["--calibration", str(splits.calibration), "--validation", str(splits.validation),
                  "--labels", str(splits.labels), "--task", "detect", "--output-format", "yolo",
                  "--seed", str(options.seed), *verbose]
        if _edgekit(["convert", keras_path, "--mode", "float32", "-o", str(float_tfl), "--no-diagnose", "--json",
                     *common], stdout_to=out / "convert_float32.json") != 0:
            raise EdgekitError("converting the float model failed; see the message above")
        status = _edgekit(["convert", keras_path, "--mode", "int8", "-o", str(int8), "--max-drop",
                           str(options.max_drop), "--report-dir", str(out / "report"), "--json", *common],
                          stdout_to=out / "convert_int8.json")
        result.convert = _read_json(out / "convert_int8.json")
        result.gate_passed = status == 0
        if status not in (0, 3):
            raise EdgekitError("the int8 conversion failed; see the message above")
        if not result.gate_passed:
            # The gate kept the model from being shipped; the demo goes on with it, clearly named.
            int8 = int8.with_name(int8.stem + ".FAILED-GATE.tflite")
        with load_model(int8) as m:
            outputs = [m.run(s.image[None].astype(np.float32))[0] for s in val]
        result.int8_map = evaluate_outputs(outputs, val).map

    with steps.step("bench", "benchmarking float32 against int8 (XNNPACK)"):
        for path in (float_tfl, int8):
            _edgekit(["bench", str(path), "--runs", str(options.bench_runs), "--warmup", "3", "--json", "-q"],
                     stdout_to=out / "bench.tmp.json")
            for row in _read_json(out / "bench.tmp.json") or []:
                row["model"] = path.name
                result.bench.append(row)
        (out / "bench.tmp.json").unlink(missing_ok=True)
        (out / "bench.json").write_text(json.dumps(result.bench, indent=2))

    with steps.step("detect", "edgekit detect --realtime on the belt video (as if from a camera)"):
        status = _edgekit(["detect", "-m", str(int8), "--source", str(out / "belt.avi"), "--realtime",
                           "-t", "0.4", "--save", str(out / "annotated.avi"), "--json",
                           "--summary-json", str(out / "detect_summary.json"), "-q"],
                          stdout_to=out / "detections.jsonl")
        if status != 0:
            raise EdgekitError("edgekit detect failed on the demo video; see the message above")
        result.detect = _read_json(out / "detect_summary.json") or {}
        result.video_map = _video_map(out / "detections.jsonl", truth, CLASS_NAMES, mean_average_precision)

    with steps.step("inspect", "edgekit inspect: PASS/FAIL per frame (no defect allowed) into JSON-lines events"):
        config = _write_inspection_config(out, int8)
        status = _edgekit(["inspect", "-c", str(config), "--json", "-q"], stdout_to=out / "verdicts.jsonl")
        if status != 0:
            raise EdgekitError("edgekit inspect failed on the demo video; see the message above")
        result.verdicts = _count_verdicts(out / "verdicts.jsonl")

    with steps.step("summary", "writing summary.md"):
        result.summary_path = write_summary(result, options, truth)
    return result


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8").strip()
        return json.loads(text) if text else None
    except (OSError, json.JSONDecodeError):
        return None


def _video_map(jsonl: Path, truth: Any, names: Any, score: Any) -> float:
    """mAP@0.5 of the processed frames of the belt video against the video's ground truth."""
    from types import SimpleNamespace

    preds, truths = [], []
    for line in jsonl.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        index = rec.get("frame")
        if index is None or not 0 <= index < len(truth.frames):
            continue
        dets = rec.get("detections", [])
        preds.append(SimpleNamespace(xyxy=np.array([d["box"] for d in dets], np.float32).reshape(-1, 4),
                                     class_ids=np.array([d["id"] for d in dets], np.int64),
                                     scores=np.array([d["score"] for d in dets], np.float32)))
        truths.append(truth.frames[index])
    return score(preds, truths, names).map if preds else math.nan


def _write_inspection_config(out: Path, model: Path) -> Path:
    rules = "\n".join(f'[[rules]]\nlabel = "{d}"\nmax = 0\nmin_score = 0.4\n' for d in DEFECTS)
    text = f"""# Written by `edgekit demo`: no defect may be seen on the belt.
device = "demo"
state_dir = "state"

[source]
path = "belt.avi"
realtime = true

[model]
path = "{model.name}"
threshold = 0.4

[trigger]
mode = "continuous"

{rules}
[sinks.jsonl]
directory = "events"
"""
    path = out / "inspection.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _count_verdicts(jsonl: Path) -> dict[str, int]:
    counts = {"PASS": 0, "FAIL": 0}
    for line in jsonl.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            rec = json.loads(line)
            verdict = str(rec.get("verdict") or rec.get("payload", {}).get("verdict", "")).upper()
            if verdict in counts:
                counts[verdict] += 1
    return counts
