"""The TFLite interpreter's own log lines on file descriptor 2.

The C++ runtime writes "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." straight to fd 2
the first time a process allocates an interpreter (no Python setting reaches that logger). It says
nothing to a user and breaks the CLI's promise of one line per error, so :func:`load_model` holds
fd 2 while it creates the interpreter and passes on every line but the ``INFO:`` ones (errors and
warnings reach the user as before). ``show_native_logs(True)`` (the CLI's ``-v``, or
``EDGEKIT_DEBUG=1``) keeps them all.

This module is where that is decided for every other native log too: :func:`native_logs_wanted`
(``-v`` or ``EDGEKIT_DEBUG=1``) is what the CLI asks, and :func:`native_logs_shown` what
TensorFlow's, OpenCV's and FFmpeg's quieting (edgekit.cli, edgekit.commands._common) reads.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import IO, Callable, Iterator

__all__ = ["show_native_logs", "native_logs_shown", "native_logs_wanted", "interpreter_info_dropped",
           "fd2_captured"]

_show = os.environ.get("EDGEKIT_DEBUG") == "1"


def native_logs_wanted(verbose: bool = False) -> bool:
    """Whether the user asked to see the native libraries' own logs: ``-v`` (`verbose`) or
    ``EDGEKIT_DEBUG=1``."""
    return verbose or os.environ.get("EDGEKIT_DEBUG") == "1"


def show_native_logs(show: bool = True) -> None:
    """Keep (True) or drop (False, the default) the native libraries' log lines from now on."""
    global _show
    _show = show


def native_logs_shown() -> bool:
    """Whether native log lines are kept (:func:`show_native_logs`; ``EDGEKIT_DEBUG=1`` at import)."""
    return _show


def _drop_info(text: str, _failed: bool) -> str:
    return "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("INFO: "))


@contextlib.contextmanager
def interpreter_info_dropped() -> Iterator[None]:
    """Drop the interpreter's ``INFO:`` lines written in the block, pass on the rest."""
    if _show:
        yield
        return
    with fd2_captured(_drop_info):
        yield


@contextlib.contextmanager
def fd2_captured(kept: Callable[[str, bool], str]) -> Iterator[None]:
    """Hold what native code writes to file descriptor 2 in the block, then pass on
    ``kept(text, the block raised)``."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (embedded, redirected oddly): leave it alone
        yield
        return
    with _scratch_file() as tmp:
        os.dup2(tmp.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = kept(tmp.read().decode("utf-8", "replace"), failed)
            if text:
                sys.stderr.write(text)
                sys.stderr.flush()


def _scratch_file() -> IO[bytes]:
    """An anonymous file: in memory where Linux offers memfd_create (tempfile's import is a
    start-up cost every model load would pay), else tempfile's."""
    if hasattr(os, "memfd_create"):
        try:
            return os.fdopen(os.memfd_create("edgekit-stderr", os.MFD_CLOEXEC), "w+b")
        except OSError:
            pass
    import tempfile

    return tempfile.TemporaryFile()
