"""Video sources (camera, file, stream, images, Pi camera) read by a background thread.

Frames are RGB uint8 throughout edgekit: OpenCV's BGR is converted once, here. A live
source (camera, stream, or a file played with ``realtime=True``) keeps only the newest
frame, so the model never works on a stale one; a file otherwise yields every frame::

    with VideoSource(parse_source("clip.mp4", realtime=True)) as src:
        while (frame := src.get()) is not None:
            ...  # frame.image, frame.index, frame.capture_ts
"""

from __future__ import annotations

import enum
import glob
import logging
import os
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, NamedTuple, Protocol, TypeVar

import cv2
import numpy as np

from edgekit.errors import InputError, SourceError
from edgekit.video_readers import BadFrame, open_reader

__all__ = ["Channel", "SourceKind", "background_priority", "SourceSpec", "Reconnect", "Frame", "SourceStats", "Reader", "LazyReader", "VideoSource",
           "parse_source", "IMAGE_EXTENSIONS"]

log = logging.getLogger(__name__)
T = TypeVar("T")

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".gif"})
_STREAM_SCHEMES = ("rtsp://", "rtsps://", "rtmp://", "http://", "https://", "udp://", "tcp://", "srt://")


BACKGROUND_NICE = 19


def background_priority() -> None:
    """Give the calling thread the lowest CPU priority (Linux; elsewhere nothing).

    For work that only has to stay ahead of the model, such as reading a file frame by
    frame: it then runs in the gaps the interpreter's threads leave instead of preempting
    them mid-layer (measured on 2 cores with SSD MobileNet: 0.84 -> 0.89 of the bare
    interpreter's rate). Never for a live source, whose newest frame must be ready at once.
    """
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)  # Linux: per thread
        except OSError:
            pass


class SourceKind(str, enum.Enum):
    CAMERA = "camera"  # OpenCV device: an index or /dev/videoN
    FILE = "file"  # a video file
    STREAM = "stream"  # RTSP / HTTP / ... URL
    IMAGES = "images"  # one image file, a folder or a glob
    PICAMERA = "picamera"  # Raspberry Pi camera through picamera2


@dataclass(frozen=True)
class SourceSpec:
    """Where frames come from. ``width``/``height``/``fps`` are requests for cameras; for a
    file ``fps`` overrides its own rate when ``realtime`` plays it like a camera."""

    kind: SourceKind
    target: str | int = 0
    width: int | None = None
    height: int | None = None
    fps: float | None = None
    realtime: bool = False
    images: tuple[str, ...] = ()  # the files of an IMAGES source, in order

    @property
    def live(self) -> bool:
        """True when frames arrive on their own clock and only the newest matters."""
        return self.kind in (SourceKind.CAMERA, SourceKind.STREAM, SourceKind.PICAMERA) or (
            self.kind is SourceKind.FILE and self.realtime)

    @property
    def reconnects(self) -> bool:
        """True when a lost source is opened again (cameras and streams; a file just ends)."""
        return self.kind in (SourceKind.CAMERA, SourceKind.STREAM, SourceKind.PICAMERA)

    def __str__(self) -> str:
        if self.kind is SourceKind.IMAGES:
            return f"{len(self.images)} image(s) from {self.target}"
        return f"{self.kind.value} {self.target}" + (" (realtime)" if self.realtime else "")


def parse_source(source: str | int | os.PathLike[str], *, width: int | None = None, height: int | None = None,
                 fps: float | None = None, realtime: bool = False) -> SourceSpec:
    """Tell what ``source`` is: a camera index or /dev/videoN, a URL, an image, a folder or glob of
    images, or a video file.

    Raises:
        SourceError: the path does not exist, or the folder/glob holds no image.
    """
    kw = dict(width=width, height=height, fps=fps, realtime=realtime)
    if isinstance(source, int) or (isinstance(source, str) and source.isdigit()):
        return SourceSpec(SourceKind.CAMERA, int(source), **kw)  # type: ignore[arg-type]
    text = os.fspath(source)
    if text.startswith("/dev/video"):
        return SourceSpec(SourceKind.CAMERA, text, **kw)  # type: ignore[arg-type]
    if text.lower().startswith(_STREAM_SCHEMES):
        return SourceSpec(SourceKind.STREAM, text, **kw)  # type: ignore[arg-type]
    p = Path(text)
    if any(ch in text for ch in "*?[") and not p.exists():
        return _images(text, sorted(glob.glob(text)))
    if p.is_dir():
        return _images(text, sorted(str(f) for f in p.iterdir() if f.suffix.lower() in IMAGE_EXTENSIONS))
    if not p.exists():
        raise SourceError(f"source {text!r} does not exist. Pass a video or image file, a folder of images, "
                          "a glob like 'photos/*.jpg', an rtsp:// or http:// URL, or --camera N.")
    if p.suffix.lower() in IMAGE_EXTENSIONS:
        return _images(text, [text])
    return SourceSpec(SourceKind.FILE, text, **kw)  # type: ignore[arg-type]


def _images(target: str, files: list[str]) -> SourceSpec:
    files = [f for f in files if Path(f).is_file()]
    if not files:
        raise SourceError(f"no images in {target!r} (looked for {', '.join(sorted(IMAGE_EXTENSIONS))}). "
                          "Check the folder or the pattern (quote it so the shell does not expand it).")
    return SourceSpec(SourceKind.IMAGES, target, images=tuple(files))


@dataclass(frozen=True)
class Reconnect:
    """Backoff for reopening a camera or stream that stopped delivering frames."""

    first_delay: float = 0.5
    max_delay: float = 8.0
    give_up_after: float | None = None  # seconds of trying; None keeps trying until stopped


class Frame:
    """One captured frame. ``index`` counts the frames the source produced (gaps: dropped).

    ``image`` is RGB uint8 (H, W, 3). A frame OpenCV decoded is kept in OpenCV's BGR order
    (``bgr=True``) and converted the first time ``image`` is read: the loop resizes the BGR
    pixels and swaps the channels of the small result only, so a frame nobody looks at is
    never converted whole (0.5 ms of CPU for 640x480, 3% of an SSD MobileNet inference).
    """

    __slots__ = ("index", "capture_ts", "timestamp", "capture_ms", "_rgb", "_bgr")

    def __init__(self, index: int, image: np.ndarray, capture_ts: float, timestamp: float, capture_ms: float,
                 *, bgr: bool = False) -> None:
        self.index = index
        self.capture_ts = capture_ts  # time.perf_counter() when it was ready (a realtime file: when it was due)
        self.timestamp = timestamp  # time.time() at the same moment
        self.capture_ms = capture_ms  # reading and decoding it
        self._rgb, self._bgr = (None, image) if bgr else (image, None)

    @property
    def image(self) -> np.ndarray:
        """The RGB pixels (converted from BGR once, on first use)."""
        if self._rgb is None:
            self._rgb = cv2.cvtColor(self._bgr, cv2.COLOR_BGR2RGB)
        return self._rgb

    @property
    def pixels(self) -> tuple[np.ndarray, bool]:
        """The pixels as decoded and whether they are BGR, without converting anything."""
        return (self._rgb, False) if self._rgb is not None else (self._bgr, True)  # type: ignore[return-value]

    @property
    def bgr(self) -> np.ndarray:
        """The pixels in OpenCV's BGR order (for cv2.imshow and VideoWriter)."""
        if self._bgr is None:
            self._bgr = cv2.cvtColor(self._rgb, cv2.COLOR_RGB2BGR)
        return self._bgr

    @property
    def shape(self) -> tuple[int, ...]:
        return (self._rgb if self._rgb is not None else self._bgr).shape  # type: ignore[union-attr]

    def __repr__(self) -> str:
        return f"Frame(index={self.index}, shape={self.shape}, capture_ts={self.capture_ts:.3f})"


class SourceStats(NamedTuple):
    captured: int
    dropped: int
    undecodable: int
    reopens: int


class Reader(Protocol):
    """What VideoSource reads from; :func:`edgekit.video_readers.open_reader` makes them."""

    fps: float | None
    frames: int | None  # how many a file or folder holds; None for live sources

    def read(self) -> np.ndarray | None: ...  # a frame (RGB, or BGR if .bgr); None at the end; raises BadFrame

    def skip(self) -> bool: ...  # pass one frame without decoding it; False at the end

    def close(self) -> None: ...


class LazyReader(Reader, Protocol):
    """A live reader that can take a frame now and decode it later (``lazy = True``), as a V4L2
    camera does (dequeue a buffer, convert it on retrieve): VideoSource then decodes only the
    frames the model will see, in the consumer's thread."""

    lazy: bool

    def grab(self) -> bool: ...  # take the next frame without decoding it; False at the end

    def retrieve(self) -> np.ndarray: ...  # decode the last grabbed frame; raises BadFrame


class Channel(Generic[T]):
    """Hands items from one thread to another: newest-only (an unread item is replaced and
    counted in :attr:`dropped`) or a bounded FIFO (``put`` waits for room)."""

    def __init__(self, capacity: int = 1, keep_latest: bool = False) -> None:
        self._items: deque[T] = deque()
        self._capacity = 1 if keep_latest else max(1, capacity)
        self._keep_latest = keep_latest
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0

    def put(self, item: T) -> bool:
        """Hand over ``item``; False (and nothing done) once the channel is closed."""
        with self._cond:
            if self._keep_latest:
                self.dropped += len(self._items)  # the unread item is stale now
                self._items.clear()
            else:
                while len(self._items) >= self._capacity and not self._closed:
                    self._cond.wait()
            if self._closed:
                return False
            self._items.append(item)
            self._cond.notify_all()
            return True

    def get(self, timeout: float | None = None) -> T | None:
        """The next item; None when the channel is closed and empty, or after ``timeout`` seconds."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items or self._closed, timeout) or not self._items:
                return None
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def close(self, discard: bool = False) -> None:
        """No more puts; ``get`` drains what is left (nothing with ``discard``) then returns None."""
        with self._cond:
            self._closed = True
            if discard:
                self._items.clear()
            self._cond.notify_all()

    @property
    def done(self) -> bool:
        """Closed and drained."""
        with self._cond:
            return self._closed and not self._items


class VideoSource:
    """Reads a source in a background thread. A context manager; :meth:`close` is safe twice.

    Raises (from :meth:`open` and :meth:`start`):
        SourceError: the source cannot be opened (a camera's message lists the devices found).
    """

    def __init__(self, spec: SourceSpec | str | int | os.PathLike[str], *, reconnect: Reconnect = Reconnect(), buffer: int = 4,
                 opener: Callable[[SourceSpec], Reader] = open_reader) -> None:
        self.spec = spec if isinstance(spec, SourceSpec) else parse_source(spec)
        self._reconnect = reconnect
        self._opener = opener
        self._buffer: Channel[Frame] = Channel(buffer, keep_latest=self.spec.live)
        self._reader: Reader | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._index = self._captured = self._skipped = self._undecodable = self._reopens = 0
        # Lazy live reading (see LazyReader): the newest grabbed frame waits here undecoded.
        self._lazy = False
        self._reader_lock = threading.Lock()
        self._grabbed = threading.Condition()
        self._pending: tuple[int, float, float] | None = None  # (index, capture_ts, timestamp)
        self._ended = False
        self._replaced = 0
        self._stale = 0  # live frames passed over for a fresher one due soon (see fresh)
        # Live sources: hand out the newest frame, unless it is over half a period old and the
        # next one is due within the other half (see _fresher). False: always the newest at once.
        self.fresh = True
        # A file or folder may be read in the consumer's thread instead of a capture thread
        # (set before start(); the loop does when several workers take turns reading it).
        self.pull = False
        self._pulling = self._pull_ended = False
        # A file is read at background priority, in the gaps one multi-threaded interpreter leaves;
        # the loop turns this off when single-threaded interpreters share the cores (see Performance).
        self.background = True

    def open(self) -> VideoSource:
        """Open the source without reading from it yet, so errors surface early, in the caller's thread."""
        if self._reader is None and self._thread is None:
            self._reader = self._opener(self.spec)
            self._lazy = self.spec.live and bool(getattr(self._reader, "lazy", False))
        return self

    def start(self) -> VideoSource:
        """Open the source if needed and start reading it in the background."""
        if self.pull and not self.spec.live:
            self.open()
            self._pulling = True
            return self
        if self._thread is None:
            self.open()
            self._thread = threading.Thread(target=self._run, name="edgekit-capture", daemon=True)
            self._thread.start()
        return self

    @property
    def fps(self) -> float | None:
        """The source's frame rate where it reports one (a request's, else the reader's)."""
        return self.spec.fps or (self._reader.fps if self._reader else None)

    @property
    def frames(self) -> int | None:
        """How many frames a file or folder holds (None for live sources, or before :meth:`open`)."""
        return getattr(self._reader, "frames", None)

    def get(self, timeout: float | None = None) -> Frame | None:
        """The next frame: the newest one for a live source, the next in order for a file.

        Returns None when the source has ended (see :attr:`finished`) or ``timeout`` passed.

        Raises:
            SourceError: the source failed for good (e.g. gave up reconnecting).
        """
        if self._pulling:
            return self._pull()
        frame = self._take(timeout) if self._lazy else self._buffer.get(timeout)
        if frame is not None and self.spec.live and self.fresh and not self._lazy:  # lazily: in _take
            frame = self._fresher(frame)
        if frame is None and self._error is not None:
            raise self._error
        return frame

    def _fresher(self, frame: Frame) -> Frame:
        """A live frame older than half a frame period is swapped for the next one, due within
        the other half: a model slower than the camera then starts on a frame about P/8 old on
        average instead of P/2 (P = 1/fps), for at most P/2 of waiting."""
        wait = self._stale_wait(frame.capture_ts)
        if wait is None:
            return frame
        newer = self._buffer.get(wait)
        if newer is None:
            return frame
        self._stale += 1
        return newer

    def _take(self, timeout: float | None) -> Frame | None:
        """Lazy reading: decode the newest grabbed frame here, in the consumer's thread."""
        deadline = None if timeout is None else time.perf_counter() + timeout
        while True:
            with self._grabbed:
                left = None if deadline is None else max(0.0, deadline - time.perf_counter())
                if not self._grabbed.wait_for(lambda: self._pending is not None or self._ended, left):
                    return None
                self._wait_if_stale()
            with self._reader_lock:  # no grab between taking the newest frame's number and decoding it
                with self._grabbed:
                    pending, self._pending = self._pending, None
                reader = self._reader
                if pending is not None and reader is None:
                    self._replaced += 1  # closed meanwhile
                    pending = None
                if pending is None:
                    if self._ended:
                        return None
                    continue
                index, ts, wall = pending
                t0 = time.perf_counter()
                try:
                    image = reader.retrieve()  # type: ignore[attr-defined]
                except BadFrame as exc:
                    self._undecodable += 1
                    log.warning("skipped an undecodable frame of %s: %s", self.spec, exc)
                    continue
                ms = (time.perf_counter() - t0) * 1e3
            return Frame(index, image, ts, wall, ms, bgr=bool(getattr(reader, "bgr", False)))

    def _pull(self) -> Frame | None:
        """A file or folder read in the caller's thread (see ``pull``); one caller at a time."""
        with self._reader_lock:
            reader = self._reader
            while reader is not None and not self._stop.is_set():
                t0 = time.perf_counter()
                try:
                    image = reader.read()
                except BadFrame as exc:
                    self._undecodable += 1
                    self._index += 1
                    log.warning("skipped an undecodable frame of %s: %s", self.spec, exc)
                    continue
                except Exception as exc:  # noqa: BLE001 - the same contract as the capture thread
                    self._error = SourceError(f"reading {self.spec} failed: {type(exc).__name__}: {exc}")
                    break
                if image is None:
                    break
                t1 = time.perf_counter()
                frame = Frame(self._index, image, t1, time.time(), (t1 - t0) * 1e3,
                              bgr=bool(getattr(reader, "bgr", False)))
                self._index += 1
                self._captured += 1
                return frame
            self._pull_ended = True
            self._close_reader()
        if self._error is not None:
            raise self._error
        return None

    def _wait_if_stale(self) -> None:
        """(Holding ``_grabbed``.) Lazily read, the same policy as :meth:`_fresher`, decided
        before decoding: wait for the next frame instead of decoding one over P/2 old."""
        pending = self._pending
        wait = None if pending is None or not self.fresh else self._stale_wait(pending[1])
        if pending is not None and wait is not None:  # the grab that replaces it counts it as dropped
            index = pending[0]
            self._grabbed.wait_for(lambda: self._ended or (self._pending or pending)[0] != index, wait)

    def _stale_wait(self, capture_ts: float) -> float | None:
        """None when a frame captured at ``capture_ts`` is fresh enough (at most half a frame
        period old, or the rate is unknown); else how long to wait for the next one (until it
        is due, plus a quarter period of slack)."""
        fps = self.fps
        if not fps:
            return None
        period = 1.0 / fps
        age = time.perf_counter() - capture_ts
        return None if age <= period / 2 else period - age + period / 4

    @property
    def finished(self) -> bool:
        if self._pulling:
            return self._pull_ended
        if self._lazy:
            return self._ended and self._pending is None
        return self._buffer.done

    @property
    def stats(self) -> SourceStats:
        return SourceStats(self._captured, self._buffer.dropped + self._skipped + self._replaced + self._stale,
                           self._undecodable, self._reopens)

    # --- the capture thread ---------------------------------------------------------------
    def _run(self) -> None:
        if not self.spec.live and self.background:
            background_priority()
        try:
            if self._lazy:
                self._grab_all()
            else:
                self._read_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer through get()
            self._error = exc if isinstance(exc, SourceError) else SourceError(
                f"reading {self.spec} failed: {type(exc).__name__}: {exc}")
        finally:
            if not self._lazy:  # lazily read, the last frame grabbed may still be decoded: close() releases it
                self._close_reader()
            self._buffer.close()
            with self._grabbed:
                self._ended = True
                self._grabbed.notify_all()

    def _grab_all(self) -> None:
        """Lazy reading: take each frame as it comes, leave the newest undecoded for :meth:`_take`."""
        paced = self.spec.realtime and self.spec.kind is SourceKind.FILE
        period, start = 1.0 / (self.fps or 30.0), time.perf_counter()
        while not self._stop.is_set():
            reader = self._reader
            if reader is None:
                return
            due = start + self._index * period  # frames fall due on the file's clock; late ones are
            wait = due - time.perf_counter()  # grabbed at once, each replacing the one before
            if paced and wait > 0 and self._stop.wait(wait):
                return
            total = getattr(reader, "frames", None)
            if total and self._index >= total:
                return  # a failed grab past the end would also spoil the frame grabbed before it
            with self._reader_lock:
                if not reader.grab():  # type: ignore[attr-defined]
                    with self._grabbed:
                        if self._pending is not None:  # the failed grab spoiled it
                            self._pending = None
                            self._replaced += 1
                    return
                now = time.perf_counter()
                ts = due if paced else now
                with self._grabbed:
                    if self._pending is not None:
                        self._replaced += 1  # never decoded: the consumer was busy
                    self._pending = (self._index, ts, time.time() - (now - ts))
                    self._grabbed.notify_all()
            self._index += 1
            self._captured += 1

    def _read_all(self) -> None:
        paced = self.spec.realtime and self.spec.kind is SourceKind.FILE
        period, start = 1.0 / (self.fps or 30.0), time.perf_counter()
        while not self._stop.is_set():
            reader = self._reader or self._reopen()
            if reader is None:
                return
            bgr = bool(getattr(reader, "bgr", False))
            due = self._keep_pace(reader, start, period) if paced else 0.0
            if due is None:
                return
            t0 = time.perf_counter()
            try:
                image = reader.read()
            except BadFrame as exc:
                self._undecodable += 1
                self._index += 1
                log.warning("skipped an undecodable frame of %s: %s", self.spec, exc)
                continue
            if image is None:
                if not self.spec.reconnects:
                    return
                log.warning("%s stopped delivering frames; reopening it", self.spec)
                self._close_reader()
                continue
            t1 = time.perf_counter()
            # A file played like a camera was "captured" when its frame was due, not when decoded.
            ts = due if paced else t1
            frame = Frame(self._index, image, ts, time.time() - (t1 - ts), (t1 - t0) * 1e3, bgr=bgr)
            if not self._buffer.put(frame):
                return  # closed: the consumer has stopped
            self._index += 1
            self._captured += 1

    def _keep_pace(self, reader: Reader, start: float, period: float) -> float | None:
        """Wait until the next frame is due, or skip (undecoded) those a camera would have
        overwritten meanwhile. Returns when it was due; None when stopped or at the end."""
        now = time.perf_counter()
        due = start + self._index * period
        if now < due:
            return None if self._stop.wait(due - now) else due
        for _ in range(int((now - due) / period)):
            if not reader.skip():
                return None
            self._index += 1
            self._skipped += 1
        return start + self._index * period

    def _reopen(self) -> Reader | None:
        """Open the lost source again with growing pauses; None when stopped meanwhile.

        Raises:
            SourceError: ``give_up_after`` seconds passed without success.
        """
        delay, began = self._reconnect.first_delay, time.perf_counter()
        while not self._stop.wait(delay):
            try:
                self._reader = self._opener(self.spec)
                self._reopens += 1
                log.warning("reopened %s", self.spec)
                return self._reader
            except (SourceError, InputError) as exc:
                log.warning("reopening %s failed (next try in %.1f s): %s", self.spec, delay, exc)
            waited = time.perf_counter() - began
            limit = self._reconnect.give_up_after
            if limit is not None and waited >= limit:
                raise SourceError(f"{self.spec} was lost and could not be reopened for {waited:.0f} s; "
                                  "check the cable, the network or the URL.")
            delay = min(delay * 2, self._reconnect.max_delay)
        return None

    def _close_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            try:
                reader.close()
            except Exception:  # noqa: BLE001 - a reader failing to close is not worth losing results over
                log.debug("closing the reader of %s failed", self.spec, exc_info=True)

    # --- lifetime -------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the capture thread and release the source. Safe to call more than once."""
        self._stop.set()
        self._buffer.close(discard=True)
        with self._grabbed:
            self._ended = True
            self._pending = None
            self._grabbed.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self._thread is None or not self._thread.is_alive():
            with self._reader_lock:
                self._close_reader()
        self._pull_ended = self._pull_ended or self._pulling

    def __enter__(self) -> VideoSource:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
