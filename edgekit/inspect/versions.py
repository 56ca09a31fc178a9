"""A versioned model folder, spelled once: its numbered versions, the hidden folders a version passes
through on its way in and out, and the one golden self-test every version takes.

::

    models/inspection/
        golden/hopper.npy          inputs every version must run cleanly (RGB uint8 images, or
                                   arrays of the model's input)
        1/model.tflite
        2/model.tflite
        2/golden/hopper.npz        optional: what version 2 must output for golden/hopper.npy
        .staging-3/                a version on its way in (downloaded, verified, tested): unseen
        .rejected-2/               a version moved aside (rolled back or refused), then deleted

The serving side (:class:`~edgekit.inspect.modelwatch.ModelWatcher`) reads :meth:`VersionFolder.find`
and runs :meth:`VersionFolder.self_test`; a release channel's follower (``edgekit.fleet``) brings
versions in through :meth:`~VersionFolder.stage` and :meth:`~VersionFolder.promote`, takes them
out with :meth:`~VersionFolder.reject`, and runs the same self-test before it promotes one, on the
same golden inputs (the version's own ``golden/``, else the folder's).
"""

from __future__ import annotations

import enum
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from edgekit.inspect.selftest import golden_inputs, run_golden, self_test
from edgekit.sinks.durable import fsync_dir

if TYPE_CHECKING:
    from edgekit.runtimes import Model

__all__ = ["Hidden", "Leftover", "SelfTest", "VersionFolder", "find_versions"]

log = logging.getLogger(__name__)


class Hidden(str, enum.Enum):
    """The hidden folders of a version, by their name's prefix (names that are not numbers are never served)."""

    STAGING = ".staging-"  # on its way in
    REJECTED = ".rejected-"  # on its way out


class Leftover(NamedTuple):
    """A hidden folder found in the model folder: what it is, the version it names (None: not a number)."""

    kind: Hidden
    version: int | None
    path: Path


@dataclass(frozen=True)
class SelfTest:
    """What a version's golden self-test found."""

    cases: int  # golden inputs run
    compared: int  # of them, checked against the version's expected outputs
    max_error: float | None  # largest |output - expected| over the compared cases
    load_ms: float
    warmup_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"cases": self.cases, "compared": self.compared, "max_error": self.max_error,
                "load_ms": round(self.load_ms, 1), "warmup_ms": round(self.warmup_ms, 1)}


def find_versions(root: Path) -> dict[int, Path]:
    """Version number -> its model file, for numeric subfolders holding ``model.tflite`` (or a
    single ``*.tflite``). Files reached through a link leading out of `root` are left out."""
    out: dict[int, Path] = {}
    real_root = root.resolve()
    for sub in root.iterdir() if root.is_dir() else ():
        if not sub.name.isdigit() or not sub.is_dir():
            continue
        model = sub / "model.tflite"
        if not model.is_file():
            found = sorted(sub.glob("*.tflite"))
            if len(found) != 1:
                continue
            model = found[0]
        if real_root not in model.resolve().parents:
            log.warning("ignoring %s: it points outside %s", model, root)
            continue
        out[int(sub.name)] = model
    return out


class VersionFolder:
    """The versioned model folder at ``root`` (see the module docstring). Every rename is followed
    by an fsync of the folder, so a power cut leaves a version either whole or absent."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # --- what serves -------------------------------------------------------------------
    def find(self) -> dict[int, Path]:
        """Version number -> its model file (:func:`find_versions`)."""
        return find_versions(self.root)

    def folder(self, version: int) -> Path:
        return self.root / str(version)

    # --- on the way in ------------------------------------------------------------------
    def staging(self, version: int) -> Path:
        """Where ``version`` is assembled, unseen by the watcher."""
        return self.root / f"{Hidden.STAGING.value}{version}"

    def stage(self, version: int) -> Path:
        """The staging folder of ``version``, made if missing (what arrived before is kept, for a resume)."""
        folder = self.staging(version)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def promote(self, version: int) -> None:
        """Rename the staged ``version`` into place: the watcher sees it appear whole."""
        self.staging(version).rename(self.folder(version))
        fsync_dir(self.root)

    def demote(self, version: int) -> None:
        """Put an installed ``version`` back into staging (it is verified and tested again before it returns)."""
        if self.folder(version).is_dir():
            self.drop(version)
            self.folder(version).rename(self.staging(version))
            fsync_dir(self.root)

    def drop(self, version: int) -> None:
        """Delete the staging folder of ``version``."""
        shutil.rmtree(self.staging(version), ignore_errors=True)

    # --- on the way out -----------------------------------------------------------------
    def reject(self, version: int) -> bool:
        """Take an installed ``version`` out: renamed aside at once (the watcher sees it gone and
        returns to the highest left), then deleted. False when it was not installed."""
        folder = self.folder(version)
        if not folder.exists():
            return False
        aside = self.root / f"{Hidden.REJECTED.value}{version}"
        shutil.rmtree(aside, ignore_errors=True)
        folder.rename(aside)
        fsync_dir(self.root)
        shutil.rmtree(aside, ignore_errors=True)
        return True

    def leftovers(self) -> list[Leftover]:
        """The hidden folders an interrupted run left behind."""
        out = []
        for kind in Hidden:
            for path in sorted(self.root.glob(f"{kind.value}*")):
                number = path.name[len(kind.value):]
                out.append(Leftover(kind, int(number) if number.isdigit() else None, path))
        return out

    def prune(self, keep_newest: int, also_keep: tuple[int | None, ...] = ()) -> None:
        """Remove installed versions beyond the ``keep_newest`` newest, never one of ``also_keep``
        (the serving version and the one a trial would return to)."""
        versions = self.find()
        keep = set(sorted(versions, reverse=True)[:keep_newest]) | {v for v in also_keep if v}
        for v in set(versions) - keep:
            shutil.rmtree(self.folder(v), ignore_errors=True)

    # --- the one self-test --------------------------------------------------------------
    def golden(self, folder: Path) -> dict[str, np.ndarray]:
        """The golden inputs a version in ``folder`` runs: its own ``golden/*.npy``, else the folder's."""
        return golden_inputs(folder) or golden_inputs(self.root)

    def self_test(self, model: Model, folder: Path, *, warmup: int = 0, load_ms: float = 0.0) -> SelfTest:
        """Warm ``model`` (the version in ``folder``) up ``warmup`` times, run every golden input and
        compare with the version's expected outputs (:func:`edgekit.inspect.selftest.self_test`).

        Raises:
            ModelRefused: an input does not run, an output is not finite or differs from the expected.
        """
        golden = self.golden(folder)
        t0 = time.perf_counter()
        sample = next(iter(golden.values()), None)
        for _ in range(warmup):
            run_golden(model, sample) if sample is not None else model.invoke()
        warmup_ms = (time.perf_counter() - t0) * 1e3
        compared, worst = self_test(model, folder, golden)
        return SelfTest(len(golden), compared, worst, load_ms, warmup_ms)
