"""A float .tflite YOLO head (boxes and scores in one concatenated output) split in the flatbuffer.

The detector is built here the way Ultralytics exports one (channels-first input, [1, 4 + C, N]
with boxes in input pixels, its metadata.json appended): without the split, int8 gives boxes and
scores one scale and the gate exits 3; with it, the gate passes and the device reads two outputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import _tiny_models as tiny

pytestmark = pytest.mark.needs_tf


def _tf() -> Any:
    tf = pytest.importorskip("tensorflow", reason="building the test models needs TensorFlow")
    pytest.importorskip("ai_edge_quantizer", reason="quantizing a .tflite needs ai-edge-quantizer")
    return tf


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _tf()
    return tmp_path_factory.mktemp("tflite_head")


DET = 64  # detector input side


def _ultralytics_like(tf: Any, path: Path) -> Path:
    """An untrained YOLOv8-style head as Ultralytics exports it: [1, 4 + 3, N] with boxes in input
    pixels and sigmoid class scores joined by one final concatenation, its metadata.json appended."""
    import json
    import zipfile

    import keras

    keras.utils.set_random_seed(3)
    inp = keras.Input((3, DET, DET), batch_size=1, name="images")  # channels first, as litert-torch writes it
    h = keras.layers.Permute((2, 3, 1))(inp)
    h = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(h)
    h = keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="relu")(h)
    raw = keras.layers.Reshape((256, 7))(keras.layers.Conv2D(7, 3, padding="same")(h))
    xy = keras.layers.Lambda(lambda t: keras.ops.sigmoid(t[..., :2]) * DET, output_shape=(256, 2))(raw)
    wh = keras.layers.Lambda(lambda t: keras.ops.sigmoid(t[..., 2:4]) * DET / 3, output_shape=(256, 2))(raw)
    cls = keras.layers.Lambda(lambda t: keras.ops.sigmoid(4.0 * t[..., 4:]), output_shape=(256, 3))(raw)
    boxes = keras.layers.Permute((2, 1))(keras.layers.Concatenate(-1)([xy, wh]))
    out = keras.layers.Concatenate(axis=1)([boxes, keras.layers.Permute((2, 1))(cls)])
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, out)).convert())
    names = {"0": "hbar", "1": "vbar", "2": "square"}
    with zipfile.ZipFile(path, "a", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("metadata.json", json.dumps({"author": "Ultralytics", "task": "detect", "names": names}))
    return path


@pytest.fixture(scope="module")
def detector(work: Path) -> dict[str, Path]:
    tf = _tf()
    out = {"nchw": _ultralytics_like(tf, work / "yolo_nchw_float.tflite")}
    for key, n, seed in (("cal", 120, 5), ("val", 40, 6)):
        np.savez(work / f"det_{key}.npz", x=tiny.shapes(n, seed=seed, size=DET)[0])
        out[key] = work / f"det_{key}.npz"
    return out


def test_yolo_head_split_passes_the_gate_and_unsplit_exits_3(detector: dict[str, Path], tmp_path: Path,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    from edgekit.cli import main
    from edgekit.runtimes import inspect_model

    common = ["--mode", "int8", "--calibration", str(detector["cal"]), "--validation", str(detector["val"]),
              "--max-drop", "15", "--no-diagnose", "-q", "--json"]
    assert main(["convert", str(detector["nchw"]), "-o", str(tmp_path / "raw.tflite"), "--no-split-head",
                 *common]) == 3
    collapsed = json.loads(capfd.readouterr().out)
    assert not (tmp_path / "raw.tflite").exists() and (tmp_path / "raw.FAILED-GATE.tflite").exists()
    assert main(["convert", str(detector["nchw"]), "-o", str(tmp_path / "split.tflite"), *common]) == 0
    fixed = json.loads(capfd.readouterr().out)
    assert fixed["metrics"]["map50"] > collapsed["metrics"]["map50"] + 0.1
    meta = inspect_model(tmp_path / "split.tflite").metadata
    assert meta["detection"]["outputs"] == ["boxes", "scores"] and meta["labels"] == ["hbar", "vbar", "square"]
    assert meta["preprocessing"]["resize"] == "letterbox" and meta["preprocessing"]["std"] == [255.0] * 3
    outs = inspect_model(tmp_path / "split.tflite").outputs
    assert [tuple(o.shape) for o in outs] == [(1, 4, 256), (1, 3, 256)] and all(o.dtype == np.int8 for o in outs)


def test_device_detections_of_the_split_head_are_what_the_gate_measured(detector: dict[str, Path],
                                                                        tmp_path: Path) -> None:
    from edgekit import Detector
    from edgekit.contract import map50
    from edgekit.converters import convert

    kw = dict(calibration=detector["cal"], validation=detector["val"], progress=False, diagnose=False)
    q = convert(detector["nchw"], tmp_path / "int8.tflite", mode="int8", **kw)
    f = convert(detector["nchw"], tmp_path / "float.tflite", mode="float32", **kw)
    images = np.load(detector["val"])["x"]
    from edgekit.converters.evaluate import PREDICTION_SCORE, TRUTH_SCORE

    with Detector.create_from_model_path(f.output, threshold=TRUTH_SCORE) as fd, \
            Detector.create_from_model_path(q.output, threshold=PREDICTION_SCORE) as qd:
        truth, found = [fd.detect(im) for im in images], [qd.detect(im) for im in images]
    assert sum(len(t) for t in truth) > 0
    assert map50(truth, found) == pytest.approx(q.metrics.map50, abs=1e-9)


@pytest.mark.parametrize(("scale", "normalized"), [(1.0, True), (160.0, False)])
def test_box_units_are_judged_on_confident_rows(scale: float, normalized: bool) -> None:
    """Ultralytics' TFLite export gives boxes as fractions of the input, but its empty anchors carry
    boxes wider than the input: the metadata must still say normalized (the device maps by it)."""
    from edgekit.converters.evaluate import ModelOutputs, detection_metadata
    from edgekit.converters.options import OutputFormat
    from edgekit.runtimes import TensorSpec

    rng = np.random.default_rng(0)
    raw = np.zeros((3, 8, 525), np.float32)  # samples, 4 + 4 classes, anchors
    raw[:, :4] = rng.uniform(0, 3.0, (3, 4, 525))  # empty anchors: anything
    raw[:, 4:] = rng.uniform(0, 0.01, (3, 4, 525))
    raw[:, :4, :20] = rng.uniform(0.1, 0.6, (3, 4, 20)) * scale  # the objects
    raw[:, 4, :20] = 0.9
    if scale != 1.0:
        raw[:, :4, 20:] *= scale
    ref = ModelOutputs((TensorSpec("output_0", 0, (1, 8, 525), np.dtype(np.float32)),), (raw,))
    got = detection_metadata(OutputFormat.YOLO, ref)
    assert got is not None and got.normalized is normalized
