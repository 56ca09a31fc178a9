"""`edgekit detect -m MODEL --camera N | --source PATH/URL/GLOB | --picamera`: the real-time loop.

Headless by default: one line per frame on stdout (or one JSON object per line with
--json), an annotated video with --save, a window with --show where there is a display.
A summary (fps, capture-to-result latency, per-stage times, frames dropped) ends the run
on stderr, and in --summary-json FILE. SIGINT/SIGTERM stop cleanly: every output is
flushed and closed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from edgekit.commands._common import (
    delegate_arg,
    fraction,
    native_stderr_filtered,
    non_negative_int,
    positive_float,
    positive_int,
    progress,
)
from edgekit.contract import OutputFormat, detect_format
from edgekit.errors import InputError, ModelError
from edgekit.loop import Stream
from edgekit.results import Detections, FrameResult
from edgekit.runtimes.tensors import inspect_model
from edgekit.sinks import Sink
from edgekit.sinks.jsonl import JsonlSink
from edgekit.sinks.video_writer import VideoWriterSink, WindowSink
from edgekit.tasks import Classifier, ClassifierOptions, Detector, DetectorOptions
from edgekit.sources import SourceKind, SourceSpec, VideoSource, parse_source

if TYPE_CHECKING:
    from edgekit.track import ByteTracker

__all__ = ["register", "run"]

log = logging.getLogger("edgekit")


def _classes(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected labels or ids separated by commas (person,car), got {text!r}")
    return items


def register(subparsers: Any) -> None:
    from edgekit.cli import HelpFormatter

    p = subparsers.add_parser(
        "detect", help="detect objects in a camera, stream, video or images in real time",
        description="Run a detection model (SSD or raw YOLO; a classifier works too) on frames as they "
                    "arrive. Live sources keep only the newest frame, so results stay fresh; files are read "
                    "frame by frame (--realtime plays them like a camera). Frames are RGB throughout.",
        formatter_class=HelpFormatter)
    p.add_argument("-m", "--model", required=True, help="the .tflite model")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--camera", type=non_negative_int, metavar="N", help="camera number (/dev/videoN)")
    src.add_argument("--source", metavar="PATH|URL|GLOB", nargs="+",
                     help="video file, rtsp:// or http:// URL, image file(s), folder of images or quoted glob")
    src.add_argument("--picamera", action="store_true", help="the Raspberry Pi camera module (picamera2)")
    p.add_argument("--width", type=positive_int, help="camera frame width to ask for")
    p.add_argument("--height", type=positive_int, help="camera frame height to ask for")
    p.add_argument("--fps", type=positive_float, help="camera frame rate to ask for; with --realtime, "
                   "the rate to play a file at instead of its own")
    p.add_argument("--realtime", action="store_true",
                   help="play a video file at its frame rate, dropping frames when behind, as a camera does")
    p.add_argument("-t", "--threshold", type=fraction, default=None,
                   help="minimum score (default: the model's metadata's, else 0.5)")
    p.add_argument("--classes", type=_classes, help="keep only these labels or class ids, e.g. person,car")
    p.add_argument("--labels", help="labels file (one per line, or 'id label') instead of the model's own")
    rs = p.add_mutually_exclusive_group()
    rs.add_argument("--resize", choices=["stretch", "letterbox"], default=None,
                    help="how frames fit the input; when absent, the model's metadata says, else stretch")
    rs.add_argument("--letterbox", dest="resize", action="store_const", const="letterbox",
                    help="short for --resize letterbox")
    p.add_argument("--iou", type=fraction, default=None, help="NMS IoU threshold for YOLO; when absent, the model's, else 0.45")
    p.add_argument("-k", "--top-k", type=positive_int, default=5, help="classes per frame for a classifier")
    p.add_argument("--delegate", type=delegate_arg, default="auto", help="auto, cpu, xnnpack, edgetpu or edgetpu:DEVICE")
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads; when absent, every core up to 4")
    p.add_argument("--warmup", type=non_negative_int, default=2, help="inferences before the first frame")
    p.add_argument("--performance", choices=["auto", "latency", "throughput"], default="auto",
                   help="latency: one interpreter, each frame as soon as possible; throughput: two "
                        "single-threaded interpreters on consecutive frames of a file; auto: throughput for a "
                        "file or folder read in full (without --threads), latency for everything live")
    p.add_argument("--max-frames", type=positive_int, help="stop after this many processed frames")
    p.add_argument("--duration", type=positive_float, metavar="SECONDS", help="stop after this long")
    p.add_argument("--json", action="store_true", help="one JSON object per processed frame on stdout")
    p.add_argument("--track", action="store_true",
                   help="follow objects across frames (ByteTrack): a track_id in every JSON detection, "
                        "\"#id\" on --save/--show")
    p.add_argument("--save", metavar="OUT.avi", help="write the annotated video (MJPG .avi or mp4v .mp4)")
    p.add_argument("--show", action="store_true", help="show the annotated frames in a window")
    p.add_argument("--serve", type=_serve, metavar="[HOST:]PORT",
                   help="serve the live annotated view and the loop's figures as a web page on PORT (127.0.0.1 "
                        "unless HOST is given; another HOST needs the token in EDGEKIT_DASHBOARD_TOKEN, or one is "
                        "made up and printed)")
    p.add_argument("--summary-json", metavar="FILE", help="write the run's figures to FILE as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-frame lines, notes or summary on stderr")
    p.set_defaults(func=run)


def _source_spec(args: argparse.Namespace) -> SourceSpec:
    kw = dict(width=args.width, height=args.height, fps=args.fps, realtime=args.realtime)
    if args.picamera:
        return SourceSpec(SourceKind.PICAMERA, "picamera2", **kw)  # type: ignore[arg-type]
    if args.camera is not None:
        return SourceSpec(SourceKind.CAMERA, args.camera, **kw)  # type: ignore[arg-type]
    if len(args.source) == 1:
        return parse_source(args.source[0], **kw)  # type: ignore[arg-type]
    # Several paths: an unquoted glob the shell expanded, or images listed one by one.
    specs = [parse_source(p) for p in args.source]
    if any(s.kind is not SourceKind.IMAGES for s in specs):
        raise InputError(f"--source takes one video, stream or folder, or several image files; got "
                         f"{len(args.source)} paths including {next(s for s in specs if s.kind is not SourceKind.IMAGES)}")
    images = tuple(f for s in specs for f in s.images)
    return SourceSpec(SourceKind.IMAGES, f"{len(args.source)} paths", images=images)


def _serve(text: str) -> tuple[str, int]:
    from edgekit.inspect.dashboard.cellview import parse_serve

    try:
        return parse_serve(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PORT or HOST:PORT (e.g. 8080 or 0.0.0.0:8080), got {text!r}") \
            from None


def _tracker(threshold: float) -> ByteTracker:
    """ByteTrack on the boxes detect keeps (all at least --threshold): each can start or feed a track."""
    from edgekit.track import ByteTracker, TrackerOptions

    return ByteTracker(TrackerOptions(high_threshold=threshold, low_threshold=threshold,
                                      new_track_threshold=threshold))


def _is_classifier(path: str) -> bool:
    info = inspect_model(path)
    try:
        return detect_format(info.outputs, info.metadata) is OutputFormat.CLASSES
    except ModelError:  # the file may not record every output shape; the interpreter will tell
        return False


def _make_task(args: argparse.Namespace) -> Detector | Classifier:
    common = dict(model=args.model, labels=args.labels, resize=args.resize, delegate=args.delegate,
                  num_threads=args.threads, warmup=args.warmup, isolate=getattr(args, "isolate", None))
    with native_stderr_filtered():
        if _is_classifier(args.model):
            if args.classes:
                raise InputError("--classes filters detections; this model is a classifier (use -t/--top-k)")
            return Classifier(ClassifierOptions(**common, top_k=args.top_k,
                                                threshold=0.5 if args.threshold is None else args.threshold))
        return Detector(DetectorOptions(**common, threshold=args.threshold, classes=args.classes,
                                        iou_threshold=args.iou))


def _notes(task: Detector | Classifier, quiet: bool) -> None:
    notes = list(task.model.notes)
    w = task.warmup_ms
    if len(w) >= 2 and w[0] > 50 and w[0] > 3 * w[-1]:
        notes.append(f"the first inference took {w[0]:.0f} ms, later ones {w[-1]:.0f} ms (the delegate warms up "
                     "once; --warmup runs it before the first frame)")
    if task.labels_note:
        notes.append(task.labels_note)
    if task.labels is None:
        notes.append("the model carries no labels, so classes are shown as ids; pass --labels FILE")
    for note in notes if not quiet else ():
        print(f"edgekit detect: note: {note}", file=sys.stderr)


class _TextSink:
    """The default output: one readable line per frame."""

    def write(self, result: FrameResult) -> None:
        items = ", ".join(f"{d['label']} {d['score']:.2f}" + (f" {[round(v) for v in d['box']]}" if "box" in d else "")
                          for d in result.result.to_list())
        print(f"frame {result.index}  {result.latency_ms:.1f} ms  {items or '-'}", flush=True)

    def close(self) -> None:
        sys.stdout.flush()


@contextlib.contextmanager
def _stop_on_signals(stream: Stream, received: list[str]) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signals can only be caught in the main thread (edgekit embedded in an app)
        return

    def handler(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        received.append(name)
        stream.stop(name)
        signal.signal(signum, old[signum])  # a second Ctrl-C does not wait for the clean stop

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


@contextlib.contextmanager
def _native_noise_dropped_on_failure() -> Iterator[None]:
    """OpenCV's own demuxers print to file descriptor 2 while failing to open a file (e.g. an AVI
    cut short: "Unexpected element..."); when opening fails our one-line error says it better.
    When it succeeds, whatever they printed is passed on."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr: leave it alone
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            if text and not failed:
                sys.stderr.write(text)
                sys.stderr.flush()


@contextlib.contextmanager
def _logging(quiet: bool) -> Iterator[None]:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("edgekit detect: %(message)s"))
    log.addHandler(handler)
    old_level = log.level
    log.setLevel(logging.ERROR if quiet else logging.WARNING)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)


def run(args: argparse.Namespace) -> int:
    import cv2

    debug = os.environ.get("EDGEKIT_DEBUG") == "1"
    if not debug:  # our errors say it better than OpenCV's and FFmpeg's logs
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)
        os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # read when FFmpeg first opens something
    spec = _source_spec(args)
    writer = VideoWriterSink(args.save) if args.save else None  # checks the path before the slow part
    window = WindowSink() if args.show else None
    source = VideoSource(spec)
    received: list[str] = []
    sinks: list[Sink] = [s for s in (writer, window) if s is not None]
    served: Any = None  # the dashboard's sink (--serve)
    try:
        if args.serve:  # a port that is taken fails before the model loads
            from edgekit.inspect.dashboard.cellview import DashboardSink, detect_dashboard

            dash = detect_dashboard(*args.serve, model_path=args.model).start()
            served = DashboardSink(dash)
            sinks.append(served)
            print(f"edgekit detect: {dash.announce()}", file=sys.stderr, flush=True)
        with contextlib.nullcontext() if debug else _native_noise_dropped_on_failure():
            source.open()  # a camera that is not there fails before the model loads
        with _logging(args.quiet), _make_task(args) as task:
            _notes(task, args.quiet)
            if writer is not None:
                writer.fps = source.fps or 30.0
            if args.json:
                sinks.append(JsonlSink(sys.stdout))
            elif not args.quiet and all(s is served for s in sinks):
                sinks.append(_TextSink())
            stream: Stream = task.stream(source, max_frames=args.max_frames, duration=args.duration,
                                         performance=args.performance)
            bar = progress(source.frames or 0, "frames", args.quiet or not source.frames or spec.live
                           or any(isinstance(s, _TextSink) for s in sinks))
            tracker = _tracker(task.threshold or 0.5) if args.track else None
            with stream, _stop_on_signals(stream, received):
                for result in stream:
                    if tracker is not None and isinstance(result.result, Detections):
                        result = dataclasses.replace(result, result=tracker.update(result.result).as_detections())
                    for sink in sinks:
                        sink.write(result)
                    bar.update()
                    if window is not None and window.quit:
                        stream.stop("window closed")
            bar.close()
            summary = stream.summary
            doc = {**summary.to_dict(), "model": args.model, "runtime": task.model.describe()}
    finally:
        source.close()
        _close_all(sinks, failing=sys.exc_info()[1] is not None)
    if not args.quiet:
        print(f"edgekit detect: {summary.line()}", file=sys.stderr)
    if args.summary_json:
        try:
            Path(args.summary_json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write --summary-json {args.summary_json!r}: {exc.strerror or exc}") from None
    return 130 if "SIGINT" in received else 0


def _close_all(sinks: list[Any], failing: bool = False) -> None:
    """Close every sink, then raise the first error; when the run is already failing, its
    error is the one raised, and these are printed (one line each) so none is hidden."""
    errors = []
    for sink in sinks:
        try:
            sink.close()
        except Exception as exc:  # noqa: BLE001 - close the others first, then report
            errors.append(exc)
    if errors and failing:
        for exc in errors:
            print(f"edgekit detect: error: {exc}", file=sys.stderr)
    elif errors:
        raise errors[0]
