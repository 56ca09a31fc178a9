"""Writing releases on the workstation: immutable version folders and the signed channel.

::

    key = load_signing_key("signing.key")
    write_release("model.tflite", 3, "releases/line1", key, rollout=0.1, golden="golden.npz")
    set_rollout("releases/line1", 3, key, rollout=1.0)     # widen to the whole fleet
    set_rollout("releases/line1", 3, key, halted=True)     # withdraw it

Upload the folder with whatever the team already uses (rsync, ``aws s3 sync``); devices only
read it. A version folder is never rewritten: releasing an existing version with another model
is refused, with the same model it only changes the channel (a widening).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import ConfigError, InputError
from edgekit.fleet.keys import SigningKey
from edgekit.fleet.manifest import (Channel, FileEntry, ManifestError, ReleaseEntry, ReleaseManifest, canonical_json,
                                    safe_path)
from edgekit.outputs import report_json
from edgekit.sinks.durable import atomic_write

__all__ = ["ReleaseResult", "write_release", "set_rollout", "read_channel_file", "parse_fraction",
           "REPORT_KEYS"]

# What the manifest keeps of the conversion report (report.json in the convert's --report-dir).
REPORT_KEYS = ("mode", "engine", "task", "output_format", "size_bytes", "float_size_bytes", "size_ratio", "gate",
               "metrics", "source_sha256", "edgekit_version")


@dataclass(frozen=True)
class ReleaseResult:
    folder: Path  # the release folder (channel.json)
    version: int
    created: bool  # False: the version existed with the same model; only the channel changed
    channel: Channel
    manifest: ReleaseManifest


def parse_fraction(text: str) -> float:
    """'10%' or '0.1' -> 0.1.

    Raises:
        InputError: not a percentage or fraction in 0..100% / 0..1.
    """
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise InputError(f"--rollout takes a percentage like 10% or a fraction like 0.1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise InputError(f"--rollout must lie in 0%..100%, got {text!r}")
    return value


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def read_channel_file(folder: Path) -> Channel | None:
    """The channel a release folder holds now (its signature is not checked: it is ours)."""
    path = folder / "channel.json"
    if not path.is_file():
        return None
    try:
        return Channel.parse(path.read_bytes())
    except ManifestError as exc:
        raise ConfigError(f"{path}: {exc}; fix or remove it") from None


def _report_summary(report_dir: Path) -> dict[str, Any] | None:
    path = report_json(report_dir)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {k: doc[k] for k in REPORT_KEYS if isinstance(doc, dict) and k in doc} or None


def _golden_files(model: Path, golden: Path, stage: Path) -> list[tuple[str, bytes]]:
    """Golden inputs (every array of the .npz) and what this model outputs for them."""
    from edgekit.inspect.golden import expected_arrays
    from edgekit.inspect.selftest import run_golden
    from edgekit.runtimes import load_model

    try:
        with np.load(golden, allow_pickle=False) as z:
            cases = {name: z[name] for name in z.files}
    except (OSError, ValueError) as exc:
        raise InputError(f"--golden {str(golden)!r} is not a readable .npz of input arrays: {exc}") from None
    if not cases:
        raise InputError(f"--golden {str(golden)!r} holds no arrays")
    out: list[tuple[str, bytes]] = []
    with load_model(model) as m:
        for case, x in cases.items():
            safe_path(f"golden/{case}.npy", "--golden")
            outputs = run_golden(m, x)
            for suffix, write in ((".npy", lambda p: np.save(p, x)),
                                  (".npz", lambda p: np.savez(p, allow_pickle=False, **expected_arrays(m, outputs)))):
                tmp = stage / f"case{suffix}"
                write(tmp)
                out.append((f"golden/{case}{suffix}", tmp.read_bytes()))
                tmp.unlink()
    return out


def _model_metadata(model: Path) -> dict[str, Any]:
    from edgekit.runtimes.tensors import inspect_model

    info = inspect_model(model)
    return {"edgekit": info.metadata, "inputs": [s.to_dict() for s in info.inputs],
            "outputs": [s.to_dict() for s in info.outputs]}


def _sign_doc(path: Path, doc: dict[str, Any], key: SigningKey) -> bytes:
    data = canonical_json(doc)
    atomic_write(path.with_name(path.name + ".sig"), (key.sign(data) + "\n").encode())
    atomic_write(path, data)
    return data


def _write_channel(folder: Path, channel: Channel, key: SigningKey) -> Channel:
    _sign_doc(folder / "channel.json", channel.to_dict(), key)
    return channel


def write_release(model: str | os.PathLike[str], version: int, to: str | os.PathLike[str], key: SigningKey, *,
                  rollout: float = 1.0, golden: str | os.PathLike[str] | None = None,
                  channel_name: str | None = None, report_dir: str | os.PathLike[str] | None = None) -> ReleaseResult:
    """Write version `version` of `model` into the release folder `to` and point its channel at it.

    The manifest keeps the summary of the conversion report in `report_dir` (``edgekit convert
    --report-dir``; default: the model's folder) when one is there.

    Raises:
        ConfigError: the version exists with another model (versions are immutable), or is lower
            than the channel's newest.
        InputError: a bad version, rollout or golden file. ModelError: not a .tflite model.
    """
    if version < 1:
        raise InputError(f"--version must be a whole number >= 1 (device folders are numbered), got {version}")
    model_path, folder = Path(model), Path(to)
    data = model_path.read_bytes() if model_path.is_file() else None
    if data is None:
        raise InputError(f"model {str(model_path)!r} does not exist")
    metadata = _model_metadata(model_path)  # refuses a file that is not a .tflite model
    folder.mkdir(parents=True, exist_ok=True)
    current = read_channel_file(folder)
    vdir = folder / "versions" / str(version)
    if vdir.exists():
        existing = ReleaseManifest.parse((vdir / "manifest.json").read_bytes())
        if existing.model.sha256 != hashlib.sha256(data).hexdigest():
            raise ConfigError(f"version {version} exists in {folder} with another model; versions are immutable, "
                              f"release this one as version {max(_versions(folder)) + 1}")
        manifest = existing
        created = False
    else:
        if current is not None and version < max(current.releases):
            raise ConfigError(f"version {version} is lower than the channel's newest ({max(current.releases)}); "
                              "devices serve the highest version, so release a higher one")
        summary = _report_summary(Path(report_dir) if report_dir is not None else model_path.parent)
        manifest = _write_version(folder, model_path, data, version, key, metadata, golden,
                                  channel_name or (current.name if current else folder.resolve().name), summary)
        created = True
    entry = FileEntry.of(f"versions/{version}/manifest.json", (vdir / "manifest.json").read_bytes())
    releases = dict(current.releases) if current else {}
    releases[version] = ReleaseEntry(version, entry)
    channel = Channel(name=manifest.channel, serial=(current.serial + 1) if current else 1, version=version,
                      rollout=rollout, halted=False, key_id=key.public.id, issued=_now(), releases=releases)
    return ReleaseResult(folder, version, created, _write_channel(folder, channel, key), manifest)


def _versions(folder: Path) -> list[int]:
    return [int(p.name) for p in (folder / "versions").iterdir() if p.name.isdigit()] or [0]


def _write_version(folder: Path, model: Path, data: bytes, version: int, key: SigningKey, metadata: dict[str, Any],
                   golden: str | os.PathLike[str] | None, name: str,
                   report: dict[str, Any] | None) -> ReleaseManifest:
    stage = folder / "versions" / f".{version}.tmp"
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "golden").mkdir(parents=True)
    try:
        files = [("model.tflite", data)]
        if golden is not None:
            files += _golden_files(model, Path(golden), stage)
        for rel, content in files:
            (stage / rel).write_bytes(content)
        manifest = ReleaseManifest(channel=name, version=version, created=_now(), key_id=key.public.id,
                                   files=tuple(FileEntry.of(rel, content) for rel, content in files),
                                   metadata=metadata, report=report)
        _sign_doc(stage / "manifest.json", manifest.to_dict(), key)
        os.rename(stage, folder / "versions" / str(version))  # the version appears whole or not at all
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return manifest


def set_rollout(to: str | os.PathLike[str], version: int, key: SigningKey, *, rollout: float | None = None,
                halted: bool | None = None) -> Channel:
    """Widen, narrow or halt the channel's current release (a new signed channel.json).

    Raises:
        ConfigError: the folder holds no channel, or `version` is not the one it rolls out.
    """
    folder = Path(to)
    current = read_channel_file(folder)
    if current is None:
        raise ConfigError(f"{folder} holds no channel.json; release a model there first")
    if version != current.version:
        raise ConfigError(f"the channel in {folder} rolls out version {current.version}, not {version}")
    channel = Channel(name=current.name, serial=current.serial + 1, version=version,
                      rollout=current.rollout if rollout is None else rollout,
                      halted=current.halted if halted is None else halted, key_id=key.public.id, issued=_now(),
                      releases=current.releases)
    return _write_channel(folder, channel, key)
