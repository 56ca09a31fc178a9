"""One JSON object per processed frame and line, flushed as it is written.

Each line: ``{"frame", "timestamp", "latency_ms", "detections": [{"id", "label", "score",
"box": [x1, y1, x2, y2]}]}`` (a classifier's frames hold ``"classes"`` instead), boxes in
the original frame's pixels. A reader tailing the file or pipe never sees half a line
from a run that was stopped.
"""

from __future__ import annotations

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

    def write(self, result: FrameResult) -> None:
        if self._out is None:
            raise InputError("this JsonlSink is closed")
        self._out.write(json.dumps(result.to_dict(), separators=(",", ":"), allow_nan=False) + "\n")
        self._out.flush()
        self.lines += 1

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
