"""Helpers the subcommands share: argument types, aligned tables, progress, native log noise, and
the frame commands' (detect, segment, pose) source flags, signals, logging and sinks."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

from edgekit.commands._defaults import FieldDefault
from edgekit.errors import InputError
from edgekit.runtimes.delegates import Delegate

if TYPE_CHECKING:
    from edgekit.loop import Stream
    from edgekit.results import FrameResult
    from edgekit.sources import SourceSpec

__all__ = ["delegate_arg", "delegate_list_arg", "int_list_arg", "positive_int", "non_negative_int", "table", "progress",
           "native_stderr_filtered", "native_noise_dropped_on_failure", "labels_arg", "add_verbose_argument", "add_source_arguments",
           "add_runtime_arguments", "add_stop_arguments", "source_spec", "quiet_native_logs", "stop_on_signals",
           "logging_to_stderr", "LineSink", "close_all", "resolve_warmup"]

_DELEGATES = ", ".join(repr(d.value) for d in Delegate)
# --delegate's help and default, from the enum and the tasks' options (one place each)
DELEGATE_HELP = f"{', '.join(d.value for d in Delegate)} or {Delegate.EDGETPU.value}:DEVICE"
DELEGATE_DEFAULT = FieldDefault("edgekit.tasks:TaskOptions", "delegate")


def delegate_arg(text: str) -> str:
    """argparse type: one delegate ('auto', 'cpu', 'xnnpack', 'edgetpu', 'edgetpu:usb:1').

    Returns the normalized text; the enum is made by load_model. A bad value reads as an
    argparse invalid choice, so the parser offers "did you mean".
    """
    try:
        delegate, device = Delegate.parse(text)
    except InputError as exc:
        head = text.partition(":")[0]
        if head.strip().lower() in {d.value for d in Delegate}:
            raise argparse.ArgumentTypeError(str(exc)) from None  # a bad device, not a bad name
        raise argparse.ArgumentTypeError(f"invalid choice: {head!r} (choose from {_DELEGATES})") from None
    return delegate.value + (f":{device.option}" if device and device.option else "")


def delegate_list_arg(text: str) -> list[str]:
    """argparse type: a comma-separated list of delegates."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"give at least one delegate (one of {_DELEGATES})")
    return [delegate_arg(t) for t in items]


def _whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a number of at least {minimum}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _whole_number(text, 0)


def positive_float(text: str) -> float:
    """argparse type: a number above 0 (seconds, frames per second)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text}")
    return value


def fraction(text: str) -> float:
    """argparse type: a number between 0 and 1 (a score or IoU threshold)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text}")
    return value


def int_list_arg(text: str) -> list[int]:
    """argparse type: comma-separated positive integers, e.g. '1,2,4'."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas (e.g. 1,2,4), got {text!r}")
    return [positive_int(t) for t in items]


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], right: Sequence[bool] | None = None,
          indent: str = "") -> str:
    """Rows as aligned text columns under a header and a rule."""
    body = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(headers)]
    align = right or [False] * len(headers)

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if a else c.ljust(w) for c, w, a in zip(cells, widths, align)]
        return (indent + "  ".join(parts)).rstrip()

    rule = indent + "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in body)])


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)


def progress(total: int, desc: str, quiet: bool = False) -> Any:
    """A tqdm bar on stderr, or a do-nothing stand-in when quiet, not a TTY, or tqdm is absent."""
    if not quiet and sys.stderr.isatty():
        try:
            from tqdm import tqdm
        except ImportError:  # tqdm is optional on a device
            pass
        else:
            return tqdm(total=total, desc=desc, file=sys.stderr, leave=False, unit="run")
    return _NoProgress()


class _NoProgress:
    def update(self, n: int = 1) -> None:
        pass

    def set_description(self, desc: str) -> None:
        pass

    def close(self) -> None:
        pass


def native_stderr_filtered() -> contextlib.AbstractContextManager[None]:
    """Drop the interpreter's "INFO: Created TensorFlow Lite XNNPACK delegate" lines, keep the rest
    (the one filter, in edgekit.runtimes.native_log; load_model applies it too)."""
    from edgekit.runtimes.native_log import interpreter_info_dropped

    return interpreter_info_dropped()


def native_noise_dropped_on_failure() -> contextlib.AbstractContextManager[None]:
    """OpenCV's own demuxers print to file descriptor 2 while failing to open a file (e.g. an AVI
    cut short: "Unexpected element..."); when opening fails our one-line error says it better.
    When it succeeds, whatever they printed is passed on."""
    from edgekit.runtimes.native_log import fd2_captured

    return fd2_captured(lambda text, failed: "" if failed else text)


# --- the frame commands: detect, segment, pose -----------------------------------------------
def labels_arg(text: str) -> list[str]:
    """argparse type: labels or class ids separated by commas (person,car or 0,2)."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"expected labels or ids separated by commas (person,car), got {text!r}")
    return items


def add_source_arguments(p: argparse.ArgumentParser) -> None:
    """-m/--model and where frames come from: --camera, --source or --picamera, and how to read them."""
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


def add_runtime_arguments(p: argparse.ArgumentParser) -> None:
    """--delegate, --threads and --warmup."""
    p.add_argument("--delegate", type=delegate_arg, default=DELEGATE_DEFAULT, help=DELEGATE_HELP)
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads; when absent, every core up to 4")
    p.add_argument("--warmup", type=non_negative_int, default=None, metavar="N",
                   help="inferences before the first frame (default: 2 for a camera, stream or video, "
                        "none for images, whose first one is the result anyway)")


def add_stop_arguments(p: argparse.ArgumentParser) -> None:
    """--max-frames and --duration."""
    p.add_argument("--max-frames", type=positive_int, help="stop after this many processed frames")
    p.add_argument("--duration", type=positive_float, metavar="SECONDS", help="stop after this long")


def resolve_warmup(args: argparse.Namespace, spec: SourceSpec) -> None:
    """--warmup's default, once the source is known: 2 inferences before a live source or a video (its
    figures then start warm), none before images (one run each: warming up would only double the time)."""
    from edgekit.sources import SourceKind

    if args.warmup is None:
        args.warmup = 0 if spec.kind is SourceKind.IMAGES else 2


def source_spec(args: argparse.Namespace) -> SourceSpec:
    """The source the flags of :func:`add_source_arguments` name.

    Raises:
        InputError: several --source paths that are not all images.
    """
    from edgekit.sources import SourceKind, SourceSpec, parse_source  # OpenCV: only for the frame commands

    kw = dict(width=args.width, height=args.height, fps=args.fps, realtime=args.realtime)
    if args.picamera:
        return SourceSpec(SourceKind.PICAMERA, "picamera2", **kw)
    if args.camera is not None:
        return SourceSpec(SourceKind.CAMERA, args.camera, **kw)
    if len(args.source) == 1:
        return parse_source(args.source[0], **kw)
    # Several paths: an unquoted glob the shell expanded, or images listed one by one.
    specs = [parse_source(p) for p in args.source]
    if any(s.kind is not SourceKind.IMAGES for s in specs):
        raise InputError(f"--source takes one video, stream or folder, or several image files; got "
                         f"{len(args.source)} paths including {next(s for s in specs if s.kind is not SourceKind.IMAGES)}")
    images = tuple(f for s in specs for f in s.images)
    return SourceSpec(SourceKind.IMAGES, f"{len(args.source)} paths", images=images)


VERBOSE_HELP = ("show the native libraries' own log lines (TensorFlow, LiteRT, OpenCV, FFmpeg), "
                "which edgekit keeps quiet")


def add_verbose_argument(p: argparse.ArgumentParser, help: str = VERBOSE_HELP) -> None:  # noqa: A002
    """-v/--verbose: the native libraries' logs back (edgekit.cli adds it to every command that
    loads a model, an interpreter, OpenCV or TensorFlow; edgekit.runtimes.native_log decides)."""
    p.add_argument("-v", "--verbose", action="store_true", help=help)


def quiet_native_logs() -> bool:
    """Silence OpenCV's and FFmpeg's own logs (our errors say it better), unless -v or EDGEKIT_DEBUG=1
    asked for them (edgekit.runtimes.native_log.native_logs_shown).

    Returns whether they were asked for."""
    import cv2

    from edgekit.runtimes.native_log import native_logs_shown

    if native_logs_shown():
        return True
    native_log = getattr(getattr(cv2, "utils", None), "logging", None)  # absent from some builds
    if native_log is not None:
        native_log.setLogLevel(native_log.LOG_LEVEL_ERROR)
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")  # read when FFmpeg first opens something
    return False


@contextlib.contextmanager
def stop_on_signals(stream: Stream, received: list[str]) -> Iterator[None]:
    """SIGINT and SIGTERM stop the stream cleanly (their names land in `received`); a second one
    does not wait. Outside the main thread (edgekit embedded in an app) signals are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals can only be caught in the main thread
        return
    import signal  # only for a command that streams (classify does not: start-up time)

    def handler(signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        received.append(name)
        stream.stop(name)
        signal.signal(signum, old[signal.Signals(signum)])  # a second Ctrl-C does not wait for the clean stop

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


@contextlib.contextmanager
def logging_to_stderr(command: str, quiet: bool) -> Iterator[None]:
    """The library's warnings (errors only when quiet) on stderr as ``edgekit COMMAND: ...``."""
    log = logging.getLogger("edgekit")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"edgekit {command}: %(message)s"))
    log.addHandler(handler)
    old_level = log.level
    log.setLevel(logging.ERROR if quiet else logging.WARNING)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)


class LineSink:
    """The frame commands' default output: one readable line per frame on stdout."""

    def __init__(self, line: Callable[[FrameResult], str]) -> None:
        self.line = line

    def write(self, result: FrameResult) -> None:
        print(self.line(result), flush=True)

    def close(self) -> None:
        sys.stdout.flush()


def close_all(command: str, sinks: list[Any], failing: bool = False) -> None:
    """Close every sink, then raise the first error; when the run is already failing, its
    error is the one raised, and these are printed (one line each) so none is hidden."""
    errors = []
    for sink in sinks:
        try:
            sink.close()
        except Exception as exc:  # noqa: BLE001 - close the others first, then report
            errors.append(exc)
    if errors and failing:
        for error in errors:
            print(f"edgekit {command}: error: {error}", file=sys.stderr)
    elif errors:
        raise errors[0]
