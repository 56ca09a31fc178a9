"""``VideoSource``: a source opened once and read in the way chosen when it was made."""

from __future__ import annotations

import enum
import os
from typing import Callable

from edgekit.errors import InputError
from edgekit.sources.capture import ThreadedReading
from edgekit.sources.frames import Frame, SourceStats
from edgekit.sources.lazy import LazyReading
from edgekit.sources.readers import Reader, is_lazy, open_reader
from edgekit.sources.reading import PulledReading, SourceReading
from edgekit.sources.spec import Reconnect, SourceSpec, parse_source

__all__ = ["ReadMode", "VideoSource"]


class ReadMode(str, enum.Enum):
    """How a :class:`VideoSource` reads (fixed when it is made).

    * ``THREAD``: a capture thread reads ahead. A live source keeps only its newest frame
      (decoded lazily, in the consumer's thread, where the reader can grab without decoding:
      see ``LazyReader``); a file hands over every frame in order, read at background priority.
    * ``PULL``: a file or folder is read in the thread that calls :meth:`VideoSource.get`, one
      caller at a time (workers that take turns on it; no capture thread). Not for live sources.
    * ``AUTO``: ``PULL`` when :meth:`VideoSource.start` is told that several threads will take
      frames from a file or folder (the loop's throughput workers), ``THREAD`` otherwise.
    """

    AUTO = "auto"
    THREAD = "thread"
    PULL = "pull"


class VideoSource:
    """A camera, file, stream, image folder or Pi camera, read as ``mode`` says. A context
    manager; :meth:`close` is safe twice. ``fresh``: a live frame over a quarter of a frame
    period old is swapped for the next one (False: always the newest at once). ``buffer``: how
    many frames of a file a capture thread reads ahead.

    Raises:
        InputError (on creation): ``mode`` is PULL for a live source.
        SourceError (from :meth:`open` and :meth:`start`): the source cannot be opened (a
            camera's message lists the devices found).
    """

    def __init__(self, spec: SourceSpec | str | int | os.PathLike[str], *, mode: ReadMode = ReadMode.AUTO,
                 fresh: bool = True, reconnect: Reconnect = Reconnect(), buffer: int = 4,
                 opener: Callable[[SourceSpec], Reader] = open_reader) -> None:
        self.spec = spec if isinstance(spec, SourceSpec) else parse_source(spec)
        self.mode = ReadMode(mode)
        if self.mode is ReadMode.PULL and self.spec.live:
            raise InputError(f"{self.spec} is live: it is read by a capture thread (ReadMode.THREAD or AUTO); "
                             "ReadMode.PULL is for files and folders")
        self._fresh = fresh
        self._reconnect = reconnect
        self._buffer = buffer
        self._opener = opener
        self._reader: Reader | None = None  # opened, not yet handed to a reading
        self._reading: SourceReading | None = None
        self._closed = False

    def open(self) -> VideoSource:
        """Open the source without reading from it yet, so errors surface early, in the caller's thread."""
        if self._reader is None and self._reading is None:
            self._reader = self._opener(self.spec)
        return self

    def start(self, consumers: int = 1) -> VideoSource:
        """Open the source if needed and start reading it. ``consumers``: how many threads will
        take frames at once (it decides ``AUTO``, see :class:`ReadMode`). Nothing happens once started."""
        if self._reading is None:
            reader = self._reader or self._opener(self.spec)
            self._reader = None  # the reading owns it now
            self._reading = self._reading_for(reader, consumers)
            self._reading.start()
        return self

    def _reading_for(self, reader: Reader, consumers: int) -> SourceReading:
        mode = self.mode
        if mode is ReadMode.AUTO:
            mode = ReadMode.PULL if consumers > 1 and not self.spec.live else ReadMode.THREAD
        if mode is ReadMode.PULL:
            return PulledReading(self.spec, reader)
        if self.spec.live and is_lazy(reader):
            return LazyReading(self.spec, reader, fresh=self._fresh)
        return ThreadedReading(self.spec, reader, opener=self._opener, reconnect=self._reconnect,
                               buffer=self._buffer, fresh=self._fresh)

    @property
    def fps(self) -> float | None:
        """The source's frame rate where it reports one (a request's, else the reader's)."""
        if self._reading is not None:
            return self._reading.fps
        return self.spec.fps or (self._reader.fps if self._reader is not None else None)

    @property
    def frames(self) -> int | None:
        """How many frames a file or folder holds (None for live sources, or before :meth:`open`)."""
        reader = self._reading.reader if self._reading is not None else self._reader
        return reader.frames if reader is not None else None

    def get(self, timeout: float | None = None) -> Frame | None:
        """The next frame: the newest one for a live source, the next in order for a file
        (starting to read, if :meth:`start` was not called).

        Returns None when the source has ended (see :attr:`finished`) or ``timeout`` passed.

        Raises:
            SourceError: the source failed for good (e.g. gave up reconnecting).
        """
        if self._reading is None:
            if self._closed:
                return None
            self.start()
        return self._reading.get(timeout)  # type: ignore[union-attr]

    @property
    def finished(self) -> bool:
        """True once every frame has been handed out, or the source was closed."""
        return self._reading.finished if self._reading is not None else self._closed

    @property
    def stats(self) -> SourceStats:
        return self._reading.stats if self._reading is not None else SourceStats(0, 0, 0, 0)

    def close(self) -> None:
        """Stop reading and release the source. Safe to call more than once."""
        self._closed = True
        if self._reading is not None:
            self._reading.close()
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def __enter__(self) -> VideoSource:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
