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
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    positive_int,
    progress,
    quiet_native_logs,
    resolve_warmup,
    source_spec,
    stop_on_signals,
)
from edgekit.commands._defaults import FieldDefault
from edgekit.contract import OutputFormat, ResizeMode
from edgekit.errors import InputError, ModelError
from edgekit.labels import NO_LABELS_NOTE
from edgekit.loop import Performance, Stream, throughput_threads
from edgekit.outputs import output_file_arg
from edgekit.results import FrameResult
from edgekit.runtimes.loader import load_model
from edgekit.tasks import Classifier, ClassifierOptions, Detector, DetectorOptions
from edgekit.sources import VideoSource

if TYPE_CHECKING:  # the sinks load with the flag that asks for them (--save, --show, --json): start-up time
    from edgekit.sinks import Sink
    from edgekit.sources import SourceSpec
    from edgekit.sinks.video_writer import VideoWriterSink, WindowSink

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser(
        "detect", help="detect objects in a camera, stream, video or images in real time",
        description="Run a detection model (SSD or raw YOLO; a classifier works too) on frames as they "
                    "arrive. Live sources keep only the newest frame, so results stay fresh; files are read "
                    "frame by frame (--realtime plays them like a camera). Frames are RGB throughout.",
        formatter_class=HelpFormatter)
    add_source_arguments(p)
    p.add_argument("-t", "--threshold", type=fraction, default=None,
                   help="minimum score (default: the model's metadata's, else 0.5)")
    p.add_argument("--classes", type=labels_arg, help="keep only these labels or class ids, e.g. person,car")
    p.add_argument("--labels", help="labels file (one per line, or 'id label') instead of the model's own")
    rs = p.add_mutually_exclusive_group()
    rs.add_argument("--resize", choices=[m.value for m in ResizeMode], default=None,
                    help="how frames fit the input; when absent, the model's metadata says, else stretch")
    rs.add_argument("--letterbox", dest="resize", action="store_const", const="letterbox",
                    help="short for --resize letterbox")
    p.add_argument("--iou", type=fraction, default=None, help="NMS IoU threshold for YOLO; when absent, the model's, else 0.45")
    p.add_argument("-k", "--top-k", type=positive_int, default=FieldDefault("edgekit.tasks:ClassifierOptions", "top_k"),
                   help="classes per frame for a classifier")
    add_runtime_arguments(p)
    p.add_argument("--performance", choices=[m.value for m in Performance], default=Performance.AUTO.value,
                   help="latency: one interpreter, each frame as soon as possible; throughput: two "
                        "single-threaded interpreters on consecutive frames of a file; auto: throughput for a "
                        "file or folder read in full (without --threads), latency for everything live")
    add_stop_arguments(p)
    p.add_argument("--json", action="store_true", help="one JSON object per processed frame on stdout")
    p.add_argument("--track", action="store_true",
                   help="follow objects across frames (ByteTrack): only the detections on a confirmed track are "
                        "kept, each with its track_id in the JSON and \"#id\" on --save/--show (as supervision's "
                        "ByteTrack: a new object's box shows from its second frame)")
    p.add_argument("--save", metavar="OUT.avi", type=output_file_arg, help="write the annotated video (MJPG .avi or mp4v .mp4)")
    p.add_argument("--show", action="store_true", help="show the annotated frames in a window")
    p.add_argument("--serve", type=_serve, metavar="[HOST:]PORT",
                   help="serve the live annotated view and the loop's figures as a web page on PORT (127.0.0.1 "
                        "unless HOST is given; another HOST needs the token in EDGEKIT_DASHBOARD_TOKEN, or one is "
                        "made up and printed)")
    p.add_argument("--summary-json", metavar="FILE", type=output_file_arg, help="write the run's figures to FILE as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-frame lines, notes or summary on stderr")
    p.set_defaults(func=run)


def _serve(text: str) -> tuple[str, int]:
    from edgekit.inspect.dashboard.cellview import parse_serve

    try:
        return parse_serve(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected PORT or HOST:PORT (e.g. 8080 or 0.0.0.0:8080), got {text!r}") \
            from None


def _make_task(args: argparse.Namespace, spec: SourceSpec) -> Detector | Classifier:
    """The classifier or detector for ``args.model``: the file is loaded once, and its reading
    (:meth:`~edgekit.runtimes.model.Model.reading`) says which; the task takes the loaded model."""
    common = dict(model=args.model, labels=args.labels, resize=args.resize, delegate=args.delegate,
                  num_threads=args.threads, warmup=args.warmup, isolate=getattr(args, "isolate", None))
    with native_stderr_filtered():
        # A file read in full runs on THROUGHPUT's single-threaded workers: the task's interpreter,
        # loaded as one of them, is not kept beside them (see Detector._throughput_workers).
        threads = args.threads if str(args.delegate).startswith("edgetpu") \
            else throughput_threads(spec, args.performance, args.threads) or args.threads
        model = load_model(args.model, args.delegate, threads, isolate=common["isolate"])
        try:
            classifier = model.reading().format is OutputFormat.CLASSES
        except ModelError:  # the detector says why
            classifier = False
        if classifier:
            if args.classes:
                model.close()
                raise InputError("--classes filters detections; this model is a classifier (use -t/--top-k)")
            return Classifier(ClassifierOptions(**common, top_k=args.top_k,
                                                threshold=0.5 if args.threshold is None else args.threshold), model)
        return Detector(DetectorOptions(**common, threshold=args.threshold, classes=args.classes,
                                        iou_threshold=args.iou), model)


def _notes(task: Detector | Classifier, quiet: bool) -> None:
    notes = list(task.model.notes)
    w = task.warmup_ms
    if len(w) >= 2 and w[0] > 50 and w[0] > 3 * w[-1]:
        notes.append(f"the first inference took {w[0]:.0f} ms, later ones {w[-1]:.0f} ms (the delegate warms up "
                     "once; --warmup runs it before the first frame)")
    if task.labels_note:
        notes.append(task.labels_note)
    if task.labels is None:
        notes.append(NO_LABELS_NOTE)
    for note in notes if not quiet else ():
        print(f"edgekit detect: note: {note}", file=sys.stderr)


def _line(result: FrameResult) -> str:
    """The default output: one readable line per frame."""
    items = ", ".join(f"{d['label']} {d['score']:.2f}" + (f" {[round(v) for v in d['box']]}" if "box" in d else "")
                      for d in result.result.to_list())
    return f"frame {result.index}  {result.latency_ms:.1f} ms  {items or '-'}"


def run(args: argparse.Namespace) -> int:
    from edgekit.loop.malloc import release_frames_when_freed

    debug = quiet_native_logs()
    release_frames_when_freed()  # this process's peak memory: frames are not kept in per-thread heaps
    spec = source_spec(args)
    resolve_warmup(args, spec)
    writer: VideoWriterSink | None = None
    window: WindowSink | None = None
    if args.save or args.show:
        from edgekit.sinks.video_writer import VideoWriterSink, WindowSink

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
        with contextlib.nullcontext() if debug else native_noise_dropped_on_failure():
            source.open()  # a camera that is not there fails before the model loads
        with logging_to_stderr("detect", args.quiet), _make_task(args, spec) as task:
            _notes(task, args.quiet)
            if writer is not None:
                writer.fps = source.fps or 30.0
            if args.json:
                from edgekit.sinks.jsonl import JsonlSink

                sinks.append(JsonlSink(sys.stdout))
            elif not args.quiet and all(s is served for s in sinks):
                sinks.append(LineSink(_line))
            stream: Stream = task.stream(source, max_frames=args.max_frames, duration=args.duration,
                                         performance=args.performance, track=args.track)
            bar = progress(source.frames or 0, "frames", args.quiet or not source.frames or spec.live
                           or any(isinstance(s, LineSink) for s in sinks))
            with stream, stop_on_signals(stream, received):
                for result in stream:
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
        close_all("detect", sinks, failing=sys.exc_info()[1] is not None)
    if not args.quiet:
        print(f"edgekit detect: {summary.line()}", file=sys.stderr)
    if args.summary_json:
        try:
            Path(args.summary_json).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write --summary-json {args.summary_json!r}: {exc.strerror or exc}") from None
    return 130 if "SIGINT" in received else 0

