"""A capture thread that reads ahead and hands frames over: the newest only for a live source,
every frame in order for a file (read at background CPU priority)."""

from __future__ import annotations

import time
from typing import Callable

from edgekit.errors import InputError, SourceError
from edgekit.sources.frames import Handoff, Frame, background_priority
from edgekit.sources.readers import Reader
from edgekit.sources.reading import BackgroundReading, log
from edgekit.sources.spec import Reconnect, SourceSpec

__all__ = ["ThreadedReading"]


class ThreadedReading(BackgroundReading):
    """Reads in a thread named ``edgekit-capture``. A live source keeps only its newest frame
    (with ``fresh``, a stale one is swapped for the next, see :meth:`_fresher`) and is reopened
    with backoff when it stops; a file goes through a FIFO of ``buffer`` frames; a realtime
    file is paced by its own clock, skipping (undecoded) what a camera would have overwritten."""

    def __init__(self, spec: SourceSpec, reader: Reader, *, opener: Callable[[SourceSpec], Reader],
                 reconnect: Reconnect = Reconnect(), buffer: int = 4, fresh: bool = True) -> None:
        super().__init__(spec, reader)
        self._opener = opener
        self._reconnect = reconnect
        self._fresh = fresh
        self._buffer: Handoff[Frame] = Handoff(buffer, keep_latest=spec.live)

    def _next(self, timeout: float | None) -> Frame | None:
        frame = self._buffer.get(timeout)
        if frame is not None and self.spec.live and self._fresh:
            frame = self._fresher(frame)
        return frame

    def _fresher(self, frame: Frame) -> Frame:
        """A live frame older than a quarter of a frame period (reading.FRESH_AGE) is swapped
        for the next one: a model slower than the camera then starts on a frame under P/4 old
        (P = 1/fps) instead of up to P, for at most 3P/4 of waiting."""
        wait = self._stale_wait(frame.capture_ts)
        if wait is None:
            return frame
        newer = self._buffer.get(wait)
        if newer is None:
            return frame
        self._passed_over += 1
        return newer

    @property
    def finished(self) -> bool:
        return self._buffer.done

    def _dropped_unread(self) -> int:
        return self._buffer.dropped

    def close(self) -> None:
        self._stop.set()
        self._buffer.close(discard=True)
        self._join_then_close_reader()

    # --- the capture thread ---------------------------------------------------------------
    def _run(self) -> None:
        if not self.spec.live:
            background_priority()  # a file only has to stay ahead of the model
        try:
            self._read_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer through get()
            self._error = self._failed(exc)
        finally:
            self._close_reader()
            self._buffer.close()

    def _read_all(self) -> None:
        paced = self.spec.paced
        period, start = 1.0 / (self.fps or 30.0), time.perf_counter()
        while not self._stop.is_set():
            reader = self.reader or self._reopen()
            if reader is None:
                return
            due = self._keep_pace(reader, start, period) if paced else 0.0
            if due is None:
                return
            got = self._read(reader)
            if got is None:
                continue  # undecodable
            image, t0 = got
            if image is None:
                if not self.spec.reconnects:
                    return
                log.warning("%s stopped delivering frames; reopening it", self.spec)
                self._close_reader()
                continue
            t1 = time.perf_counter()
            # A file played like a camera was "captured" when its frame was due, not when decoded.
            ts = due if paced else t1
            frame = Frame(self._index, image, ts, time.time() - (t1 - ts), (t1 - t0) * 1e3, bgr=reader.bgr)
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
            self._passed_over += 1
        return start + self._index * period

    def _reopen(self) -> Reader | None:
        """Open the lost source again with growing pauses; None when stopped meanwhile.

        Raises:
            SourceError: ``give_up_after`` seconds passed without success.
        """
        delay, began = self._reconnect.first_delay, time.perf_counter()
        while not self._stop.wait(delay):
            try:
                self.reader = self._opener(self.spec)
                self._reopens += 1
                log.warning("reopened %s", self.spec)
                return self.reader
            except (SourceError, InputError) as exc:
                log.warning("reopening %s failed (next try in %.1f s): %s", self.spec, delay, exc)
            waited = time.perf_counter() - began
            limit = self._reconnect.give_up_after
            if limit is not None and waited >= limit:
                raise SourceError(f"{self.spec} was lost and could not be reopened for {waited:.0f} s; "
                                  "check the cable, the network or the URL.")
            delay = min(delay * 2, self._reconnect.max_delay)
        return None
