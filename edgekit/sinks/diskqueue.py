"""A crash-safe, ordered, on-disk queue (sqlite3 in WAL mode, fsync on every commit).

The network sinks (MQTT, webhook) write every event here first and delete it only once
the receiver has acknowledged it (a PUBACK, a 2xx), so a broker outage, a power cut or
a restart loses nothing: the next run sends what is left, oldest first.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable, NamedTuple, Sequence

from edgekit.errors import EdgekitError

__all__ = ["DiskQueue", "QueueItem", "QueueError", "QueueFullError"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key INTEGER,
    body BLOB NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS dead (
    id INTEGER PRIMARY KEY,
    key INTEGER,
    body BLOB NOT NULL,
    created REAL NOT NULL,
    failed REAL NOT NULL,
    reason TEXT NOT NULL
);
"""


class QueueError(EdgekitError):
    """The on-disk queue cannot be opened or written (corrupt file, full disk, permissions)."""


class QueueFullError(QueueError):
    """The queue holds ``max_items`` items; the receiver has been away too long."""


class QueueItem(NamedTuple):
    id: int  # position in the queue; increases with every put
    key: int | None  # the event's sequence number, for logs
    body: bytes


class DiskQueue:
    """Items go in at the tail and leave from the head only when acknowledged.

    Every :meth:`put` is durable when it returns (``synchronous=FULL``). Thread-safe:
    one producer thread and one sender thread share it.

    Args:
        path: the sqlite file (created, with its folder).
        max_items: refuse new items beyond this many (None: limited by the disk only).

    Raises:
        QueueError: the file is not a queue or cannot be created.
    """

    def __init__(self, path: str | os.PathLike[str], *, max_items: int | None = None) -> None:
        self.path = Path(path)
        self.max_items = max_items
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db: sqlite3.Connection | None = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=10.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            self._count = self._db.execute("SELECT COUNT(*) FROM queue").fetchone()[0]
            # Deletions of acknowledged items skip their own fsync: the next put's FULL commit
            # syncs the write-ahead log with them, and one lost in a crash only means a resend
            # that receivers drop by sequence number. Halves the fsyncs per event.
            self._acks: sqlite3.Connection | None = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=10.0)
            self._acks.execute("PRAGMA synchronous=NORMAL")
        except (sqlite3.Error, OSError) as exc:
            raise QueueError(f"cannot open the event queue {str(self.path)!r}: {exc}. If the file is "
                             "damaged, move it aside (its events are lost to this device) and restart.") from None

    def __len__(self) -> int:
        return self._count

    def put(self, body: bytes | str, key: int | None = None) -> int:
        """Append one item; durable on return. Returns its id.

        Raises:
            QueueFullError: ``max_items`` reached.
            QueueError: the disk is full or the file is unwritable.
        """
        data = body.encode() if isinstance(body, str) else bytes(body)
        with self._lock:
            db = self._conn()
            if self.max_items is not None and self._count >= self.max_items:
                raise QueueFullError(f"event queue {str(self.path)!r} holds {self._count} unsent events "
                                     f"(max_items={self.max_items}); the receiver has been unreachable too "
                                     "long. Restore the connection or raise max_items.")
            try:
                cur = db.execute("INSERT INTO queue (key, body, created) VALUES (?, ?, ?)",
                                 (key, data, time.time()))
            except sqlite3.Error as exc:
                raise QueueError(f"cannot append to the event queue {str(self.path)!r}: {exc}. "
                                 "Free disk space (df -h) and check permissions.") from None
            self._count += 1
            return int(cur.lastrowid or 0)

    def put_many(self, items: Sequence[tuple[bytes | str, int | None]]) -> list[int]:
        """Append several ``(body, key)`` items in one commit (one fsync); durable on return.
        Returns their ids, in order.

        Raises:
            QueueFullError: ``max_items`` would be passed; the items that fit are queued first,
                and the message says how many were refused.
            QueueError: the disk is full or the file is unwritable (then none is queued).
        """
        rows = [(key, body.encode() if isinstance(body, str) else bytes(body)) for body, key in items]
        with self._lock:
            db = self._conn()
            room = len(rows) if self.max_items is None else max(0, self.max_items - self._count)
            fit, refused = rows[:room], len(rows) - room
            ids: list[int] = []
            if fit:
                now = time.time()
                try:
                    db.execute("BEGIN IMMEDIATE")
                    for key, data in fit:
                        ids.append(int(db.execute("INSERT INTO queue (key, body, created) VALUES (?, ?, ?)",
                                                  (key, data, now)).lastrowid or 0))
                    db.execute("COMMIT")
                except sqlite3.Error as exc:
                    _rollback(db)
                    raise QueueError(f"cannot append to the event queue {str(self.path)!r}: {exc}. "
                                     "Free disk space (df -h) and check permissions.") from None
                self._count += len(fit)
            if refused > 0:
                raise QueueFullError(f"event queue {str(self.path)!r} holds {self._count} unsent events "
                                     f"(max_items={self.max_items}); {refused} new event(s) refused. The "
                                     "receiver has been unreachable too long. Restore the connection or raise "
                                     "max_items.")
            return ids

    def peek(self, limit: int = 1, after: int = 0) -> list[QueueItem]:
        """Up to `limit` items with id > `after`, oldest first; they stay queued."""
        with self._lock:
            rows = self._conn().execute(
                "SELECT id, key, body FROM queue WHERE id > ? ORDER BY id LIMIT ?", (after, limit)).fetchall()
        return [QueueItem(int(i), k, bytes(b)) for i, k, b in rows]

    def ack(self, ids: Iterable[int]) -> int:
        """Delete acknowledged items in one commit (made durable by the next put). Returns how many."""
        batch = [(int(i),) for i in ids]
        if not batch:
            return 0
        with self._lock:
            db = self._conn(acks=True)
            try:
                db.execute("BEGIN IMMEDIATE")
                before = db.total_changes
                db.executemany("DELETE FROM queue WHERE id = ?", batch)
                removed = db.total_changes - before
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(db)
                raise QueueError(f"cannot remove sent events from {str(self.path)!r}: {exc}") from None
            self._count -= removed
            return removed

    def dead_letter(self, item_id: int, reason: str) -> None:
        """Move an item the receiver rejected for good out of the way, keeping it for inspection."""
        with self._lock:
            db = self._conn()
            try:
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT INTO dead (id, key, body, created, failed, reason) "
                           "SELECT id, key, body, created, ?, ? FROM queue WHERE id = ?",
                           (time.time(), reason, item_id))
                removed = db.execute("DELETE FROM queue WHERE id = ?", (item_id,)).rowcount
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(db)
                raise QueueError(f"cannot set aside a rejected event in {str(self.path)!r}: {exc}") from None
            self._count -= removed

    def dead_letters(self) -> list[tuple[QueueItem, str]]:
        """Items set aside by :meth:`dead_letter`, with the reason."""
        with self._lock:
            rows = self._conn().execute("SELECT id, key, body, reason FROM dead ORDER BY id").fetchall()
        return [(QueueItem(int(i), k, bytes(b)), r) for i, k, b, r in rows]

    def _conn(self, acks: bool = False) -> sqlite3.Connection:
        db = self._acks if acks else self._db
        if db is None:
            raise QueueError(f"event queue {str(self.path)!r} is closed")
        return db

    def close(self) -> None:
        """Close the file (safe twice). Whatever is queued stays for the next run."""
        with self._lock:
            for db in (self._acks, self._db):
                if db is not None:
                    db.close()
            self._db = self._acks = None

    def __enter__(self) -> DiskQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _rollback(db: sqlite3.Connection) -> None:
    try:
        db.execute("ROLLBACK")
    except sqlite3.Error:
        pass
