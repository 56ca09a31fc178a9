"""Bringing a release's version into the hidden staging folder of a device's versioned model folder
(:class:`edgekit.inspect.versions.VersionFolder`, where the folder names are spelled).

A version is downloaded there (resumed where a broken transfer stopped), every file checked
against the signed manifest before anything reads it, and the folder's one golden self-test run
(the serving loop's own); the follower then promotes it into place, where the watcher sees it
appear whole. :class:`Staging` does the transfer; the follower decides when (:mod:`edgekit.fleet.follower`).
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

from edgekit.fleet.keys import SignatureError
from edgekit.fleet.manifest import Channel, FileEntry, ManifestError, ReleaseManifest
from edgekit.fleet.transport import TooLarge, TransferError, fetch, join_url
from edgekit.fleet.verify import VerificationError, download_verified
from edgekit.inspect.versions import SelfTest, VersionFolder

__all__ = ["Staging", "BAD_BYTES", "REFUSED"]

# what deletes a staged version (bad bytes); a TransferError keeps what arrived for a resume
BAD_BYTES: tuple[type[Exception], ...] = (TooLarge, ManifestError, VerificationError)
# What makes a fetched version refused: bad bytes, or a signature that does not verify.
REFUSED: tuple[type[Exception], ...] = (*BAD_BYTES, SignatureError)


class Staging:
    """Downloads, verifies and self-tests versions from the channel at `channel_url` into the
    staging folders of `versions`.

    ``received`` counts every byte that came over the wire for a version (refused ones too)."""

    def __init__(self, versions: VersionFolder, channel_url: str, key: Any, *, timeout: float, max_bytes: int,
                 stop: threading.Event, isolate: bool) -> None:
        self.versions, self.url, self.key = versions, channel_url, key
        self.timeout, self.max_bytes, self.stop, self.isolate = timeout, max_bytes, stop, isolate
        self.received = 0

    def fetch(self, channel: Channel, version: int) -> ReleaseManifest:
        """Bring ``.staging-<version>`` to exactly the files its signed manifest names.

        Raises:
            SignatureError, ManifestError, VerificationError, TooLarge: bad bytes (the folder is deleted).
            TransferError: a broken transfer (what arrived is kept; the next call resumes it).
        """
        entry, stage = channel.releases[version], self.versions.stage(version)
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

    def self_test(self, version: int) -> SelfTest:
        """Load the staged model (in a child process first with `isolate`) and run the folder's
        golden self-test on it (:meth:`VersionFolder.self_test`, what the serving loop runs too).

        Raises:
            ModelError: it does not load, or an output differs from the release's."""
        from edgekit.runtimes import load_model

        stage = self.versions.staging(version)
        t0 = time.perf_counter()
        with load_model(stage / "model.tflite", isolate=self.isolate) as model:
            return self.versions.self_test(model, stage, load_ms=(time.perf_counter() - t0) * 1e3)
