"""The files that have passed isolation here: a small per-user cache, so that only a new or changed
model file pays for the child process (0.3-0.5 s on x86, seconds on a Pi Zero).

A file is remembered by the SHA-256 of its bytes, with the interpreter (backend and version) and
delegate it passed with; an entry for its path (size, mtime, ctime, inode) finds that digest
without hashing the file again. A changed file has another stat, so it is hashed; another content
has another digest, so it is tried again. Only clean passes are kept (never a crash, a refusal, a
timeout or a failed run on zeros). The cache lives in ``$XDG_CACHE_HOME/edgekit`` (else
``~/.cache/edgekit``), mode 0700; ``EDGEKIT_ISOLATE_CACHE=0`` turns it off. A cache that cannot be
read or written is ignored: the child then runs as before.

The same entry also remembers other checks a file passed with these bytes (:func:`check_passed`,
:func:`remember_check`): the tasks' look at the outputs of a gray frame, which costs an
inference, is run once per file and setting too. Those are remembered only for a path whose
digest is already known from its stat (a file that passed isolation here), never by hashing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["CACHE_ENV_VAR", "cache_file", "has_passed", "remember_passed", "check_passed", "remember_check"]

CACHE_ENV_VAR = "EDGEKIT_ISOLATE_CACHE"
_MAX_ENTRIES = 256  # the newest are kept


def cache_file() -> Path | None:
    """Where the passed files are remembered, or None when the cache is off."""
    if os.environ.get(CACHE_ENV_VAR, "").strip().lower() in ("0", "false", "no", "off"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "edgekit" / "isolation-passed.json"


def _stat_key(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


def _load(file: Path) -> dict[str, Any]:
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"paths": {}, "passed": {}}
    if not isinstance(doc, dict) or not isinstance(doc.get("paths"), dict) or not isinstance(doc.get("passed"), dict):
        return {"paths": {}, "passed": {}}
    return doc


def _known_digest(path: str, doc: dict[str, Any]) -> str | None:
    """The digest remembered for the path, when its stat is unchanged."""
    entry = doc["paths"].get(os.path.abspath(path))
    stat = _stat_key(path)
    if isinstance(entry, list) and len(entry) == 2 and stat is not None and entry[0] == stat:
        return str(entry[1])
    return None


def _sha256(data: bytes) -> str:
    import hashlib  # only when a file is new or changed (the stat fast path needs no hash)

    return hashlib.sha256(data).hexdigest()


def _digest(path: str, data: bytes, doc: dict[str, Any]) -> str:
    """The SHA-256 of `data`: from the path's entry when its stat is unchanged, else computed."""
    return _known_digest(path, doc) or _sha256(data)


def _setting(backend: str, delegate: str) -> str:
    return f"{backend}|{delegate}"


def has_passed(path: str, data: bytes, backend: str, delegate: str) -> bool:
    """Whether these bytes passed isolation here before, with this interpreter and delegate."""
    file = cache_file()
    if file is None:
        return False
    doc = _load(file)
    settings = doc["passed"].get(_digest(path, data, doc))
    return isinstance(settings, list) and _setting(backend, delegate) in settings


def remember_passed(path: str, data: bytes, backend: str, delegate: str) -> None:
    """Remember a clean pass (best effort: an unwritable cache is left alone)."""
    file = cache_file()
    if file is None:
        return
    doc = _load(file)
    digest = _sha256(data)
    _add(doc, digest, _setting(backend, delegate))
    stat = _stat_key(path)
    key = os.path.abspath(path)
    doc["paths"].pop(key, None)
    if stat is not None:
        doc["paths"][key] = [stat, digest]
    _save(file, doc)


def check_passed(path: str, check: str) -> bool:
    """Whether the file at `path`, known here by its stat, passed `check` before (a setting string:
    the check's name and everything its verdict depends on)."""
    file = cache_file()
    if file is None:
        return False
    doc = _load(file)
    digest = _known_digest(path, doc)
    settings = doc["passed"].get(digest) if digest else None
    return isinstance(settings, list) and check in settings


def remember_check(path: str, check: str) -> None:
    """Remember that the file at `path` passed `check`; only for a path whose digest is known from its
    stat (a file that passed isolation here), so that no file is hashed for it (best effort)."""
    file = cache_file()
    if file is None:
        return
    doc = _load(file)
    digest = _known_digest(path, doc)
    if digest is None:
        return
    _add(doc, digest, check)
    _save(file, doc)


def _add(doc: dict[str, Any], digest: str, setting: str) -> None:
    """Add a setting to the digest's entry, which becomes the newest."""
    settings = [s for s in doc["passed"].pop(digest, []) if isinstance(s, str)]
    doc["passed"][digest] = sorted({*settings, setting})


def _save(file: Path, doc: dict[str, Any]) -> None:
    import tempfile

    for table in ("passed", "paths"):  # dicts keep insertion order: drop the oldest
        while len(doc[table]) > _MAX_ENTRIES:
            doc[table].pop(next(iter(doc[table])))
    try:
        file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=file.parent, prefix=".isolation-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, file)
    except OSError:
        return
