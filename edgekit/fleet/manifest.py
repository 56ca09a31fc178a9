"""The two signed documents of a release channel and how a device reads them.

A release folder (plain static hosting: any HTTP(S) server, an S3 bucket's endpoint, a folder)::

    channel.json            which version the channel rolls out, to what fraction, halted or not
    channel.json.sig        base64 ed25519 signature of channel.json's exact bytes
    versions/3/manifest.json        version 3's files with size and SHA-256, model metadata
    versions/3/manifest.json.sig
    versions/3/model.tflite
    versions/3/golden/<case>.npy    golden inputs; <case>.npz: what version 3 outputs for them

Both documents are canonical JSON (sorted keys, no spaces, UTF-8) and the signature covers the
bytes as served. channel.json names each version's manifest with its size and SHA-256, and the
manifest each file with its own, so one signature vouches for every byte a device loads.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from edgekit.errors import EdgekitError

__all__ = ["ManifestError", "FileEntry", "ReleaseEntry", "Channel", "ReleaseManifest", "canonical_json",
           "rollout_bucket", "selected", "CHANNEL_SCHEMA", "RELEASE_SCHEMA", "MAX_DOCUMENT_BYTES"]

CHANNEL_SCHEMA = "edgekit-channel/1"
RELEASE_SCHEMA = "edgekit-release/1"
MAX_DOCUMENT_BYTES = 1 << 20  # channel.json and manifest.json are small; anything larger is refused
_SHA = re.compile(r"^[0-9a-f]{64}$")
_PATH_PART = re.compile(r"^[A-Za-z0-9_.-]+$")


class ManifestError(EdgekitError):
    """A channel or release manifest is malformed, or names an unsafe path."""


def canonical_json(doc: Mapping[str, Any]) -> bytes:
    """The bytes that are signed: sorted keys, no whitespace, UTF-8, no NaN."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def rollout_bucket(device: str, version: int) -> float:
    """Where a device falls in [0, 1) for a release of `version`: the first 8 bytes of
    SHA-256("<device>/<version>") as a big-endian integer over 2**64. The same on every run and
    machine; another version draws other canaries, so no device is the guinea pig of every release."""
    return int.from_bytes(hashlib.sha256(f"{device}/{version}".encode()).digest()[:8], "big") / 2.0**64


def selected(device: str, fraction: float, version: int) -> bool:
    """Whether a rollout of `version` to `fraction` of the fleet includes `device`. Raising the
    fraction keeps every device already selected and adds others."""
    return rollout_bucket(device, version) < fraction


def safe_path(path: str, what: str) -> str:
    """A relative path of plain names ('golden/a.npy'); no '..', no absolute path, no backslash.

    Raises:
        ManifestError: naming the path.
    """
    parts = path.split("/")
    if not path or any(p in ("", ".", "..") or not _PATH_PART.match(p) for p in parts):
        raise ManifestError(f"{what}: unsafe path {path!r} (expected names like 'golden/case.npy')")
    return path


def _get(d: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = d.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ManifestError(f"{what}: {key!r} is missing or not a {getattr(kind, '__name__', kind)}")
    return value


def _document(data: bytes, schema: str, what: str) -> dict[str, Any]:
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ManifestError(f"{what} has {len(data)} bytes, more than the {MAX_DOCUMENT_BYTES} allowed")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{what} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        raise ManifestError(f"{what} is not an {schema} document")
    return doc


@dataclass(frozen=True)
class FileEntry:
    path: str
    size: int
    sha256: str

    @classmethod
    def of(cls, path: str, data: bytes) -> FileEntry:
        return cls(path, len(data), hashlib.sha256(data).hexdigest())

    @classmethod
    def from_dict(cls, d: Any, what: str) -> FileEntry:
        if not isinstance(d, dict):
            raise ManifestError(f"{what}: a file entry must be an object")
        size, sha = _get(d, "size", int, what), _get(d, "sha256", str, what)
        if size < 0 or not _SHA.match(sha):
            raise ManifestError(f"{what}: bad size or sha256 in {d!r}")
        return cls(safe_path(_get(d, "path", str, what), what), size, sha)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class ReleaseEntry:
    """One version as the channel lists it: where its manifest is and what its bytes must be."""

    version: int
    manifest: FileEntry  # path relative to channel.json's folder

    @property
    def folder(self) -> str:
        return self.manifest.path.rsplit("/", 1)[0]


@dataclass(frozen=True)
class Channel:
    """channel.json: the version a channel rolls out now and the versions it knows.

    ``serial`` grows with every write (release, widening, halt): a device never accepts a lower
    one than it has seen, so an old signed channel replayed by a server cannot roll it back.
    A ``halted`` release is withdrawn: devices do not install it and those running it revert.
    """

    name: str
    serial: int
    version: int
    rollout: float
    halted: bool
    key_id: str
    issued: str
    releases: Mapping[int, ReleaseEntry] = field(default_factory=dict)

    @property
    def release(self) -> ReleaseEntry:
        return self.releases[self.version]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": CHANNEL_SCHEMA, "channel": self.name, "serial": self.serial, "version": self.version,
                "rollout": self.rollout, "halted": self.halted, "key_id": self.key_id, "issued": self.issued,
                "releases": {str(v): e.manifest.to_dict() for v, e in sorted(self.releases.items())}}

    @classmethod
    def parse(cls, data: bytes) -> Channel:
        """Raises ManifestError: not a channel document, or a field is wrong."""
        what = "channel.json"
        d = _document(data, CHANNEL_SCHEMA, what)
        rollout = _get(d, "rollout", (int, float), what)
        if not 0 <= rollout <= 1:
            raise ManifestError(f"{what}: rollout must be in 0..1, got {rollout}")
        rel = _get(d, "releases", dict, what)
        releases: dict[int, ReleaseEntry] = {}
        for k, v in rel.items():
            if not str(k).isdigit():
                raise ManifestError(f"{what}: release version {k!r} is not a number")
            releases[int(k)] = ReleaseEntry(int(k), FileEntry.from_dict(v, f"{what} release {k}"))
        channel = cls(name=_get(d, "channel", str, what), serial=_get(d, "serial", int, what),
                      version=_get(d, "version", int, what), rollout=float(rollout),
                      halted=_get(d, "halted", bool, what), key_id=_get(d, "key_id", str, what),
                      issued=_get(d, "issued", str, what), releases=releases)
        if channel.version not in releases:
            raise ManifestError(f"{what}: version {channel.version} is not among its releases")
        return channel


@dataclass(frozen=True)
class ReleaseManifest:
    """versions/V/manifest.json: one immutable version's files (the model first) and what it is."""

    channel: str
    version: int
    created: str
    key_id: str
    files: tuple[FileEntry, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)  # the model's task, labels, inputs...
    report: Mapping[str, Any] | None = None  # the conversion report's summary, when one was beside the model

    @property
    def model(self) -> FileEntry:
        return self.files[0]

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": RELEASE_SCHEMA, "channel": self.channel, "version": self.version, "created": self.created,
                "key_id": self.key_id, "model": self.model.path, "files": [f.to_dict() for f in self.files],
                "metadata": dict(self.metadata), "report": dict(self.report) if self.report is not None else None}

    @classmethod
    def parse(cls, data: bytes, what: str = "manifest.json") -> ReleaseManifest:
        """Raises ManifestError: not a release manifest, a field is wrong, or a path is unsafe."""
        d = _document(data, RELEASE_SCHEMA, what)
        files = tuple(FileEntry.from_dict(f, what) for f in _get(d, "files", list, what))
        if not files or files[0].path != d.get("model") or not files[0].path.endswith(".tflite"):
            raise ManifestError(f"{what}: the first file must be the model (a .tflite file)")
        if len({f.path for f in files}) != len(files):
            raise ManifestError(f"{what}: a file is listed twice")
        report, metadata = d.get("report"), d.get("metadata")
        return cls(channel=_get(d, "channel", str, what), version=_get(d, "version", int, what),
                   created=_get(d, "created", str, what), key_id=_get(d, "key_id", str, what), files=files,
                   metadata=metadata if isinstance(metadata, dict) else {},
                   report=report if isinstance(report, dict) else None)
