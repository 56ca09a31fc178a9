"""`edgekit segment -m MODEL --source ...`: the class of every pixel, per-class areas, regions.

One line per frame (the classes present with their share of the frame, and the region count),
or one JSON object per frame with --json (per-class areas and every region's box and area);
--save writes the frames with the classes colored over them (a video, or images for a .png/.jpg
name). `edgekit pose` (commands/pose.py) runs the same loop with a pose model.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any, Callable

from edgekit.commands._defaults import FieldDefault
from edgekit.commands._common import (
    LineSink,
    add_runtime_arguments,
    add_source_arguments,
    add_stop_arguments,
    close_all,
    fraction,
    labels_arg,
    logging_to_stderr,
    native_noise_dropped_on_failure,
    native_stderr_filtered,
    non_negative_int,
    progress,
    quiet_native_logs,
    resolve_warmup,
    source_spec,
    stop_on_signals,
)
from edgekit.contract.enums import ResizeMode
from edgekit.errors import InputError
from edgekit.drawing import draw
from edgekit.outputs import output_file, output_file_arg
from edgekit.results import FrameResult
from edgekit.sinks.jsonl import JsonlSink
from edgekit.sinks.video_writer import VideoWriterSink
from edgekit.sources import VideoSource

__all__ = ["register", "run", "add_common_arguments", "run_vision", "ImageSink"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


OPTIONS = "edgekit.tasks_vision:SegmenterOptions"  # the flags' defaults are its own


def add_common_arguments(p: argparse.ArgumentParser) -> None:
    """Model, source, output and runtime flags shared by `segment` and `pose` (as `detect` spells them)."""
    add_source_arguments(p)
    p.add_argument("--resize", choices=[m.value for m in ResizeMode], default=None,
                   help="how frames fit the input; when absent, the model's metadata says, else letterbox")
    add_runtime_arguments(p)
    add_stop_arguments(p)
    p.add_argument("--json", action="store_true", help="one JSON object per processed frame on stdout")
    p.add_argument("--save", metavar="OUT", type=output_file_arg, help="write the annotated frames: a video (.avi, .mp4) or images "
                   "(.png, .jpg; numbered when there are several frames)")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-frame lines or summary on stderr")


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser(
        "segment", help="segment frames: the class of every pixel, areas and regions",
        description="Run a segmentation model (an arg-max map [1, H, W] or per-class scores [1, H, W, C]) on "
                    "frames. Each frame gives the area of every class present and its connected regions (box, "
                    "area in pixels), in the frame's own pixels.",
        formatter_class=HelpFormatter)
    add_common_arguments(p)
    p.add_argument("-t", "--threshold", type=fraction, default=FieldDefault(OPTIONS, "threshold"),
                   help="for one-channel (foreground) models: the probability that makes a pixel foreground")
    p.add_argument("--min-area", type=non_negative_int, default=FieldDefault(OPTIONS, "min_area"), metavar="PIXELS",
                   help="leave out regions smaller than this")
    p.add_argument("--classes", type=labels_arg, help="regions of these labels or class ids only, e.g. scratch,dent")
    p.add_argument("--labels", help="labels file (one per line, or 'id label') instead of the model's own")
    p.set_defaults(func=run)


class ImageSink:
    """Writes each annotated frame as an image: ``OUT.png``, or ``OUT_000012.png`` after the first."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.suffix.lower() not in IMAGE_SUFFIXES:
            raise InputError(f"--save {str(path)!r}: an image name ends in {', '.join(IMAGE_SUFFIXES)}")
        output_file(self.path, "--save")
        self.count = 0

    def write(self, result: FrameResult) -> None:
        import cv2

        if result.frame_bgr is None:
            raise InputError(f"frame {result.index} carries no image to draw on")
        image = draw(result.frame_bgr, result.result, bgr=True)
        target = self.path if self.count == 0 else self.path.with_name(
            f"{self.path.stem}_{result.index:06d}{self.path.suffix}")
        if not cv2.imwrite(str(target), image):
            raise InputError(f"cannot write {str(target)!r} (permissions? disk full?)")
        self.count += 1

    def close(self) -> None:
        pass


def _text_line(result: FrameResult) -> str:
    seg = result.segmentation
    parts = [f"{c['label']} {100 * c['fraction']:.1f}%" for c in seg.mask.to_list()]
    return f"frame {result.index}  {result.latency_ms:.1f} ms  {', '.join(parts) or '-'}  {len(seg)} regions"


def run_vision(args: argparse.Namespace, name: str, make_task: Callable[[], Any],
               line: Callable[[FrameResult], str]) -> int:
    """The loop of `segment` and `pose`: source -> task -> text, JSON or saved frames; a summary on stderr."""
    debug = quiet_native_logs()
    spec = source_spec(args)
    resolve_warmup(args, spec)
    saver: Any = None
    if args.save:
        saver = ImageSink(args.save) if Path(args.save).suffix.lower() in IMAGE_SUFFIXES else VideoWriterSink(args.save)
    source = VideoSource(spec)
    received: list[str] = []
    sinks: list[Any] = [saver] if saver is not None else []
    try:
        with contextlib.nullcontext() if debug else native_noise_dropped_on_failure():
            source.open()
        with logging_to_stderr(name, args.quiet), native_stderr_filtered(), make_task() as task:
            if isinstance(saver, VideoWriterSink):
                saver.fps = source.fps or 30.0
            if task.labels_note and not args.quiet:
                print(f"edgekit {name}: note: {task.labels_note}", file=sys.stderr)
            if args.json:
                sinks.append(JsonlSink(sys.stdout))
            elif not args.quiet:
                sinks.append(LineSink(line))
            stream = task.stream(source, max_frames=args.max_frames, duration=args.duration)
            bar = progress(source.frames or 0, "frames", True)
            with stream, stop_on_signals(stream, received):
                for result in stream:
                    for sink in sinks:
                        sink.write(result)
                    bar.update()
            bar.close()
            summary = stream.summary
    finally:
        source.close()
        close_all(name, sinks, failing=sys.exc_info()[1] is not None)
    if not args.quiet:
        print(f"edgekit {name}: {summary.line()}", file=sys.stderr)
    return 130 if "SIGINT" in received else 0


def run(args: argparse.Namespace) -> int:
    from edgekit.tasks_vision import Segmenter, SegmenterOptions

    def make() -> Segmenter:
        return Segmenter(SegmenterOptions(model=args.model, labels=args.labels, resize=args.resize,
                                          delegate=args.delegate, num_threads=args.threads, warmup=args.warmup,
                                          isolate=getattr(args, "isolate", None), threshold=args.threshold,
                                          min_area=args.min_area, classes=args.classes))

    return run_vision(args, "segment", make, _text_line)
