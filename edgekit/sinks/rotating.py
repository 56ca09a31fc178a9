"""Rotating JSON-lines event files: ``events-00000001.jsonl``, ``events-00000002.jsonl``, ...

Each event is one line, flushed to the OS as it is written (a crash of the process loses
nothing written); a finished file is fsync'ed when it rotates and on close (a power cut
loses at most the lines of the open file not yet synced by the OS). Files are numbered,
never renamed, so a reader tailing one is never surprised.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence

from edgekit.errors import ConfigError
from edgekit.sinks import EventRecord
from edgekit.sinks.durable import fsync_dir
from edgekit.ranges import NONNEG_INT, Constraint, check_ranges, ranged

__all__ = ["RotatingConfig", "RotatingJsonlSink"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RotatingConfig:
    """Where and how big.

    Attributes:
        directory: the folder for the files (created).
        prefix: file names are ``<prefix>-<8 digits>.jsonl``.
        max_bytes: start a new file once the current one reaches this size.
        keep: how many files to keep (oldest deleted first); None keeps all.
        fsync_every: also fsync after this many events (0: only on rotation and close).
    """

    directory: str
    prefix: str = "events"
    max_bytes: int = ranged(10 * 1024 * 1024, Constraint(lambda v: v >= 1024, "an integer >= 1024 (bytes)"))
    keep: int | None = ranged(20, Constraint(lambda v: v >= 1, "an integer >= 1 (or absent to keep every file)"))
    fsync_every: int = ranged(0, NONNEG_INT)

    def __post_init__(self) -> None:
        check_ranges(self, "jsonl")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.prefix):
            raise ConfigError(f"prefix must be letters, digits, '_', '-' or '.', got {self.prefix!r}")


class RotatingJsonlSink:
    """Writes events as JSON lines into numbered files that rotate by size.

    Raises:
        ConfigError: the folder cannot be created or written.
    """

    def __init__(self, config: RotatingConfig) -> None:
        self.config = config
        self.dir = Path(config.directory)
        self._pattern = re.compile(rf"^{re.escape(config.prefix)}-(\d{{8}})\.jsonl$")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the event folder {str(self.dir)!r}: {exc.strerror or exc}") from None
        self._file: IO[bytes] | None = None
        self._size = 0
        self._since_sync = 0
        self._index = self._resume()

    @property
    def current_path(self) -> Path:
        return self.dir / f"{self.config.prefix}-{self._index:08d}.jsonl"

    def files(self) -> list[Path]:
        """The event files, oldest first."""
        found = [(int(m.group(1)), p) for p in self.dir.iterdir() if (m := self._pattern.match(p.name))]
        return [p for _, p in sorted(found)]

    def _resume(self) -> int:
        files = self.files()
        if not files:
            return 1
        last = files[-1]
        self._trim_torn_line(last)
        return int(m.group(1)) if (m := self._pattern.match(last.name)) else 1  # (files() are all numbered)

    @staticmethod
    def _trim_torn_line(path: Path) -> None:
        """Cut a half-written last line left by a crash, so every line of the file parses."""
        with open(path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            # Walk back to the last complete line.
            pos = size
            while pos > 0:
                step = min(4096, pos)
                f.seek(pos - step)
                chunk = f.read(step)
                nl = chunk.rfind(b"\n")
                if nl >= 0:
                    pos = pos - step + nl + 1
                    break
                pos -= step
            log.warning("%s ended with a half-written line (a crash while writing); removed %d bytes",
                        path, size - pos)
            f.truncate(pos)
            os.fsync(f.fileno())

    def _open(self) -> IO[bytes]:
        if self._file is None:
            try:
                self._file = open(self.current_path, "ab")
            except OSError as exc:
                raise ConfigError(f"cannot write event file {str(self.current_path)!r}: "
                                  f"{exc.strerror or exc}") from None
            self._size = self._file.tell()
            fsync_dir(self.dir)
        return self._file

    def write(self, event: EventRecord) -> None:
        """Append one event as a line and flush it.

        Raises:
            OSError: the disk is full or the file vanished (the caller's sink guard logs it).
        """
        self.write_many((event,))

    def write_many(self, events: Sequence[EventRecord]) -> None:
        """Append events as lines, in order, and flush once.

        Raises:
            OSError: the disk is full or the file vanished (the caller's sink guard logs it).
        """
        f = self._open()
        for event in events:
            line = (event.to_json() + "\n").encode()
            if self._size > 0 and self._size + len(line) > self.config.max_bytes:
                f.flush()
                self._rotate()
                f = self._open()
            f.write(line)
            self._size += len(line)
            self._since_sync += 1
            if self.config.fsync_every and self._since_sync >= self.config.fsync_every:
                f.flush()
                os.fsync(f.fileno())
                self._since_sync = 0
        f.flush()

    def _rotate(self) -> None:
        self._close_file()
        self._index += 1
        if self.config.keep is not None:
            files = self.files()
            # keep-1 old files plus the one about to be opened
            for old in files[: max(0, len(files) - (self.config.keep - 1))]:
                try:
                    old.unlink()
                except OSError as exc:
                    log.warning("could not delete old event file %s: %s", old, exc)

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None
            self._since_sync = 0

    def close(self) -> None:
        """Flush, fsync and close the current file. Safe to call twice."""
        self._close_file()

    def __enter__(self) -> RotatingJsonlSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
