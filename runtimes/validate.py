"""Checks on a model file before any of its bytes reach the C++ interpreter."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from edgekit.errors import ModelError
from edgekit.runtimes.tflite_file import TFLiteFile, parse_tflite

__all__ = ["read_model_bytes", "validate_model_file", "MAX_MODEL_BYTES"]

# Larger than any model a small device can run; keeps a wrong path (a disk image, a video)
# from being read into memory whole.
MAX_MODEL_BYTES = 2 * 1024**3


def read_model_bytes(path: str | os.PathLike[str]) -> bytes:
    """Read a model file, with a clear error for a missing path, a folder or an unreadable file.

    Raises:
        ModelError: the path is not a readable, plausibly sized file.
    """
    p = Path(path)
    if not p.exists():
        hint = ""
        if p.parent.is_dir():
            near = sorted(x.name for x in p.parent.glob("*.tflite"))[:5]
            if near:
                hint = f" .tflite files in {p.parent}: {', '.join(near)}"
        raise ModelError(f"model file {str(p)!r} does not exist.{hint}")
    if p.is_dir():
        inside = sorted(x.name for x in p.glob("*.tflite"))[:5]
        hint = f" It holds: {', '.join(inside)}." if inside else ""
        if (p / "saved_model.pb").exists():
            hint = " It is a TensorFlow SavedModel: convert it first with `edgekit convert`."
        raise ModelError(f"{str(p)!r} is a directory, not a .tflite file.{hint}")
    try:
        size = p.stat().st_size
        if size > MAX_MODEL_BYTES:
            raise ModelError(f"{str(p)!r} is {size / 1e9:.1f} GB, larger than any TFLite model edgekit loads "
                             f"({MAX_MODEL_BYTES / 1e9:.0f} GB). Check the path.")
        with open(p, "rb") as f:
            return f.read()
    except PermissionError:
        raise ModelError(f"cannot read {str(p)!r}: permission denied. Check the file's permissions "
                         "(the service user must be able to read it).") from None
    except OSError as exc:
        raise ModelError(f"cannot read {str(p)!r}: {exc.strerror or exc}.") from None


def validate_model_file(path: str | os.PathLike[str]) -> tuple[bytes, TFLiteFile]:
    """Read and check a .tflite file: exists, not empty or truncated, TFLite identifier, sizes add up.

    Returns the bytes (to hand to the interpreter, so the file is read once) and what they hold.

    Raises:
        ModelError: with a sentence saying what is wrong and what to do.
    """
    data = read_model_bytes(path)
    with _LAST_LOCK:
        if _LAST and _LAST[0] == data:  # the same bytes as the last file checked (`detect` asks twice)
            return _LAST[0], _LAST[1]  # the kept copy: interpreters of one file share its bytes
    parsed = parse_tflite(data, label=f"model {os.fspath(path)!r}")
    with _LAST_LOCK:
        _LAST[:] = [data, parsed] if len(data) <= _KEEP_BYTES else []
    return data, parsed


# The bytes and parse of the last file that passed the checks: a command that describes a file and
# then loads it (detect: classifier or detector?) reads it twice but parses it once. Compared byte
# for byte (a memcmp, 0.2 ms for 4 MB, where a hash of them took 6 ms on x86 and far longer on a
# Pi); the interpreter holds the bytes of a loaded model anyway (without a copy: the throughput
# workers of one file share them, 4 MB for SSD MobileNet), and a file larger than _KEEP_BYTES is
# not kept after it. TFLiteFile is immutable (a NamedTuple).
_LAST: list[Any] = []
_KEEP_BYTES = 64 * 1024**2
_LAST_LOCK = threading.Lock()
