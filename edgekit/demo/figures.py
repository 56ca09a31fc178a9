"""The demo's size and latency figures, measured once and read by everything that prints them.

summary.md, bench.json and the conversion report (report/report.md, convert_int8.json) all state the
float32 and int8 sizes and latencies. They are taken here, once: sizes are the two files as written,
latencies the demo's own timing of those two files (:func:`edgekit.demo.steps.bench_models`, rounds
interleaved). Each figure is rounded once to what is printed (bytes; ms to 3 decimals), and each ratio
is computed from the rounded figures it is printed beside, so the file never disagrees with itself.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgekit.converters import ConversionResult
    from edgekit.runtimes.timing import BenchRow

__all__ = ["Conversions", "DemoFigures", "ModelFigures", "MS_DIGITS", "measured_figures", "write_figures"]

MS_DIGITS = 3  # latencies are stated in ms to 1 us, everywhere
RATIO_DIGITS = 2  # int8 / float32 ratios
SPEEDUP_DIGITS = 1  # "runs 3.6x as fast"


@dataclass(frozen=True)
class Conversions:
    """The demo's two conversions of its detector."""

    float32: ConversionResult
    int8: ConversionResult  # .output is the file written (OUT.FAILED-GATE.tflite when the gate failed)


@dataclass(frozen=True)
class ModelFigures:
    """One model file: its name, its size on disk and its timing (``row``: None when it could not run)."""

    file: str
    size_bytes: int
    row: BenchRow | None

    @property
    def p50_ms(self) -> float:
        """The median latency as printed (ms, :data:`MS_DIGITS` decimals); NaN when not measured."""
        lat = (self.row.latency_ms or {}) if self.row is not None and self.row.error is None else {}
        return round(float(lat["p50"]), MS_DIGITS) if "p50" in lat else math.nan


@dataclass(frozen=True)
class DemoFigures:
    """float32 against int8: sizes, latencies and the ratios between them, on ``cpu``."""

    cpu: str
    float32: ModelFigures
    int8: ModelFigures

    @property
    def threads(self) -> int | None:
        row = self.float32.row or self.int8.row
        return row.threads if row is not None else None

    @property
    def delegate(self) -> str:
        row = self.float32.row or self.int8.row
        return (row.resolved_delegate or row.delegate) if row is not None else "n/a"

    @property
    def size_ratio(self) -> float:
        """int8 size / float32 size."""
        return _ratio(self.int8.size_bytes, self.float32.size_bytes, RATIO_DIGITS)

    @property
    def latency_ratio(self) -> float:
        """int8 p50 / float32 p50, from the p50s as printed."""
        return _ratio(self.int8.p50_ms, self.float32.p50_ms, RATIO_DIGITS)

    @property
    def speedup(self) -> float:
        """float32 p50 / int8 p50 ("int8 runs 3.6x as fast"), from the p50s as printed."""
        return _ratio(self.float32.p50_ms, self.int8.p50_ms, SPEEDUP_DIGITS)

    def to_dict(self) -> dict[str, Any]:
        """bench.json: the CPU, each model's size and timing rows, and the ratios of those figures."""
        return {"cpu": self.cpu, "delegate": self.delegate, "threads": self.threads,
                "models": [{"model": m.file, "size_bytes": m.size_bytes, "latency_p50_ms": _json(m.p50_ms),
                            "timing": m.row.to_dict() if m.row is not None else None}
                           for m in (self.float32, self.int8)],
                "int8_vs_float32": {"size": _json(self.size_ratio), "latency_p50": _json(self.latency_ratio),
                                    "speedup_p50": _json(self.speedup)}}


def _ratio(a: float, b: float, digits: int) -> float:
    return round(a / b, digits) if b and not (math.isnan(a) or math.isnan(b)) else math.nan


def _json(x: float) -> float | None:
    return None if math.isnan(x) else x


def measured_figures(conversions: Conversions, rows: dict[str, BenchRow], cpu: str) -> DemoFigures:
    """The figures of the two converted files and their timing rows (keyed by file name)."""
    f32, q8 = conversions.float32, conversions.int8
    return DemoFigures(cpu, ModelFigures(f32.output.name, f32.size_bytes, rows.get(f32.output.name)),
                       ModelFigures(q8.output.name, q8.size_bytes, rows.get(q8.output.name)))


def with_figures(result: ConversionResult, figures: DemoFigures, own: ModelFigures) -> ConversionResult:
    """A conversion restated with the demo's figures (``own``: the file it wrote): its float32 is the
    float32 file as written (the conversion's own is the same model without metadata) and its
    latencies are the demo's timing of the two files."""
    f, q = figures.float32.p50_ms, own.p50_ms
    return dataclasses.replace(result, float_size_bytes=figures.float32.size_bytes,
                               metrics=result.metrics.with_latency(None if math.isnan(f) else f,
                                                                   None if math.isnan(q) else q))


def write_figures(conversions: Conversions, figures: DemoFigures, out: Path) -> Conversions:
    """bench.json, the conversion report (report/) and convert_float32.json / convert_int8.json, all
    with the same figures; returns the conversions restated with them (what summary.md reads).

    Raises:
        OSError: a file cannot be written.
    """
    from edgekit.converters.report import write_report

    int8 = with_figures(conversions.int8, figures, figures.int8)
    int8 = dataclasses.replace(int8, report_paths=write_report(int8, out / "report"))
    restated = Conversions(with_figures(conversions.float32, figures, figures.float32), int8)
    (out / "bench.json").write_text(json.dumps(figures.to_dict(), indent=2) + "\n", encoding="utf-8")
    for result, name in ((restated.float32, "convert_float32.json"), (restated.int8, "convert_int8.json")):
        (out / name).write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
    return restated
