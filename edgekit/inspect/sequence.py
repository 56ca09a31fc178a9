"""Event sequence numbers that only grow, across restarts."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from edgekit.errors import ConfigError
from edgekit.sinks.durable import atomic_write

__all__ = ["SequenceCounter"]


class SequenceCounter:
    """Sequence numbers that only grow, across restarts, persisted in a small JSON file.

    Writing the file for every event would cost an fsync each; instead the counter
    reserves a block of ``reserve`` numbers on disk before handing them out. A clean
    :meth:`close` records the exact last number, so a normal restart continues without a
    gap; after a crash the counter resumes past the reservation, and :attr:`may_have_skipped`
    gives the range of numbers that may never have been issued (announce it, so a receiver
    does not take the gap for lost events).

    Args:
        path: the state file, or None to count from 1 in memory only.
        reserve: how many numbers one disk write covers.

    Raises:
        ConfigError: the state file exists but is not a counter's, or cannot be written.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, reserve: int = 100) -> None:
        if reserve < 1:
            raise ConfigError(f"reserve must be >= 1, got {reserve}")
        self.path = Path(path) if path is not None else None
        self._reserve = reserve
        self._lock = threading.Lock()
        # After an unclean shutdown: (first, last) of the numbers that may never have been issued.
        self.may_have_skipped: tuple[int, int] | None = None
        last, reserved, clean = self._read()
        if not clean:
            if reserved > last:
                self.may_have_skipped = (last + 1, reserved)
            last = reserved
        self._last = last
        self._reserved = last
        self._closed = False

    def _read(self) -> tuple[int, int, bool]:
        if self.path is None or not self.path.exists():
            return 0, 0, True
        try:
            d = json.loads(self.path.read_text())
            last, reserved, clean = int(d["last"]), int(d["reserved"]), bool(d["clean"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"sequence state file {str(self.path)!r} is unreadable ({exc}). It holds the "
                              "last event number; restore it from a backup, or delete it to restart the "
                              "numbering at 1 (receivers will see the numbers restart).") from None
        return last, max(last, reserved), clean

    def _write(self, last: int, reserved: int, clean: bool) -> None:
        if self.path is None:
            return
        text = json.dumps({"last": last, "reserved": reserved, "clean": clean})
        try:
            atomic_write(self.path, text.encode())
        except OSError as exc:
            raise ConfigError(f"cannot write the sequence state file {str(self.path)!r}: "
                              f"{exc.strerror or exc}. Check that its folder exists and is writable.") from None

    @property
    def last(self) -> int:
        """The last number handed out (0 before the first)."""
        return self._last

    def next(self) -> int:
        """The next sequence number (thread-safe)."""
        with self._lock:
            if self._last >= self._reserved:
                self._reserved = self._last + self._reserve
                self._write(self._last, self._reserved, clean=False)
            self._last += 1
            return self._last

    def close(self) -> None:
        """Record the exact last number so the next start continues without a gap."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._write(self._last, self._last, clean=True)
