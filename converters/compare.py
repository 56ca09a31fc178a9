"""Convert one model in every mode and measure each the same way: one table to choose from."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from edgekit.converters._native import capture_native_output
from edgekit.converters.engines.base import QuantizerEngine
from edgekit.converters.metadata_writer import write_bytes_atomic
from edgekit.converters.options import ConvertOptions, Mode
from edgekit.converters.pipeline import Measured, Prepared, Session
from edgekit.converters.sources import load_source
from edgekit.errors import EdgekitError

__all__ = ["ModeComparison", "compare_modes", "format_comparison"]


@dataclass(frozen=True)
class ModeComparison:
    """One mode's row: size, latency here, accuracy and agreement (None where not measured).

    float_latency_ms is float32's, timed interleaved with this mode's: their ratio is fair
    even when the machine's load changes between rows."""

    mode: Mode
    size_bytes: int | None
    latency_ms: float | None
    float_latency_ms: float | None = None
    accuracy: float | None = None
    top1_agreement: float | None = None
    map50: float | None = None
    drop: float | None = None
    error: str | None = None
    path: Path | None = None  # where the model was written, when asked to keep them

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "mode": self.mode.value, "path": str(self.path) if self.path else None}


def compare_modes(model: Any, *, calibration: Any = None, validation: Any = None,
                  options: ConvertOptions | None = None, modes: Sequence[Mode] | None = None,
                  engine: QuantizerEngine | None = None, output_dir: Path | None = None) -> list[ModeComparison]:
    """Convert `model` in each mode (default: all) and measure it against float32.

    A mode that fails (an op without int8 kernel, no calibration data) gets a row with its
    error; edgetpu gets one too (a compiled model runs only on an Edge TPU). With
    `output_dir`, each model is kept there as ``<mode>.tflite`` (without edgekit metadata).

    Raises:
        InputError, ConversionError: the model or data cannot be loaded, or float32 fails.
    """
    opts = options or ConvertOptions()
    chosen = list(modes) if modes is not None else list(Mode)
    with capture_native_output(enabled=not opts.verbose, show_progress=opts.progress), \
            load_source(model, opts.preprocessing.input_size, layout=opts.layout, split_head=opts.split_head,
                        verbose=opts.verbose) as src, Session(src, opts, engine) as session:
        p = session.prepare(calibration, validation)
        return [_row(session, p, mode, output_dir) for mode in chosen]


def _row(session: Session, p: Prepared, mode: Mode, output_dir: Path | None) -> ModeComparison:
    if mode is Mode.EDGETPU:
        return ModeComparison(mode, None, None, error="a compiled model needs an Edge TPU to run; "
                              "its CPU twin is the uint8 row")
    try:
        model = session.quantize(p, mode)
        measured: Measured = session.measure(p, model, mode).detail
    except EdgekitError as exc:
        return ModeComparison(mode, None, None, error=str(exc).split(". ")[0])
    m = measured.metrics
    path = None
    if output_dir is not None:
        path = output_dir / f"{mode.value}.tflite"
        write_bytes_atomic(path, model)
    return ModeComparison(mode, len(model), m.latency_ms, m.float_latency_ms, m.accuracy, m.top1_agreement, m.map50,
                          measured.gate.drop, path=path)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


def format_comparison(rows: Sequence[ModeComparison]) -> str:
    """A plain-text table; sizes and latencies also as ratios to float32."""
    base = next((r for r in rows if r.mode is Mode.FLOAT32 and r.size_bytes), None)
    head = (f"{'mode':<14}{'size':>12}{'x f32':>8}{'latency ms':>12}{'x f32':>8}"
            f"{'accuracy':>10}{'agreement':>11}{'mAP50':>9}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.error:
            lines.append(f"{r.mode.value:<14}  {r.error}")
            continue
        size_x = f"{r.size_bytes / base.size_bytes:.2f}" if base and base.size_bytes and r.size_bytes else "-"
        lat_x = f"{r.latency_ms / r.float_latency_ms:.2f}" if r.float_latency_ms and r.latency_ms else "-"
        lines.append(f"{r.mode.value:<14}{r.size_bytes or 0:>12,}{size_x:>8}{r.latency_ms or 0:>12.3f}{lat_x:>8}"
                     f"{_pct(r.accuracy):>10}{_pct(r.top1_agreement):>11}{_pct(r.map50):>9}")
    return "\n".join(lines)
