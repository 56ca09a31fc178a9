"""The hidden ``.staging-<v>`` folders of a device's versioned model folder.

A version is downloaded there (resumed where a broken transfer stopped), every file checked
against the signed manifest before anything reads it, the golden self-test run, and only then
renamed into place, where the serving loop's watcher sees it appear whole. :class:`Staging`
does the file work; the follower decides when (:mod:`edgekit.fleet.follower`).
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from edgekit.fleet.keys import SignatureError
from edgekit.fleet.manifest import Channel, FileEntry, ManifestError, ReleaseManifest
from edgekit.fleet.transport import TooLarge, TransferError, fetch, join_url
from edgekit.fleet.verify import VerificationError, download_verified
from edgekit.inspect.modelwatch import find_versions
from edgekit.sinks.durable import fsync_dir

__all__ = ["Staging", "BAD_BYTES", "REFUSED", "prune_versions"]

# what deletes a staged version (bad bytes); a TransferError keeps what arrived for a resume
BAD_BYTES: tuple[type[Exception], ...] = (TooLarge, ManifestError, VerificationError)
# What makes a fetched version refused: bad bytes, or a signature that does not verify.
REFUSED: tuple[type[Exception], ...] = (*BAD_BYTES, SignatureError)


class Staging:
    """Downloads, verifies, self-tests and places versions of `root` from the channel at `channel_url`.

    ``received`` counts every byte that came over the wire for a version (refused ones too)."""

    def __init__(self, root: Path, channel_url: str, key: Any, *, timeout: float, max_bytes: int,
                 stop: threading.Event, isolate: bool) -> None:
        self.root, self.url, self.key = root, channel_url, key
        self.timeout, self.max_bytes, self.stop, self.isolate = timeout, max_bytes, stop, isolate
        self.received = 0

    def folder(self, version: int) -> Path:
        return self.root / f".staging-{version}"

    def fetch(self, channel: Channel, version: int) -> ReleaseManifest:
        """Bring ``.staging-<version>`` to exactly the files its signed manifest names.

        Raises:
            SignatureError, ManifestError, VerificationError, TooLarge: bad bytes (the folder is deleted).
            TransferError: a broken transfer (what arrived is kept; the next call resumes it).
        """
        entry, stage = channel.releases[version], self.folder(version)
        stage.mkdir(exist_ok=True)
        try:
            manifest = self._manifest(channel, version, entry.manifest, stage)
            folder = join_url(self.url, entry.folder + "/")
            for f in manifest.files:
                self._download(join_url(folder, f.path), f, stage / f.path)
        except REFUSED:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        return manifest

    def signature(self, url: str) -> bytes:
        try:
            got = fetch(url, cap=4096, timeout=self.timeout)
        except TransferError as exc:
            self.received += getattr(exc, "received", 0)
            raise
        self.received += got.received
        return got.data or b""

    def _manifest(self, channel: Channel, version: int, entry: FileEntry, stage: Path) -> ReleaseManifest:
        path = stage / "manifest.json"
        self._download(join_url(self.url, entry.path), entry, path)
        data = path.read_bytes()
        if self.key is not None:
            sig = self.signature(join_url(self.url, entry.path + ".sig"))
            self.key.verify(sig, data, f"version {version} manifest.json")
            (stage / "manifest.json.sig").write_bytes(sig)
        manifest = ReleaseManifest.parse(data, f"version {version} manifest.json")
        if manifest.version != version or manifest.channel != channel.name:
            raise VerificationError(f"version {version}'s manifest describes {manifest.channel}/{manifest.version}")
        if manifest.total_size > self.max_bytes:
            raise VerificationError(f"version {version} has {manifest.total_size} bytes, more than the "
                                    f"{self.max_bytes} this device accepts ([fleet] max_download_mb)")
        return manifest

    def _download(self, url: str, entry: FileEntry, dest: Path) -> None:
        try:
            self.received += download_verified(url, entry, dest, timeout=self.timeout, stop=self.stop)
        except (TransferError, VerificationError) as exc:
            self.received += getattr(exc, "received", 0)  # refused bytes came over the wire too
            raise

    def self_test(self, version: int) -> dict[str, Any]:
        """Load the staged model (in a child process first with `isolate`) and reproduce its golden
        outputs; returns ``{"cases": n, "worst": max deviation or None, "passed": True}``.

        Raises:
            ModelError: it does not load, or an output differs from the release's."""
        from edgekit.inspect.selftest import golden_inputs, self_test
        from edgekit.runtimes import load_model

        stage = self.folder(version)
        with load_model(stage / "model.tflite", isolate=self.isolate) as model:
            cases, worst = self_test(model, stage, golden_inputs(stage))
        return {"cases": cases, "worst": worst, "passed": True}

    def place(self, version: int) -> None:
        self.folder(version).rename(self.root / str(version))  # appears whole, verified and tested
        fsync_dir(self.root)

    def drop(self, version: int) -> None:
        shutil.rmtree(self.folder(version), ignore_errors=True)

    def unplace(self, version: int) -> None:
        """Put an installed version back into staging (verified and tested again before it returns)."""
        folder = self.root / str(version)
        if folder.is_dir():
            self.drop(version)
            folder.rename(self.folder(version))
            fsync_dir(self.root)


def prune_versions(root: Path, keep_newest: int, also_keep: tuple[int | None, ...]) -> None:
    """Remove installed version folders beyond the ``keep_newest`` newest, never one of ``also_keep``
    (the serving version and the one a trial would return to)."""
    versions = find_versions(root)
    keep = set(sorted(versions, reverse=True)[:keep_newest]) | {v for v in also_keep if v}
    for v in set(versions) - keep:
        shutil.rmtree(root / str(v), ignore_errors=True)
