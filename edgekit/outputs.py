"""Where a user's output goes: checked before any work starts, in one place.

``output_file`` and ``output_folder`` prove a path can be written (by writing a probe file beside it,
so a read-only mount or a folder owned by someone else is caught even for root) and say in one
sentence what is wrong: a missing folder, a *file* where a folder was meant, a folder where a file
was meant, no permission. The CLI's ``-o``, ``--out``, ``--save``, ``--summary-json`` and
``--report-dir`` go through them as argparse types; the sinks call them when they open.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from edgekit.errors import InputError

__all__ = ["output_file", "output_folder", "output_file_arg", "output_folder_arg", "report_json"]


def report_json(report_dir: str | os.PathLike[str]) -> Path:
    """Where the conversion report's document lies in its ``--report-dir``: the converter writes it
    there and ``edgekit release`` reads its summary from there (one place, not a guess on each side)."""
    return Path(report_dir) / "report.json"


def _probe(folder: Path, what: str, target: Path) -> None:
    import tempfile  # only when an output is asked for (its import is a start-up cost of every command)

    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".edgekit-probe-"):
            pass
    except OSError as exc:
        raise InputError(f"cannot write {what} {str(target)!r}: folder {str(folder)!r} is not writable "
                         f"({exc.strerror or exc}); choose a folder you can write to") from None


def _nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _folder_ok(folder: Path, what: str, target: Path, create_missing: bool) -> None:
    if folder.is_dir():
        _probe(folder, what, target)
        return
    existing = _nearest_existing(folder)
    if existing.exists() and not existing.is_dir():
        raise InputError(f"cannot write {what} {str(target)!r}: {str(existing)!r} is a file, not a folder")
    if not create_missing:
        raise InputError(f"cannot write {what} {str(target)!r}: folder {str(folder)!r} does not exist; create it "
                         "first or choose another path")
    _probe(existing, what, target)  # the folders below it are made when the work writes


def output_file(path: str | os.PathLike[str], what: str = "output") -> Path:
    """`path` as a file this process can create or overwrite; its folder must exist.

    Raises:
        InputError: the folder does not exist or is a file, the path is a folder, or nothing can be written there.
    """
    p = Path(path)
    if p.is_dir():
        raise InputError(f"cannot write {what} {str(p)!r}: it is a folder; give a file name")
    _folder_ok(p.parent if str(p.parent) else Path("."), what, p, create_missing=False)
    if p.exists() and not os.access(p, os.W_OK):
        raise InputError(f"cannot write {what} {str(p)!r}: the file is read-only")
    return p


def output_folder(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """`path` as a folder this process can write into (made, with its parents, by whoever writes).

    Raises:
        InputError: the path or one above it is a file, or nothing can be written there.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"cannot write {what} {str(p)!r}: it is a file, not a folder")
    _folder_ok(p, what, p, create_missing=True)
    return p


def output_file_arg(text: str) -> str:
    """argparse type: a file the command will write, checked when the line is parsed (before any work)."""
    try:
        output_file(text, "to")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def output_folder_arg(text: str) -> str:
    """argparse type: a folder the command will write into, checked when the line is parsed."""
    try:
        output_folder(text, "to")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text
