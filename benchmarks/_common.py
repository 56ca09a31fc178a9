"""What the benchmark scripts share: the CPU's name for every figure, the rotating order of
interleaved rounds, and timing models or steps in such rounds.

Rounds interleave and their order rotates, so drift in clock speed or machine load hits every
row alike; the scripts print medians. Import it after putting the repository root on sys.path.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Mapping, Sequence, TypeVar

from edgekit.runtimes.timing import cpu_name, interleaved_invoke_ms, machine_line

__all__ = ["cpu_name", "machine_line", "rotated", "timed_rounds", "invoke_ms"]

T = TypeVar("T")


def rotated(items: Sequence[T], r: int) -> list[T]:
    """Round `r`'s order: `items` rotated by `r`, so each goes first in turn."""
    k = r % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def timed_rounds(cases: Mapping[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Milliseconds of each case per round, every round running each case once in rotating order."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(rounds):
        for name in rotated(list(cases), r):
            t0 = time.perf_counter()
            cases[name]()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return times


def invoke_ms(paths: Sequence[Path], threads: int, rounds: int, per_round: int) -> list[list[float]]:
    """Milliseconds of each invoke of each model (XNNPACK, uniform noise in, 5 warm-up invokes), in
    interleaved rounds of `per_round` invokes whose order rotates; one list per model, round after round."""
    return interleaved_invoke_ms(paths, threads=threads, blocks=rounds, per_block=per_round, warmup=5)
