"""TensorFlow import, the converter's native log lines, and progress bars.

TensorFlow, the MLIR converter and the interpreters print INFO/WARNING lines from C++
straight to file descriptors 1 and 2 (and Keras prints "Saved artifact at ..." to
stdout). Unless the user asks for ``--verbose`` we send those descriptors to a
temporary file for the duration of the work, keep the text for error messages, and
give progress bars a stream that still reaches the terminal.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
from dataclasses import dataclass, field
from types import ModuleType
from typing import IO, Any, Iterable, Iterator, TypeVar

from edgekit.errors import ConversionError

__all__ = ["NativeLog", "capture_native_output", "import_tensorflow", "progress", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'edgekit-tflite[convert]'"
T = TypeVar("T")


@dataclass
class NativeLog:
    """Where native output went, and the terminal stream for progress bars."""

    console: IO[str]
    progress: bool = True
    _file: IO[bytes] | None = field(default=None, repr=False)

    def tail(self, lines: int = 15) -> str:
        """The last lines of what the native libraries printed ('' when not captured)."""
        if self._file is None:
            return ""
        self._file.flush()
        self._file.seek(0)
        text = self._file.read().decode("utf-8", errors="replace")
        return "\n".join(text.strip().splitlines()[-lines:])


_active: NativeLog | None = None


@contextlib.contextmanager
def capture_native_output(enabled: bool = True, show_progress: bool = True) -> Iterator[NativeLog]:
    """Redirect fds 1 and 2 to a temporary file while the block runs (re-entrant).

    Yields a :class:`NativeLog` whose ``console`` writes to the real stderr.
    """
    global _active
    if _active is not None:  # nested: the outer capture already covers us
        yield _active
        return
    if not enabled:
        _active = NativeLog(console=sys.stderr, progress=show_progress)
        try:
            yield _active
        finally:
            _active = None
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = (os.dup(1), os.dup(2))
    log_file = tempfile.TemporaryFile()
    console = os.fdopen(os.dup(saved[1]), "w", buffering=1, encoding="utf-8", errors="replace")
    os.dup2(log_file.fileno(), 1)
    os.dup2(log_file.fileno(), 2)
    _active = NativeLog(console=console, progress=show_progress, _file=log_file)
    try:
        yield _active
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)
        console.close()
        log_file.close()
        _active = None


def current_console() -> IO[str]:
    return _active.console if _active is not None else sys.stderr


def native_tail() -> str:
    return _active.tail() if _active is not None else ""


def progress(items: Iterable[T], *, total: int | None, desc: str) -> Iterable[T]:
    """A tqdm bar on the terminal's stderr; off when that is not a TTY or progress is off."""
    enabled = _active.progress if _active is not None else True
    console = current_console()
    if not enabled or not _isatty(console):
        return items
    try:
        from tqdm import tqdm
    except ImportError:  # a nicety: no bar rather than no conversion
        return items
    return tqdm(items, total=total, desc=desc, file=console, leave=False, dynamic_ncols=True)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def import_tensorflow() -> ModuleType:
    """Import TensorFlow (quietly unless its logs are wanted), or say how to install it.

    Raises:
        ConversionError: TensorFlow is not installed or cannot be imported.
    """
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    verbose = _active is not None and _active._file is None
    if not verbose:  # INFO lines (oneDNN, cpu features) are noise for a converter user
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    try:
        with capture_native_output(enabled=_active is None):
            return importlib.import_module("tensorflow")
    except ImportError as exc:
        raise ConversionError(f"converting needs TensorFlow, which is not installed here ({exc}). "
                              f"Run: {INSTALL_HINT}") from None


def import_keras() -> ModuleType:
    import_tensorflow()
    try:
        return importlib.import_module("keras")
    except ImportError as exc:
        raise ConversionError(f"converting Keras models needs keras ({exc}). Run: {INSTALL_HINT}") from None
