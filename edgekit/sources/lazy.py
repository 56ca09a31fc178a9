"""Lazy live reading: a capture thread grabs each frame as it comes and leaves the newest
undecoded; the consumer's thread decodes only the frame it takes (see ``LazyReader``)."""

from __future__ import annotations

import threading
import time

from edgekit.sources.frames import Frame
from edgekit.sources.readers import BadFrame, LazyReader
from edgekit.sources.reading import BackgroundReading
from edgekit.sources.spec import SourceSpec

__all__ = ["LazyReading"]


class LazyReading(BackgroundReading):
    """A live source whose reader grabs now and decodes later (a realtime MJPG file, a V4L2
    camera): frames the model never sees are never decoded. With ``fresh``, a grabbed frame over
    a quarter period old (reading.FRESH_AGE) is passed over for the next one, decided before decoding."""

    reader: LazyReader | None

    def __init__(self, spec: SourceSpec, reader: LazyReader, *, fresh: bool = True) -> None:
        super().__init__(spec, reader)
        self._fresh = fresh
        self._grabbed = threading.Condition()
        self._pending: tuple[int, float, float] | None = None  # (index, capture_ts, timestamp), undecoded
        self._ended = False

    def _next(self, timeout: float | None) -> Frame | None:
        """Decode the newest grabbed frame here, in the consumer's thread."""
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
                reader = self.reader
                if pending is not None and reader is None:
                    self._passed_over += 1  # closed meanwhile
                    pending = None
                if pending is None or reader is None:
                    if self._ended:
                        return None
                    continue
                index, ts, wall = pending
                t0 = time.perf_counter()
                try:
                    image = reader.retrieve()
                except BadFrame as exc:
                    self._skip_bad(exc)
                    continue
                ms = (time.perf_counter() - t0) * 1e3
            return Frame(index, image, ts, wall, ms, bgr=reader.bgr)

    def _wait_if_stale(self) -> None:
        """(Holding ``_grabbed``.) The policy of ThreadedReading._fresher, decided before
        decoding: wait for the next frame instead of decoding one over P/4 old."""
        pending = self._pending
        wait = None if pending is None or not self._fresh else self._stale_wait(pending[1])
        if pending is not None and wait is not None:  # the grab that replaces it counts it as dropped
            index = pending[0]
            self._grabbed.wait_for(lambda: self._ended or (self._pending or pending)[0] != index, wait)

    @property
    def finished(self) -> bool:
        return self._ended and self._pending is None

    def close(self) -> None:
        self._stop.set()
        with self._grabbed:
            self._ended = True
            self._pending = None
            self._grabbed.notify_all()
        self._join_then_close_reader()

    # --- the capture thread ---------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._grab_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer through get()
            self._error = self._failed(exc)
        finally:  # the last frame grabbed may still be decoded: close() releases the reader
            with self._grabbed:
                self._ended = True
                self._grabbed.notify_all()

    def _grab_all(self) -> None:
        """Take each frame as it comes, leave the newest undecoded for :meth:`_next`."""
        paced = self.spec.paced
        period, start = 1.0 / (self.fps or 30.0), time.perf_counter()
        while not self._stop.is_set():
            reader = self.reader
            if reader is None:
                return
            due = start + self._index * period  # frames fall due on the file's clock; late ones are
            wait = due - time.perf_counter()  # grabbed at once, each replacing the one before
            if paced and wait > 0 and self._stop.wait(wait):
                return
            if reader.frames and self._index >= reader.frames:
                return  # a failed grab past the end would also spoil the frame grabbed before it
            with self._reader_lock:
                if not reader.grab():
                    with self._grabbed:
                        if self._pending is not None:  # the failed grab spoiled it
                            self._pending = None
                            self._passed_over += 1
                    return
                now = time.perf_counter()
                ts = due if paced else now
                with self._grabbed:
                    if self._pending is not None:
                        self._passed_over += 1  # never decoded: the consumer was busy
                    self._pending = (self._index, ts, time.time() - (now - ts))
                    self._grabbed.notify_all()
            self._index += 1
            self._captured += 1
