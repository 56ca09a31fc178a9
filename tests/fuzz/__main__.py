"""The long fuzz run of the model loader: ``python -m tests.fuzz --minutes 10``.

Mutates the built-in seed models (and the shared real models when present), feeds each
result to the reader, ``edgekit info`` and ``load_model`` + one invoke in a forked child,
and saves every crash, hang or stray Python exception to the findings folder with a note
saying how it was made. Prints counts per outcome and per seed at the end.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

from tests.fuzz.mutate import mutate
from tests.fuzz.runner import Kind, run_case, save_finding
from tests.fuzz.seeds import SEEDS, build, real_seeds, unpack

ROOT = Path(__file__).resolve().parents[2]
PARENT_MEMORY = 8 * 1024**3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=10.0, help="how long to run")
    p.add_argument("--seed", type=int, default=0, help="random seed (a run is reproducible per seed)")
    p.add_argument("--findings", type=Path, default=ROOT / "fuzz-findings", help="where crashing files go")
    p.add_argument("--models", type=Path, default=ROOT.parent / "shared" / "models",
                   help="folder with real .tflite seeds (skipped when absent)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds before a child counts as hung")
    p.add_argument("--max-per-signature", type=int, default=3, help="files kept per (kind, stage, seed)")
    p.add_argument("--baseline", action="store_true",
                   help="turn the graph checks off (offset checks only), to count the crashes they prevent")
    args = p.parse_args(argv)
    if args.baseline:
        _disable_graph_checks()

    import resource

    from edgekit.runtimes.backends import resolve_backend

    # A mutator that asks for absurd memory fails here, instead of waking the OOM killer.
    resource.setrlimit(resource.RLIMIT_AS, (PARENT_MEMORY, resource.getrlimit(resource.RLIMIT_AS)[1]))
    resolve_backend()  # import the interpreter once, before forking
    seeds = {name: build(name) for name in SEEDS}
    seeds.update(real_seeds(args.models if args.models.is_dir() else None))
    unpacked = {name: unpack(data) for name, data in seeds.items()}
    rng = random.Random(args.seed)
    counts: Counter[str] = Counter()
    per_seed: Counter[tuple[str, str]] = Counter()
    kept: Counter[tuple[str, str, str]] = Counter()
    deadline = time.monotonic() + args.minutes * 60
    t0 = time.monotonic()
    # The small seeds go fastest and hold the control-flow ops: give them most turns.
    weights = [1.0 if len(d) < 100_000 else 0.15 for d in seeds.values()]
    names = list(seeds)
    while time.monotonic() < deadline:
        name = rng.choices(names, weights)[0]
        try:
            data, what = mutate(rng, seeds[name], unpacked[name])
        except MemoryError:
            counts["mutation skipped (memory)"] += 1
            continue
        outcome = run_case(data, delegate=rng.choice(("xnnpack", "xnnpack", "cpu")), timeout=args.timeout)
        counts[outcome.kind.value] += 1
        per_seed[(name, outcome.kind.value)] += 1
        if outcome.bad:
            sig = (outcome.kind.value, outcome.stage, name)
            kept[sig] += 1
            if kept[sig] <= args.max_per_signature:
                path = save_finding(args.findings, data, outcome, name, what)
                print(f"[{time.monotonic() - t0:6.0f}s] {outcome.kind.value} at {outcome.stage}: {name}: {what} "
                      f"({outcome.detail}) -> {path.name}", flush=True)
    total = sum(counts.values())
    print(f"\n{total} inputs in {time.monotonic() - t0:.0f} s ({total / max(time.monotonic() - t0, 1e-9):.1f}/s)")
    for kind in Kind:
        print(f"  {kind.value:13s} {counts[kind.value]:7d}")
    print("per seed (rejected/load error/invoke error/loaded/crash/hang/python error):")
    for n in names:
        print(f"  {n:36s} " + " ".join(f"{per_seed[(n, k.value)]:6d}" for k in Kind))
    print(f"distinct bad signatures (kind, stage, seed): {len(kept)}; findings in {args.findings}")
    return 1 if any(counts[k.value] for k in (Kind.CRASH, Kind.HANG, Kind.PY_ERROR)) else 0


def _disable_graph_checks() -> None:
    import edgekit.runtimes.tflite_file as tf

    tf.check_graph = lambda *_a, **_k: None  # type: ignore[assignment]
    tf.read_flat_map = lambda _data: {}  # type: ignore[assignment]


if __name__ == "__main__":
    sys.exit(main())
