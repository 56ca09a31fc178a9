"""The versioned model folder, spelled once (edgekit.inspect.versions): a version staged unseen,
promoted whole, rejected out of sight, what an interrupted run left, pruning, and the one golden
self-test the watcher and a fleet follower both run (the version's own inputs, else the folder's),
on a real model and a real photo."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from edgekit.inspect.selftest import ModelRefused
from edgekit.inspect.versions import Hidden, Leftover, VersionFolder
from tests.conftest import shared_model

MODEL = "mobilenet_v1_0.25_128_quant.tflite"


def _install(folder: VersionFolder, version: int, model: bytes = b"tflite") -> Path:
    stage = folder.stage(version)
    (stage / "model.tflite").write_bytes(model)
    folder.promote(version)
    return folder.folder(version) / "model.tflite"


def test_a_staged_version_is_unseen_until_promoted_and_gone_once_rejected(tmp_path: Path) -> None:
    folder = VersionFolder(tmp_path)
    one = _install(folder, 1)
    stage = folder.stage(2)
    (stage / "model.tflite").write_bytes(b"half")
    assert folder.find() == {1: one} and stage == tmp_path / ".staging-2"
    folder.promote(2)
    assert sorted(folder.find()) == [1, 2] and not stage.exists()
    assert folder.reject(2) and folder.find() == {1: one}
    assert not folder.reject(2)  # not installed (any more)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1"]  # nothing left aside


def test_demote_puts_a_version_back_into_staging(tmp_path: Path) -> None:
    folder = VersionFolder(tmp_path)
    _install(folder, 3)
    folder.demote(3)
    assert folder.find() == {} and (folder.staging(3) / "model.tflite").read_bytes() == b"tflite"
    folder.drop(3)
    assert not folder.staging(3).exists()


def test_leftovers_name_their_kind_and_version(tmp_path: Path) -> None:
    for name in (".staging-4", ".staging-x", ".rejected-2", "5"):
        (tmp_path / name).mkdir()
    assert VersionFolder(tmp_path).leftovers() == [
        Leftover(Hidden.STAGING, 4, tmp_path / ".staging-4"), Leftover(Hidden.STAGING, None, tmp_path / ".staging-x"),
        Leftover(Hidden.REJECTED, 2, tmp_path / ".rejected-2")]


def test_prune_keeps_the_newest_and_the_ones_asked_for(tmp_path: Path) -> None:
    folder = VersionFolder(tmp_path)
    for v in range(1, 6):
        _install(folder, v)
    folder.prune(2, also_keep=(1, None))
    assert sorted(folder.find()) == [1, 4, 5]


def test_one_self_test_the_versions_own_golden_inputs_else_the_folders(tmp_path: Path, shared_models: Path,
                                                                       shared_images: Path) -> None:
    import cv2

    from edgekit.inspect.selftest import write_expected_outputs
    from edgekit.runtimes import load_model

    folder = VersionFolder(tmp_path)
    model_file = _install(folder, 1, shared_model(shared_models, MODEL).read_bytes())
    photo = cv2.cvtColor(cv2.imread(str(shared_images / "kite_and_cold.jpg")), cv2.COLOR_BGR2RGB)
    (tmp_path / "golden").mkdir()
    np.save(tmp_path / "golden" / "kite.npy", photo)
    assert list(folder.golden(model_file.parent)) == ["kite"]  # the folder's, for a version without its own
    with load_model(model_file) as model:
        test = folder.self_test(model, model_file.parent, warmup=2, load_ms=3.0)
    assert (test.cases, test.compared, test.max_error, test.load_ms) == (1, 0, None, 3.0) and test.warmup_ms > 0
    write_expected_outputs(model_file, tmp_path, 1)
    with load_model(model_file) as model:
        test = folder.self_test(model, model_file.parent)
    assert (test.cases, test.compared) == (1, 1) and test.max_error == 0.0
    own = model_file.parent / "golden"  # a version's own inputs replace the folder's
    shutil.copy(tmp_path / "golden" / "kite.npy", own / "own.npy")
    assert list(folder.golden(model_file.parent)) == ["own"]
    with load_model(model_file) as model:
        test = folder.self_test(model, model_file.parent)
    assert (test.cases, test.compared) == (1, 0)  # it has no expected outputs for "own"
    np.save(own / "own.npy", np.zeros((7, 3), np.uint8))  # not an image, not the input's shape
    with load_model(model_file) as model, pytest.raises(ModelRefused, match="golden input 'own'"):
        folder.self_test(model, model_file.parent)
