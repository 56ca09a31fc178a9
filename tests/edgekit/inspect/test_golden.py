"""Golden self-tests that hold across interpreters: a release made on the workstation with one
interpreter build is accepted by a device on another (tflite-runtime on a 32-bit Pi, aarch64), and a
truly different model is still refused. Real models and photos; the other interpreter is a real one:
tf.lite in the main venv, or ai-edge-litert from the main venv when this runs on tflite-runtime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from edgekit.errors import ModelError
from edgekit.inspect.golden import MADE_WITH, compare_case, expected_arrays
from edgekit.inspect.selftest import ModelRefused, run_golden, self_test, write_expected_outputs
from edgekit.runtimes import load_model
from edgekit.runtimes.backends import available_backends
from tests.conftest import shared_model

REPO = Path(__file__).resolve().parents[3]
MODELS = [("mobilenet_v2_1.0_224_quant.tflite", 224), ("mobilenet_v1_0.25_128_quant.tflite", 128),
          ("ssd_mobilenet_v1_coco_quant.tflite", 300)]
PHOTOS = ["grace_hopper.png", "parrot.jpg", "kite_and_cold.jpg", "cat.png"]


def _photo(shared_images: Path, name: str, size: int) -> np.ndarray:
    img = cv2.imread(str(shared_images / name))
    return cv2.cvtColor(cv2.resize(img, (size, size), interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2RGB)


def _folder(tmp_path: Path, shared_images: Path, size: int) -> Path:
    root = tmp_path / "models"
    (root / "golden").mkdir(parents=True)
    for name in PHOTOS:
        np.save(root / "golden" / f"{Path(name).stem}.npy", _photo(shared_images, name, size))
    return root


def _usable(name: str) -> bool:
    return any(n == name and problem is None for n, _, problem in available_backends())


def _other_python() -> str | None:
    """A Python with ai-edge-litert (the workstation's), when this one runs tflite-runtime."""
    explicit = os.environ.get("EDGEKIT_LITERT_PYTHON")
    for exe in filter(None, [explicit, str(REPO / ".venv" / "bin" / "python")]):
        if exe != sys.executable and Path(exe).exists() and subprocess.run(
                [exe, "-c", "import ai_edge_litert, edgekit"], capture_output=True, check=False).returncode == 0:
            return exe
    return None


def _write_elsewhere(model: Path, root: Path) -> str:
    """Write version 1's expected outputs with an interpreter other than the one this test checks with."""
    here = load_model(model)
    backend = here.backend.name
    here.close()
    if backend != "tensorflow" and _usable("tensorflow"):
        write_expected_outputs(model, root, 1, backend="tensorflow")
        return "tensorflow"
    exe = _other_python() if backend == "tflite_runtime" else None
    if exe is None:
        pytest.skip(f"no second interpreter next to {backend} here (tf.lite, or a venv with ai-edge-litert)")
    code = ("import sys; from edgekit.inspect.selftest import write_expected_outputs as w; "
            "w(sys.argv[1], sys.argv[2], 1, backend='ai_edge_litert')")
    env = {k: v for k, v in os.environ.items() if k != "EDGEKIT_BACKEND"}
    subprocess.run([exe, "-c", code, str(model), str(root)], check=True, env=env, cwd=str(REPO))
    return "ai_edge_litert"


@pytest.mark.parametrize("name, size", MODELS)
def test_a_release_made_with_another_interpreter_is_accepted(tmp_path: Path, shared_models: Path,
                                                             shared_images: Path, name: str, size: int) -> None:
    model = shared_model(shared_models, name)
    root = _folder(tmp_path, shared_images, size)
    made = _write_elsewhere(model, root)
    (root / "1" / "model.tflite").write_bytes(model.read_bytes())
    with np.load(root / "1" / "golden" / "parrot.npz") as z:
        assert str(z[MADE_WITH]).startswith(made)
    from edgekit.inspect.selftest import golden_inputs

    with load_model(root / "1" / "model.tflite") as m:
        assert m.backend.name != made
        compared, worst = self_test(m, root / "1", golden_inputs(root))
    assert compared == len(PHOTOS) and worst is not None


@pytest.mark.parametrize("made, checked", [
    ("mobilenet_v2_1.0_224_quant.tflite", "mobilenet_v1_0.25_128_quant.tflite"),  # another classifier
])
def test_a_truly_different_model_is_still_refused_across_interpreters(tmp_path: Path, shared_models: Path,
                                                                       shared_images: Path, made: str,
                                                                       checked: str) -> None:
    root = _folder(tmp_path, shared_images, 224)
    _write_elsewhere(shared_model(shared_models, made), root)
    from edgekit.inspect.selftest import golden_inputs

    with load_model(shared_model(shared_models, checked)) as m, pytest.raises(ModelRefused, match="top-1|score"):
        self_test(m, root / "1", golden_inputs(root))


def _ssd_case(shared_models: Path, shared_images: Path) -> tuple:
    m = load_model(shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite"))
    outs = run_golden(m, _photo(shared_images, "kite_and_cold.jpg", 300))
    return m, outs, expected_arrays(m, outs)


def test_detections_in_another_order_match_elsewhere_but_not_on_the_same_build(shared_models: Path,
                                                                               shared_images: Path) -> None:
    """The SSD refusal of the issue: the same detections, their order shifted (another interpreter)."""
    m, outs, exp = _ssd_case(shared_models, shared_images)
    with m:
        n = int(outs[3].reshape(-1)[0])
        assert n >= 2
        order = np.r_[np.arange(n)[::-1], np.arange(n, outs[0].shape[1])]
        shuffled = [outs[0][:, order], outs[1][:, order], outs[2][:, order], outs[3]]
        with pytest.raises(ModelError, match="same interpreter build"):
            compare_case(m, "kites", shuffled, exp, "kites.npz")
        exp[MADE_WITH] = np.array("ai_edge_litert 2.3.0, delegate xnnpack, aarch64 64-bit")
        compare_case(m, "kites", shuffled, exp, "kites.npz")
        moved = [o.copy() for o in shuffled]
        best = int(np.argmax(moved[2][0, :n]))
        moved[0][0, best] += 0.05  # a box 5 % of the input away: IoU < 0.9
        with pytest.raises(ModelError, match="no match here"):
            compare_case(m, "kites", moved, exp, "kites.npz")


def test_a_near_tie_of_classes_is_named_and_accepted(shared_models: Path) -> None:
    with load_model(shared_model(shared_models, "mobilenet_v2_1.0_224_quant.tflite")) as m:
        step = m.outputs[0].scale
        exp = np.zeros((1, 1001), np.float32)
        exp[0, [7, 9]] = [100 * step, 99 * step]  # one step apart there
        got = exp.copy()
        got[0, 9] = 101 * step  # and the other way round here
        arrays = {"output_0": exp, MADE_WITH: np.array("tflite_runtime 2.14.0, delegate xnnpack, armv7l 32-bit")}
        compare_case(m, "c", [got], arrays, "c.npz")
        got[0, 9] = 115 * step  # 15 steps ahead here: more than TIE_STEPS
        with pytest.raises(ModelError, match="not a near-tie"):
            compare_case(m, "c", [got], arrays, "c.npz")


def test_expected_outputs_say_where_they_were_made(tmp_path: Path, shared_models: Path, shared_images: Path) -> None:
    root = _folder(tmp_path, shared_images, 128)
    model = shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite")
    [*_] = write_expected_outputs(model, root, 1)
    with np.load(root / "1" / "golden" / "cat.npz") as z, load_model(model) as m:
        d = m.describe()
        assert str(z[MADE_WITH]).startswith(f"{d['backend']} {d['backend_version']}, delegate {d['delegate']}")
        assert json.dumps(str(z[MADE_WITH]))  # a plain string, loadable without pickle
