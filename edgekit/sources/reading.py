"""The ways a :class:`~edgekit.sources.VideoSource` reads an opened reader (see ``ReadMode``).

Each is its own small class, chosen once when reading starts: :class:`PulledReading` (here)
reads a file in the thread that asks for a frame; :class:`~edgekit.sources.capture.ThreadedReading`
and :class:`~edgekit.sources.lazy.LazyReading` read in a capture thread (their common part is
:class:`BackgroundReading`). They share the reader's lifetime, the frame numbers and the tallies
behind :class:`SourceStats`.
"""

from __future__ import annotations

import abc
import logging
import threading
import time

import numpy as np

from edgekit.errors import SourceError
from edgekit.sources.frames import Frame, SourceStats
from edgekit.sources.readers import BadFrame, Reader
from edgekit.sources.spec import SourceSpec

__all__ = ["SourceReading", "PulledReading", "BackgroundReading"]

log = logging.getLogger("edgekit.sources")


# A live frame older than this share of a frame period is passed over for the next one (every live
# reading decides with BackgroundReading._stale_wait). Where the model is slower than the camera,
# the loop otherwise starts on frames of every age from 0 to the threshold. Measured on SSD
# MobileNet at a 150 fps camera (13.7 ms inference, 2-core AMD EPYC): at 1/2, capture-to-result
# p50 was 1.29x the bare inference (frames alternately 0.2 and 2.6 ms old) and 61 frames/s were
# inferred; at 1/4, 1.15x on 51 frames/s (16 % less CPU). The time from an event to the first
# result whose frame saw it stayed within 0.6 ms (25.4 against 26.0 ms): fewer frames are
# inferred, each fresher. A model faster than the camera takes each frame as it comes either way.
FRESH_AGE = 0.25


class SourceReading(abc.ABC):
    """One way of reading ``reader`` (opened for ``spec``); it closes the reader when done."""

    def __init__(self, spec: SourceSpec, reader: Reader) -> None:
        self.spec = spec
        self.reader: Reader | None = reader
        self._reader_lock = threading.Lock()  # held while the reader is used outside the capture thread
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._index = 0  # the next frame's number (gaps: frames dropped or undecodable)
        self._captured = self._undecodable = self._reopens = 0
        self._passed_over = 0  # never handed out: skipped to keep pace, replaced undecoded, or stale

    @abc.abstractmethod
    def start(self) -> None:
        """Begin reading (a thread, or nothing when frames are read on demand)."""

    @abc.abstractmethod
    def get(self, timeout: float | None) -> Frame | None:
        """The next frame; None at the end or after ``timeout`` seconds.

        Raises:
            SourceError: the source failed for good.
        """

    @property
    @abc.abstractmethod
    def finished(self) -> bool:
        """True once every frame has been handed out (or the reading was closed)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop reading and close the reader. Safe to call more than once."""

    @property
    def fps(self) -> float | None:
        """The requested rate, else the reader's (None while a lost source is being reopened)."""
        reader = self.reader
        return self.spec.fps or (reader.fps if reader is not None else None)

    @property
    def stats(self) -> SourceStats:
        return SourceStats(self._captured, self._passed_over + self._dropped_unread(), self._undecodable,
                           self._reopens)

    def _dropped_unread(self) -> int:
        """Frames replaced in a hand-over before anyone read them (a capture thread's buffer)."""
        return 0

    def _stale_wait(self, capture_ts: float) -> float | None:
        """None when a frame captured at ``capture_ts`` is fresh enough (at most ``FRESH_AGE``
        of a frame period old, or the rate is unknown); else how long to wait for the next one
        (until it is due, plus a quarter period of slack)."""
        fps = self.fps
        if not fps:
            return None
        period = 1.0 / fps
        age = time.perf_counter() - capture_ts
        return None if age <= period * FRESH_AGE else period - age + period / 4

    def _failed(self, exc: BaseException) -> SourceError:
        return exc if isinstance(exc, SourceError) else SourceError(
            f"reading {self.spec} failed: {type(exc).__name__}: {exc}")

    def _skip_bad(self, exc: BadFrame) -> None:
        self._undecodable += 1
        log.warning("skipped an undecodable frame of %s: %s", self.spec, exc)

    def _read(self, reader: Reader) -> tuple[np.ndarray | None, float] | None:
        """``reader.read()`` (None at the end) and when it began; None for an undecodable frame,
        which is counted, logged and uses up its frame number."""
        t0 = time.perf_counter()
        try:
            return reader.read(), t0
        except BadFrame as exc:
            self._skip_bad(exc)
            self._index += 1
            return None

    def _close_reader(self) -> None:
        reader, self.reader = self.reader, None
        if reader is not None:
            try:
                reader.close()
            except Exception:  # noqa: BLE001 - a reader failing to close is not worth losing results over
                log.debug("closing the reader of %s failed", self.spec, exc_info=True)


class PulledReading(SourceReading):
    """A file or folder read in the thread that calls :meth:`get`, one caller at a time: workers
    that take turns on a file read it themselves (while one reads and resizes, the other infers),
    so a capture thread would only add a hand-over per frame."""

    def __init__(self, spec: SourceSpec, reader: Reader) -> None:
        super().__init__(spec, reader)
        self._ended = False

    def start(self) -> None:
        pass  # nothing runs between calls to get()

    def get(self, timeout: float | None = None) -> Frame | None:
        """The next frame in order (``timeout`` does not apply: nothing to wait for but the file)."""
        with self._reader_lock:
            reader = self.reader
            while reader is not None and not self._stop.is_set():
                try:
                    got = self._read(reader)
                except Exception as exc:  # noqa: BLE001 - the same contract as a capture thread
                    self._error = self._failed(exc)
                    break
                if got is None:
                    continue
                image, t0 = got
                if image is None:
                    break
                t1 = time.perf_counter()
                frame = Frame(self._index, image, t1, time.time(), (t1 - t0) * 1e3, bgr=reader.bgr)
                self._index += 1
                self._captured += 1
                return frame
            self._ended = True
            self._close_reader()
        if self._error is not None:
            raise self._error
        return None

    @property
    def finished(self) -> bool:
        return self._ended

    def close(self) -> None:
        self._stop.set()
        with self._reader_lock:
            self._close_reader()
        self._ended = True


class BackgroundReading(SourceReading):
    """A reading whose reader is used in a capture thread named ``edgekit-capture`` (:meth:`_run`),
    frames handed to the consumer by :meth:`_next`; the thread's error is raised from :meth:`get`."""

    def __init__(self, spec: SourceSpec, reader: Reader) -> None:
        super().__init__(spec, reader)
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def _run(self) -> None:
        """The capture thread: read until the end or :meth:`close`, keeping an error in ``_error``."""

    @abc.abstractmethod
    def _next(self, timeout: float | None) -> Frame | None:
        """The next frame for the consumer, None at the end or after ``timeout`` seconds."""

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="edgekit-capture", daemon=True)
            self._thread.start()

    def get(self, timeout: float | None = None) -> Frame | None:
        frame = self._next(timeout)
        if frame is None and self._error is not None:
            raise self._error
        return frame

    def _join_then_close_reader(self) -> None:
        """After the stop is signalled: wait for the thread, and close the reader unless it hangs in it."""
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self._thread is None or not self._thread.is_alive():
            with self._reader_lock:
                self._close_reader()
