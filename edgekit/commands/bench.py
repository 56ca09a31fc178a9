"""`edgekit bench MODEL`: latency and throughput per delegate and thread count.

Each row loads the model afresh (init time), runs warm-up inferences, then times N
invokes on random-but-valid input written once through the zero-copy input view, so the
figures are the interpreter's, not numpy's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from edgekit.commands._common import (
    delegate_list_arg,
    int_list_arg,
    native_stderr_filtered,
    non_negative_int,
    positive_int,
    progress,
    table,
)
from edgekit.errors import EdgekitError
from edgekit.runtimes.model import Model, TensorSpec, default_threads, load_model
from edgekit.runtimes.validate import validate_model_file

__all__ = ["register", "run", "BenchRow", "bench_one", "random_input", "SLOW_FIRST_RATIO"]

# The first inference counts as "much slower" beyond this many p50s (the Edge TPU streams
# its weights in; XNNPACK packs them).
SLOW_FIRST_RATIO = 3.0
_STATS = ("min", "p50", "p90", "p99", "mean")


def register(subparsers: Any) -> None:
    from edgekit.cli import HelpFormatter

    p = subparsers.add_parser(
        "bench", help="measure latency per delegate and thread count",
        description="Load MODEL for each delegate x thread count, warm up, then time --runs inferences of "
                    "random input. A delegate that cannot load here is reported and skipped.",
        formatter_class=HelpFormatter)
    p.add_argument("model", metavar="MODEL", help="the .tflite file")
    # String defaults go through `type` too, and read well in --help.
    p.add_argument("--threads", type=int_list_arg, default=str(default_threads()),
                   help="CPU thread counts, comma-separated (e.g. 1,2,4)")
    p.add_argument("--delegate", type=delegate_list_arg, default="auto",
                   help="auto, cpu, xnnpack, edgetpu or edgetpu:DEVICE (usb, usb:1, pci:0); comma-separated")
    p.add_argument("--runs", type=positive_int, default=50, help="timed inferences per row")
    p.add_argument("--warmup", type=non_negative_int, default=5, help="untimed inferences first")
    p.add_argument("--json", action="store_true", help="print a JSON list of rows")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


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


def bench_one(model: Model, requested: str, runs: int, warmup: int, bar: Any,
              rng: np.random.Generator) -> BenchRow:
    """Time one loaded model: one first inference, warm-up, then ``runs`` timed invokes."""
    for i, spec in enumerate(model.inputs):
        model.input_view(i)[...] = random_input(spec, rng)  # the view is dropped at once
    invoke = model.invoke
    t0 = time.perf_counter()
    invoke()
    first_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(max(warmup - 1, 0)):
        invoke()
    bar.update(warmup)
    times = np.empty(runs)
    for k in range(runs):
        t = time.perf_counter()
        invoke()
        times[k] = time.perf_counter() - t
        bar.update(1)
    ms = times * 1e3
    p50 = float(np.percentile(ms, 50))
    latency = {"min": float(ms.min()), "p50": p50, "p90": float(np.percentile(ms, 90)),
               "p99": float(np.percentile(ms, 99)), "mean": float(ms.mean())}  # the order of _STATS
    notes = list(model.notes)
    if first_ms > SLOW_FIRST_RATIO * p50:
        notes.append(f"the first inference took {first_ms:.1f} ms, {first_ms / p50:.0f}x p50 (the Edge TPU "
                     "loads the model on first use, XNNPACK packs weights): warm up before timing matters")
    resolved = model.delegate.value + (f":{model.edgetpu_device}" if model.edgetpu_device else "")
    return BenchRow(delegate=requested, threads=model.num_threads, resolved_delegate=resolved,
                    backend=str(model.backend),
                    delegate_nodes=model.delegate_nodes, init_ms=model.init_ms, first_ms=first_ms,
                    latency_ms=latency, fps=1e3 / latency["mean"], notes=notes)


def run(args: argparse.Namespace) -> int:
    validate_model_file(args.model)  # a bad file fails once, with one line, before any row
    rng = np.random.default_rng(0)
    rows: list[BenchRow] = []
    bar = progress(len(args.delegate) * len(args.threads) * (args.runs + args.warmup), "bench", args.quiet)
    failed: dict[str, str] = {}  # delegate -> why it cannot load (the same for every thread count)
    try:
        for delegate in args.delegate:
            for threads in args.threads:
                if delegate in failed:
                    rows.append(BenchRow(delegate, threads, error=failed[delegate]))
                    continue
                bar.set_description(f"{delegate} x{threads}")
                try:
                    with native_stderr_filtered():
                        model = load_model(args.model, delegate, threads)
                except EdgekitError as exc:
                    failed[delegate] = str(exc)
                    rows.append(BenchRow(delegate, threads, error=str(exc)))
                    bar.update(args.runs + args.warmup)
                    continue
                with model:
                    rows.append(bench_one(model, delegate, args.runs, args.warmup, bar, rng))
    finally:
        bar.close()
    _report(rows, args.json)
    return 0 if any(r.error is None for r in rows) else 2


def _report(rows: list[BenchRow], as_json: bool) -> None:
    if as_json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
    ok = [r for r in rows if r.error is None]
    if ok and not as_json:
        headers = ["delegate", "threads", "backend", "nodes", "init ms", "first ms",
                   "min", "p50", "p90", "p99", "mean", "fps"]
        body = [[_delegate_cell(r), r.threads, r.backend or "failed (below)", r.delegate_nodes, r.init_ms,
                 r.first_ms, *((r.latency_ms or {}).get(k) for k in _STATS), r.fps] for r in rows]
        print("latency in ms; fps = 1000 / mean\n")
        print(table(headers, body, right=[False, True, False] + [True] * 9))
        for note in dict.fromkeys(n for r in ok for n in r.notes):
            print(f"note: {note}")
    for delegate, message in dict.fromkeys((r.delegate, r.error) for r in rows if r.error):
        print(f"edgekit bench: error: delegate {delegate}: {message}", file=sys.stderr)


def _delegate_cell(r: BenchRow) -> str:
    return r.delegate if r.resolved_delegate in (None, r.delegate) else f"{r.delegate} ({r.resolved_delegate})"
