"""`edgekit demo`: the whole product on the built-in inspection example, offline.

generate data -> train a float detector (a fixed number of steps: the same model on any machine)
-> :func:`edgekit.converters.engines.tflite_converter` to float32 and int8 (accuracy check and gate) -> float32
against int8 latency -> :meth:`edgekit.Detector.stream` on a belt video played as a camera ->
the inspection :class:`edgekit.inspect.Cell` (PASS/FAIL per frame into JSON-lines events) ->
summary.md. Every step calls the library and writes its files from the typed results, so the
demo is also the worked example to copy (see :mod:`edgekit.demo.steps`).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Iterator

import numpy as np

from edgekit.demo.options import DemoOptions, DemoResult
from edgekit.demo.report import write_summary

__all__ = ["DemoOptions", "DemoResult", "run_demo"]


class _Steps:
    """Numbered progress lines on stderr, and the time each step took."""

    def __init__(self, total: int, quiet: bool, result: DemoResult) -> None:
        self.total, self.quiet, self.result, self.n = total, quiet, result, 0

    @contextlib.contextmanager
    def step(self, name: str, what: str) -> Iterator[None]:
        self.n += 1
        if not self.quiet:
            print(f"[{self.n}/{self.total}] {what} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        yield
        self.result.steps[name] = time.perf_counter() - t0
        if not self.quiet:
            print(f"      done in {self.result.steps[name]:.1f} s", file=sys.stderr, flush=True)


def run_demo(options: DemoOptions) -> DemoResult:
    """Run the whole pipeline into ``options.out`` and return its figures.

    Raises:
        EdgekitError: a step failed (its own message says why); ConversionError when
            TensorFlow is missing (training and conversion need ``pip install 'edgekit-tflite[convert]'``).
    """
    from edgekit.demo import (TrainConfig, evaluate, evaluate_outputs, export_saved, load_split, make_splits,
                              make_video, train)
    from edgekit.demo.figures import measured_figures, write_figures
    from edgekit.demo.steps import bench_models, convert_models, detect_video, inspect_video, write_inspection_config
    from edgekit.runtimes.timing import cpu_name
    from edgekit.runtimes import load_model

    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    result = DemoResult(out=out, cpu=cpu_name(), train_steps=options.train_steps)
    steps = _Steps(7, options.quiet, result)

    with steps.step("generate", f"generating {options.n_train + options.n_cal + options.n_val} images "
                                f"and a {options.video_frames}-frame belt video"):
        splits = make_splits(out / "data", options.n_train, options.n_cal, options.n_val, seed=options.seed)
        truth = make_video(out / "belt.avi", n_frames=options.video_frames, fps=options.video_fps,
                           seed=options.seed)
        (out / "data" / "belt_truth.json").write_text(json.dumps(truth.to_dict()))

    with steps.step("train", f"training the float detector (Keras, YOLO-style head), {options.train_steps} steps"):
        from edgekit.converters._native import import_tensorflow

        import_tensorflow()  # quietly: TensorFlow's start-up log says nothing a demo user can act on
        model = train(splits.train, TrainConfig(steps=options.train_steps, seed=options.seed),
                      progress=not options.quiet)
        keras_path = export_saved(model, out / "detector.keras")
        val = load_split(splits.validation)
        result.float_map = evaluate(model, val).map

    with steps.step("convert", "converting to float32 and int8, checking int8 against the float model (gate)"):
        result.conversions = conv = convert_models(Path(keras_path), out, splits, max_drop=options.max_drop,
                                                   seed=options.seed, quiet=options.quiet)
        # The int8 model against the same labels as the float one (the table of summary.md).
        with load_model(conv.int8.output) as m:
            outputs = [m.run(s.image[None].astype(np.float32))[0] for s in val]
        result.int8_map = evaluate_outputs(outputs, val).map

    with steps.step("bench", f"timing float32 against int8 (XNNPACK) on {result.cpu}"):
        paths = [conv.float32.output, conv.int8.output]
        result.bench = dict(zip((p.name for p in paths), bench_models(paths, options.bench_runs)))
        # one set of figures for bench.json, report/, convert_*.json and summary.md
        result.figures = figures = measured_figures(conv, result.bench, result.cpu)
        result.conversions = conv = write_figures(conv, figures, out)

    with steps.step("detect", "Detector.stream on the belt video, played as a camera"):
        result.detect = detect_video(conv.int8.output, out / "belt.avi", truth, out)

    with steps.step("inspect", "the inspection cell: one PASS/FAIL per part at the line (and per frame) into "
                               "JSON-lines events"):
        result.inspect = inspect_video(write_inspection_config(out, conv.int8.output, truth.size), out,
                                       truth.fps)

    with steps.step("summary", "writing summary.md"):
        result.summary_path = write_summary(result, options, truth)
    return result
