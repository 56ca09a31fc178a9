"""Checking release files against their signed manifest: downloads and installed folders."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from edgekit.errors import EdgekitError
from edgekit.fleet.keys import PublicKey, SignatureError
from edgekit.fleet.manifest import FileEntry, ManifestError, ReleaseManifest
from edgekit.fleet.transport import TransferError, download

__all__ = ["VerificationError", "sha256_file", "download_verified", "local_problem"]


class VerificationError(EdgekitError):
    """A downloaded file's size or SHA-256 differs from the signed manifest (it was deleted)."""

    received: int = 0  # the bytes this try brought before the check failed


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def download_verified(url: str, entry: FileEntry, dest: Path, *, timeout: float,
                      stop: threading.Event | None = None) -> int:
    """Bring `dest` to exactly the bytes `entry` names: downloaded into ``dest.part`` (resumed where a
    broken transfer stopped, never beyond ``entry.size``), hashed, and only then renamed to `dest`.

    Returns the bytes received. Raises:
        VerificationError: the SHA-256 differs (the part file is deleted).
        TransferError: a broken transfer (the part file is kept for a resume); TooLarge.
    """
    if dest.is_file() and dest.stat().st_size == entry.size and sha256_file(dest) == entry.sha256:
        return 0  # verified before a restart or before a later file's transfer broke
    part = dest.with_name(dest.name + ".part")
    dest.parent.mkdir(parents=True, exist_ok=True)
    before = part.stat().st_size if part.exists() else 0
    try:
        download(url, part, entry.size, timeout=timeout, stop=stop)
    except TransferError as exc:
        after = part.stat().st_size if part.exists() else 0
        exc.received = max(0, after - before)  # what this try brought
        raise
    after = part.stat().st_size
    received = after - before if after >= before else after
    digest = sha256_file(part)
    if digest != entry.sha256:
        part.unlink()
        bad = VerificationError(f"{entry.path}: SHA-256 {digest[:16]}... differs from the signed manifest's "
                                f"{entry.sha256[:16]}... (tampered or corrupt); deleted")
        bad.received = max(0, after - before if after >= before else after)
        raise bad
    part.rename(dest)
    return max(0, received)


def local_problem(folder: Path, key: PublicKey | None) -> str | None:
    """Why an installed version folder cannot be trusted (no signed manifest, a file that differs),
    or None when every file matches its signed manifest."""
    try:
        data = (folder / "manifest.json").read_bytes()
        if key is not None:
            key.verify((folder / "manifest.json.sig").read_bytes(), data, f"{folder.name}/manifest.json")
        manifest = ReleaseManifest.parse(data)
    except FileNotFoundError:
        return f"version folder {folder.name} has no signed manifest (not from the channel)"
    except (OSError, SignatureError, ManifestError) as exc:
        return f"version folder {folder.name}: {exc}"
    for f in manifest.files:
        p = folder / f.path
        if not p.is_file() or p.stat().st_size != f.size or sha256_file(p) != f.sha256:
            return f"version folder {folder.name}: {f.path} differs from its signed manifest"
    return None
