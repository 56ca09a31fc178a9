"""The steps of ``edgekit demo`` after training, each calling the library and returning typed results:
:func:`edgekit.converters.engines.tflite_converter`, the runtime's timing, :meth:`edgekit.Detector.stream` and the
inspection :class:`edgekit.inspect.Cell`. Files are written from those results, never guessed."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from edgekit.demo.figures import MS_DIGITS, Conversions

if TYPE_CHECKING:
    from edgekit.runtimes.timing import BenchRow
    from edgekit.demo.conveyor import VideoTruth
    from edgekit.inspect.parts import PartVerdict
    from edgekit.loop import LoopSummary

__all__ = ["Conversions", "DetectRun", "InspectRun", "bench_models", "convert_models", "detect_video",
           "inspect_video", "write_inspection_config"]

DEFECTS = ("scratch", "dent", "missing_hole")
THRESHOLD = 0.4  # the detector's and the rules' score threshold on the belt video


def convert_models(keras_path: Path, out: Path, splits: Any, *, max_drop: float, seed: int,
                   quiet: bool) -> Conversions:
    """float32 and int8 conversions of the demo detector, int8 checked against float with the gate.
    Their reports are written once the two files are timed (:func:`edgekit.demo.figures.write_figures`),
    so that every file states the same sizes and latencies.

    Raises:
        ConversionError: TensorFlow is missing or the converter failed.
    """
    from edgekit.converters import ConvertOptions, Mode, OutputFormat, Task, convert

    base = ConvertOptions(seed=seed, labels=str(splits.labels), task=Task.DETECT, output_format=OutputFormat.YOLO,
                          progress=not quiet)
    data: dict[str, Any] = dict(calibration=str(splits.calibration), validation=str(splits.validation))
    f32 = convert(str(keras_path), out / "detector_float32.tflite", **data,
                  options=_replace(base, mode=Mode.FLOAT32, diagnose=False))
    q8 = convert(str(keras_path), out / "detector_int8.tflite", **data,
                 options=_replace(base, mode=Mode.INT8, max_drop=max_drop))
    return Conversions(f32, q8)


def _replace(options: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(options, **changes)


def bench_models(paths: Sequence[Path], runs: int) -> list[BenchRow]:
    """Latency of each model on the default delegate (XNNPACK) and thread count, one row each,
    run in turn and interleaved in rounds so that a busy moment does not fall on one model only
    (bench.json, with the sizes: :func:`edgekit.demo.figures.write_figures`).

    Raises:
        ModelError: a model does not load.
    """
    from edgekit.runtimes import load_model
    from edgekit.runtimes.timing import time_model

    rounds = 5
    rows: dict[Path, list[BenchRow]] = {p: [] for p in paths}
    models = [load_model(p, "auto") for p in paths]
    try:
        for r in range(rounds):
            for path, model in zip(paths, models):
                rows[path].append(time_model(model, max(runs // rounds, 3), 3, seed=r))
    finally:
        for m in models:
            m.close()
    return [_merge(rows[p], p.name) for p in paths]


def _merge(rows: list[BenchRow], name: str) -> BenchRow:
    """One row per model: the median over the rounds of each latency figure, in ms to 1 us (as printed)."""
    import dataclasses

    keys = rows[0].latency_ms or {}
    latency = {k: round(float(np.median([(r.latency_ms or {})[k] for r in rows])), MS_DIGITS) for k in keys}
    return dataclasses.replace(rows[0], latency_ms=latency, fps=1e3 / latency["mean"] if latency else None,
                               notes=[f"model {name}", *rows[0].notes])


@dataclass(frozen=True)
class DetectRun:
    summary: LoopSummary
    video_map: float  # mAP@0.5 of the processed frames against the video's ground truth


def detect_video(model: Path, video: Path, truth: VideoTruth, out: Path) -> DetectRun:
    """The int8 detector on the belt video played as a camera (realtime): each result to
    detections.jsonl, the loop's figures to detect_summary.json (annotated.avi is the cell's:
    :func:`inspect_video`).

    Raises:
        SourceError: the video cannot be read. ModelError: the model cannot run.
    """
    from edgekit.demo import CLASS_NAMES, mean_average_precision
    from edgekit.sinks.jsonl import JsonlSink
    from edgekit.tasks import Detector
    from edgekit.sources import VideoSource, parse_source

    preds, truths = [], []
    source = VideoSource(parse_source(str(video), realtime=True))
    with Detector.create_from_model_path(model, threshold=THRESHOLD) as detector:
        source.open()
        sinks = [JsonlSink(out / "detections.jsonl")]
        try:
            stream = detector.stream(source)
            with stream:
                for result in stream:
                    for sink in sinks:
                        sink.write(result)
                    if 0 <= result.index < len(truth.frames):
                        preds.append(result.detections)
                        truths.append(truth.frames[result.index])
        finally:
            for sink in sinks:
                sink.close()
            source.close()
        summary = stream.summary
        doc = {**summary.to_dict(), "model": str(model), "runtime": detector.model.describe()}
    (out / "detect_summary.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    video_map = mean_average_precision(preds, truths, CLASS_NAMES).map if preds else math.nan
    return DetectRun(summary, video_map)


def write_inspection_config(out: Path, model: Path, size: int | None = None) -> Path:
    """inspection.toml for the belt: no scratch, dent or missing hole may be seen; with ``size`` (the
    video's side) also one verdict per part at the middle of the frame (per-part mode)."""
    rules = "\n".join(f'[[rules]]\nlabel = "{d}"\nmax = 0\nmin_score = {THRESHOLD}\n' for d in DEFECTS)
    text = f"""# Written by `edgekit demo`: no defect may be seen on the belt.
device = "demo"
state_dir = "state"

[source]
path = "belt.avi"
realtime = true

[model]
path = "{model.name}"
threshold = {THRESHOLD}

[trigger]
mode = "continuous"

{rules}
[sinks.jsonl]
directory = "events"
"""
    if size is not None:
        from edgekit.inspect.parts.report import parts_tables

        text += parts_tables(size, size, defects=DEFECTS, defect_threshold=THRESHOLD)
    path = out / "inspection.toml"
    path.write_text(text, encoding="utf-8")
    return path


@dataclass(frozen=True)
class InspectRun:
    passed: int  # frames judged PASS
    failed: int  # frames judged FAIL
    summary: LoopSummary | None
    parts: tuple[PartVerdict, ...] = ()  # per-part mode: one verdict per part, in crossing order


def inspect_video(config_path: Path, out: Path, fps: float = 15.0) -> InspectRun:
    """The inspection cell of `config_path` on the belt video: every decision to verdicts.jsonl
    (and, through the cell's sinks, to events/); in per-part mode each judged frame to annotated.avi
    (counting line, track ids, each part's verdict from its crossing: :class:`edgekit.demo.annotate.VerdictVideo`).

    Raises:
        ConfigError: the config is wrong. ModelError, SourceError: as for the detector.
    """
    from edgekit.demo.annotate import VerdictVideo
    from edgekit.inspect import Cell, load_config
    from edgekit.inspect.parts import PartVerdict

    counts = {True: 0, False: 0}
    parts: list[PartVerdict] = []  # also `part` events in events/
    config = load_config(config_path)
    video = [VerdictVideo(out / "annotated.avi", fps)] if config.parts is not None else []
    with open(out / "verdicts.jsonl", "w", encoding="utf-8") as f, Cell(config, stages=video) as cell:
        for decision in cell.run():
            if isinstance(decision, PartVerdict):
                parts.append(decision)
                continue
            f.write(json.dumps(decision.to_payload(), separators=(",", ":")) + "\n")
            if decision.passed is not None:
                counts[decision.passed] += 1
    return InspectRun(counts[True], counts[False], cell.summary, tuple(parts))
