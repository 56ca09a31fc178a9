"""The figures of one run of the loop: a window of samples for percentiles, and the summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SampleWindow", "LoopSummary"]


class SampleWindow:
    """The last ``capacity`` values of a figure, for percentiles without growing forever."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._data = np.zeros(capacity, dtype=np.float64)
        self._n = 0

    def add(self, value: float) -> None:
        self._data[self._n % len(self._data)] = value
        self._n += 1

    def percentile(self, q: float) -> float:
        """np.percentile's default (linear) figure, worked out here: numpy 2's own imports numpy.ma
        on its first call, 15-30 ms of a one-image run's start-up."""
        n = min(self._n, len(self._data))
        if not n:
            return float("nan")
        s = np.sort(self._data[:n])
        pos = (n - 1) * (q / 100)
        lo = min(int(pos), n - 1)
        hi, t = min(lo + 1, n - 1), pos - lo
        a, b = float(s[lo]), float(s[hi])
        return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t  # numpy's lerp, same rounding


@dataclass(frozen=True)
class LoopSummary:
    """The figures of one run. Latency is capture -> result; stage times are medians (ms)."""

    source: str
    captured: int
    processed: int
    dropped: int
    undecodable: int
    reopens: int
    elapsed_s: float
    fps: float
    latency_p50_ms: float
    latency_p99_ms: float
    stages_p50_ms: dict[str, float] = field(default_factory=dict)
    stopped_by: str = "end of source"
    interpreters: int = 1  # side by side (Performance.THROUGHPUT on a file: 2)

    def to_dict(self) -> dict[str, Any]:
        def r(v: float) -> float | None:
            return None if v != v else round(v, 3)  # NaN (no frames) -> null

        return {"source": self.source, "frames": {"captured": self.captured, "processed": self.processed,
                                                  "dropped": self.dropped, "undecodable": self.undecodable},
                "reopens": self.reopens, "elapsed_s": r(self.elapsed_s), "fps": r(self.fps),
                "latency_ms": {"p50": r(self.latency_p50_ms), "p99": r(self.latency_p99_ms)},
                "stages_ms_p50": {k: r(v) for k, v in self.stages_p50_ms.items()}, "stopped_by": self.stopped_by,
                "interpreters": self.interpreters}

    def line(self) -> str:
        stages = " / ".join(f"{k} {v:.1f}" for k, v in self.stages_p50_ms.items())
        return (f"{self.processed} frames processed of {self.captured} captured ({self.dropped} dropped, "
                f"{self.undecodable} undecodable, {self.reopens} reopens) in {self.elapsed_s:.1f} s: "
                f"{self.fps:.1f} fps" + (f" on {self.interpreters} interpreters" if self.interpreters > 1 else "")
                + f"; latency p50 {self.latency_p50_ms:.1f} ms, p99 {self.latency_p99_ms:.1f} ms; "
                f"stages p50 {stages} ms; stopped by {self.stopped_by}")
