"""`edgekit bench MODEL`: latency and throughput per delegate and thread count.

Each row loads the model afresh (init time), runs warm-up inferences, then times N
invokes on random-but-valid input written once through the zero-copy input view, so the
figures are the interpreter's, not numpy's.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from edgekit.commands._common import (
    DELEGATE_HELP,
    delegate_list_arg,
    int_list_arg,
    native_stderr_filtered,
    non_negative_int,
    positive_int,
    progress,
    table,
)
from edgekit.errors import EdgekitError
from edgekit.runtimes.loader import default_threads, load_model
from edgekit.runtimes.timing import SLOW_FIRST_RATIO, BenchRow, bench_one, random_input
from edgekit.runtimes.timing import STATS as _STATS
from edgekit.runtimes.validate import validate_model_file

# The timing itself lives in edgekit.runtimes.timing (a library API); these names stay importable from here.
__all__ = ["register", "run", "BenchRow", "bench_one", "random_input", "SLOW_FIRST_RATIO"]


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

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
                   help=f"{DELEGATE_HELP} (usb, usb:1, pci:0); comma-separated")
    p.add_argument("--runs", type=positive_int, default=50, help="timed inferences per row")
    p.add_argument("--warmup", type=non_negative_int, default=5, help="untimed inferences first")
    p.add_argument("--json", action="store_true", help="print a JSON list of rows")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


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
