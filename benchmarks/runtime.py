"""What edgekit's Model adds per inference, against the bare TFLite interpreter, in one run.

Three ways to run the same interpreter on the same input, interleaved in blocks (the order
rotates each block, so drift in clock speed or load hits all three alike):

* ``bare``: ``interpreter.set_tensor / invoke / get_tensor`` (what edgekit wraps);
* ``Model.run``: edgekit's checked, converting call;
* ``zero-copy``: ``model.input_view(0)[...] = x; model.invoke(); model.output(i)``.

Every inference is timed on its own; the figures are medians. A second pass skips
``invoke`` to show the Python-side cost of each path alone, in microseconds.

    python benchmarks/runtime.py [MODEL] [--blocks 60] [--per-block 5] [--threads N]

MODEL defaults to the SSD MobileNet in tests/data. Target: Model.run under 3% over bare.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgekit.runtimes import load_model
from edgekit.runtimes.timing import machine_line

DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "tests" / "data" / "ssd_mobilenet_v1_coco_quant.tflite"
TARGET_OVERHEAD = 0.03


def _paths(model: Any, x: np.ndarray, invoke: bool) -> dict[str, Callable[[], Any]]:
    interp = model.interpreter
    in_idx = model.inputs[0].index
    out_idx = [s.index for s in model.outputs]
    n_out = len(model.outputs)
    real_invoke = interp.invoke

    def skip() -> None:
        return None

    def bare() -> Any:
        interp.set_tensor(in_idx, x)
        (real_invoke if invoke else skip)()
        return [interp.get_tensor(i) for i in out_idx]

    def run() -> Any:
        return model.run(x)

    def zero_copy() -> Any:
        model.input_view(0)[...] = x
        model.invoke()
        return [model.output(i) for i in range(n_out)]

    return {"bare": bare, "Model.run": run, "zero-copy": zero_copy}


def interleaved(paths: dict[str, Callable[[], Any]], blocks: int, per_block: int) -> dict[str, np.ndarray]:
    """Per-call seconds of each path, run in rotating order, ``per_block`` calls at a time."""
    names = list(paths)
    times: dict[str, list[float]] = {n: [] for n in names}
    clock = time.perf_counter
    for b in range(blocks):
        for name in names[b % len(names):] + names[:b % len(names)]:
            fn = paths[name]
            for _ in range(per_block):
                t0 = clock()
                fn()
                times[name].append(clock() - t0)
    return {n: np.asarray(t) for n, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default=str(DEFAULT_MODEL))
    ap.add_argument("--blocks", type=int, default=60)
    ap.add_argument("--per-block", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--delegate", default="auto")
    args = ap.parse_args(argv)
    print(machine_line())
    if not Path(args.model).exists():
        print(f"model {args.model!r} not found; pass a .tflite path", file=sys.stderr)
        return 2

    with load_model(args.model, args.delegate, args.threads) as model:
        spec = model.inputs[0]
        rng = np.random.default_rng(0)
        info = np.iinfo(spec.dtype) if np.issubdtype(spec.dtype, np.integer) else None
        x = (rng.integers(info.min, info.max, spec.shape, endpoint=True, dtype=spec.dtype) if info
             else rng.uniform(-1, 1, spec.shape).astype(spec.dtype))
        print(f"{Path(args.model).name}: {spec}, {model.backend}, delegate {model.delegate.value}, "
              f"{model.num_threads} threads; {args.blocks} blocks x {args.per_block} calls per path\n")

        for fn in _paths(model, x, invoke=True).values():  # warm-up, and the paths agree
            fn()
        timed = interleaved(_paths(model, x, invoke=True), args.blocks, args.per_block)
        bare = float(np.median(timed["bare"]))
        bare_p10 = float(np.percentile(timed["bare"], 10))
        print(f"{'path':<10} {'median ms':>10} {'vs bare':>9} {'p10 ms':>8} {'vs bare':>9} {'p90 ms':>8} "
              f"{'paired':>8}")
        for name, t in timed.items():
            med, p10 = float(np.median(t)), float(np.percentile(t, 10))
            paired = _block_ratios(t, timed["bare"], args.per_block) - 1
            print(f"{name:<10} {med * 1e3:>10.3f} {med / bare - 1:>+9.2%} {p10 * 1e3:>8.3f} "
                  f"{p10 / bare_p10 - 1:>+9.2%} {np.percentile(t, 90) * 1e3:>8.3f} {paired:>+8.2%}")
        print("(paired: median over blocks of the block's median / the neighbouring bare block's median)")

        # The same paths with invoke skipped (Model.run's invoke stubbed out): the wrapper alone.
        saved = model._invoke
        model._invoke = lambda: None  # benchmark-only: isolate the Python-side work
        try:
            calls = interleaved(_paths(model, x, invoke=False), 20, 200)
        finally:
            model._invoke = saved
        print("\nPython-side cost per call, invoke skipped:")
        for name, t in calls.items():
            print(f"  {name:<10} {np.median(t) * 1e6:8.1f} us")

    # Paired blocks cancel slow drift in load; the invoke-free figure is immune to it.
    paired = _block_ratios(timed["Model.run"], timed["bare"], args.per_block) - 1
    wrapper = float(np.median(calls["Model.run"]) - np.median(calls["bare"]))
    verdict = "within" if paired < TARGET_OVERHEAD else "OVER"
    print(f"\nModel.run overhead per inference (paired): {paired:+.2%}, {verdict} the {TARGET_OVERHEAD:.0%} target.")
    print(f"Its Python-side extra, {wrapper * 1e6:.1f} us, is {wrapper / bare:.3%} of a {bare * 1e3:.2f} ms inference; "
          "differences beyond that are the machine's noise (other processes on the cores).")
    return 0


def _block_ratios(a: np.ndarray, b: np.ndarray, per_block: int) -> float:
    """Median over blocks of (median of a's block / median of b's block): pairs neighbours in time."""
    ma = np.median(a.reshape(-1, per_block), axis=1)
    mb = np.median(b.reshape(-1, per_block), axis=1)
    return float(np.median(ma / mb))


if __name__ == "__main__":
    sys.exit(main())
