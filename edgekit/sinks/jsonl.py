"""One JSON object per processed frame and line, flushed as it is written.

Each line: ``{"frame", "timestamp", "latency_ms", "detections": [{"id", "label", "score",
"box": [x1, y1, x2, y2]}]}`` (a classifier's frames hold ``"classes"`` instead), boxes in
the original frame's pixels. A reader tailing the file or pipe never sees half a line
from a run that was stopped.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from typing import IO

from edgekit.errors import InputError
from edgekit.results import FrameResult

__all__ = ["JsonlSink"]


class JsonlSink:
    """Writes results as JSON lines to a stream (e.g. ``sys.stdout``) or a file it opens.

    Raises:
        InputError: the file cannot be opened for writing.
    """

    def __init__(self, target: IO[str] | str | os.PathLike[str]) -> None:
        if isinstance(target, (str, os.PathLike)):
            try:
                self._out: IO[str] | None = open(target, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
            except OSError as exc:
                raise InputError(f"cannot write JSON lines to {os.fspath(target)!r}: {exc.strerror or exc}") from None
            self._owned = True
        else:
            self._out, self._owned = target, False
        self.lines = 0
        self._fd = _raw_fd(self._out)
        self._failed: str | None = None

    def write(self, result: FrameResult) -> None:
        """Write one line whole, or not at all.

        Raises:
            InputError: the sink is closed, or writing failed (disk full, file size limit):
                the lines already written stay whole and this sink writes no more.
        """
        if self._out is None or self._failed:
            raise InputError(self._failed or "this JsonlSink is closed")
        line = json.dumps(result.to_dict(), separators=(",", ":"), allow_nan=False) + "\n"
        if self._fd is None:
            self._out.write(line)
            self._out.flush()
        else:
            self._write_fd(self._fd, line.encode("utf-8"))
        self.lines += 1

    def _write_fd(self, fd: int, data: bytes) -> None:
        # Straight to the file descriptor: a failed write leaves nothing behind in Python's
        # buffers, and the part of the line that did get out is cut off again below.
        try:
            start = os.lseek(fd, 0, os.SEEK_CUR)
        except OSError:  # a pipe or terminal: no half line to take back
            start = None
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
        except BrokenPipeError:  # `edgekit detect --json | head`: the reader left, cli.main ends quietly
            raise
        except OSError as exc:
            if start is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
            self._failed = (f"cannot write JSON lines ({exc.strerror or exc}; disk full or file size limit?): "
                            f"stopped after {self.lines} complete lines")
            raise InputError(self._failed) from None

    def close(self) -> None:
        """Flush, and close the file if this sink opened it. Safe to call more than once."""
        out, self._out = self._out, None
        if out is None:
            return
        try:
            out.flush()
        finally:
            if self._owned:
                out.close()

    def __enter__(self) -> JsonlSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _raw_fd(out: IO[str]) -> int | None:
    """The file descriptor under a real file or stdout (its buffer emptied first), else None."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    out.flush()
    return fd
