"""Timing one loaded model: latency percentiles and fps on random-but-valid input (what
``edgekit bench`` prints per delegate and thread count, and ``edgekit demo`` per model).

::

    from edgekit.runtimes import load_model
    from edgekit.runtimes.timing import time_model

    with load_model("model_int8.tflite") as model:
        row = time_model(model, runs=50)
        print(row.latency_ms["p50"], row.fps)
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from edgekit.runtimes.loader import load_model
from edgekit.runtimes.model import Model
from edgekit.runtimes.tensors import TensorSpec

__all__ = ["BenchRow", "SLOW_FIRST_RATIO", "STATS", "bench_one", "cpu_name", "interleaved_invoke_ms", "machine_line",
           "random_input", "time_model"]

# The first inference counts as "much slower" beyond this many p50s (the Edge TPU streams
# its weights in; XNNPACK packs them).
SLOW_FIRST_RATIO = 3.0
STATS = ("min", "p50", "p90", "p99", "mean")


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), else what the platform reports: to name beside every figure."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine_line() -> str:
    """"CPU: <name>, <n> cores; load average <1 min>": the line a benchmark prints before its figures
    (other programs' load moves every figure)."""
    load = f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "unknown"
    return f"CPU: {cpu_name()}, {os.cpu_count()} cores; load average {load} at start"


@dataclass(frozen=True)
class BenchRow:
    """One delegate x threads measurement; ``error`` set (and figures None) when it could not run."""

    delegate: str  # as asked for
    threads: int
    resolved_delegate: str | None = None  # what "auto" became, with the Edge TPU device if any
    backend: str | None = None
    delegate_nodes: int | None = None
    init_ms: float | None = None
    first_ms: float | None = None
    latency_ms: dict[str, float] | None = None
    fps: float | None = None
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def random_input(spec: TensorSpec, rng: np.random.Generator) -> np.ndarray:
    """Input that is valid for ``spec``: the full range of an integer type, [-1, 1] for floats."""
    dtype = np.dtype(spec.dtype)
    if np.issubdtype(dtype, np.floating):
        return rng.uniform(-1.0, 1.0, spec.shape).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, spec.shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        # Quantized values span their type; plain integers (ids, indices) stay small and valid.
        lo, hi = (info.min, info.max) if spec.quantized or dtype.itemsize == 1 else (0, 1)
        return rng.integers(lo, hi, spec.shape, endpoint=True, dtype=dtype)
    return np.zeros(spec.shape, dtype=dtype)


def time_model(model: Model, runs: int = 50, warmup: int = 3, *, seed: int = 0) -> BenchRow:
    """Time one loaded model on its own delegate and threads: one first inference, warm-up,
    then ``runs`` timed invokes on random-but-valid input (see :func:`random_input`)."""
    return bench_one(model, model.delegate.value, runs, warmup, None, np.random.default_rng(seed))


def bench_one(model: Model, requested: str, runs: int, warmup: int, bar: Any,
              rng: np.random.Generator) -> BenchRow:
    """Time one loaded model: one first inference, warm-up, then ``runs`` timed invokes
    (``bar``: a progress bar to update, or None)."""
    for i, spec in enumerate(model.inputs):
        model.input_view(i)[...] = random_input(spec, rng)  # the view is dropped at once
    invoke = model.invoke
    t0 = time.perf_counter()
    invoke()
    first_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(max(warmup - 1, 0)):
        invoke()
    if bar is not None:
        bar.update(warmup)
    times = np.empty(runs)
    for k in range(runs):
        t = time.perf_counter()
        invoke()
        times[k] = time.perf_counter() - t
        if bar is not None:
            bar.update(1)
    ms = times * 1e3
    p50 = float(np.percentile(ms, 50))
    latency = {"min": float(ms.min()), "p50": p50, "p90": float(np.percentile(ms, 90)),
               "p99": float(np.percentile(ms, 99)), "mean": float(ms.mean())}  # the order of STATS
    notes = list(model.notes)
    if first_ms > SLOW_FIRST_RATIO * p50:
        notes.append(f"the first inference took {first_ms:.1f} ms, {first_ms / p50:.0f}x p50 (the Edge TPU "
                     "loads the model on first use, XNNPACK packs weights): warm up before timing matters")
    resolved = model.delegate.value + (f":{model.edgetpu_device}" if model.edgetpu_device else "")
    return BenchRow(delegate=requested, threads=model.num_threads, resolved_delegate=resolved,
                    backend=str(model.backend),
                    delegate_nodes=model.delegate_nodes, init_ms=model.init_ms, first_ms=first_ms,
                    latency_ms=latency, fps=1e3 / latency["mean"], notes=notes)


def interleaved_invoke_ms(paths: Sequence[str | os.PathLike[str]], x0: np.ndarray | None = None, *,
                          threads: int | None = None, blocks: int = 6, per_block: int = 5,
                          warmup: int = 3) -> list[list[float]]:
    """Milliseconds of each invoke of each model, timed in interleaved blocks of ``per_block`` invokes
    whose order rotates, so that changes in load or clock speed hit every model alike (compare the
    lists' medians). The input is ``x0`` (floats, quantized per model), else uniform [0, 1) noise.

    Raises:
        ModelError: a model cannot be loaded here.
    """
    models = [load_model(p, num_threads=threads) for p in paths]
    try:
        for m in models:
            x = x0 if x0 is not None else np.random.default_rng(0).random(m.inputs[0].shape, dtype=np.float32)
            m.input_view()[...] = m.prepare_input(m.inputs[0], x)
            for _ in range(warmup):
                m.invoke()
        times: list[list[float]] = [[] for _ in models]
        for b in range(blocks):
            for i in [(b + k) % len(models) for k in range(len(models))]:
                for _ in range(per_block):
                    t0 = time.perf_counter()
                    models[i].invoke()
                    times[i].append((time.perf_counter() - t0) * 1e3)
    finally:
        for m in models:
            m.close()
    return times
