"""Channels-first models ((1, 3, H, W), as litert-torch and Ultralytics export) run like their
channels-last twins: the same image gives the same scores and boxes in Classifier, Detector, the
loop (latency and throughput), the CLI, and `edgekit info` names the layout.

The twins are one Keras body; the NCHW model puts a Permute in front of it (exported as a
TRANSPOSE), so both compute the same function."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgekit.contract import Layout, Normalization
from edgekit.preprocess import to_input, write_channels_first, write_channels_last
from edgekit.runtimes.tensors import TensorSpec

SIZE = 32


def _spec(dtype: Any, layout: Layout, scale: float = 0.0, zero_point: int = 0) -> TensorSpec:
    shape = (1, 3, 24, 40) if layout is Layout.NCHW else (1, 24, 40, 3)
    return TensorSpec("image", 0, shape, np.dtype(dtype), scale, zero_point)


@pytest.mark.parametrize("dtype, scale, zp, norm", [
    (np.float32, 0.0, 0, None),
    (np.float32, 0.0, 0, Normalization((0.0,), (255.0,))),
    (np.float32, 0.0, 0, Normalization((103.9, 116.8, 123.7), (1.0,), "BGR")),
    (np.float16, 0.0, 0, Normalization((127.5,), (127.5,))),
    (np.uint8, 1 / 255, 0, Normalization((0.0,), (255.0,))),
    (np.uint8, 0.0078125, 128, None),
    (np.int8, 1 / 255, -128, Normalization((0.0,), (255.0,))),
    (np.int8, 0.5, 3, None),
])
@pytest.mark.parametrize("bgr", [False, True])
def test_channels_first_values_are_the_channels_last_values_transposed(dtype, scale, zp, norm, bgr) -> None:
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (24, 40, 3), dtype=np.uint8)
    nhwc = to_input(rgb, _spec(dtype, Layout.NHWC, scale, zp), norm)
    assert np.array_equal(to_input(rgb, _spec(dtype, Layout.NCHW, scale, zp), norm), nhwc.transpose(0, 3, 1, 2))
    image = np.ascontiguousarray(rgb[:, :, ::-1]) if bgr else rgb
    target = np.full((1, 3, 24, 40), 7, dtype=dtype)
    write_channels_first(image, target, _spec(dtype, Layout.NCHW, scale, zp), norm, bgr=bgr)
    assert np.array_equal(target, nhwc.transpose(0, 3, 1, 2))
    target = np.full((1, 24, 40, 3), 7, dtype=dtype)  # and the engine's channels-last writer
    write_channels_last(image, target, _spec(dtype, Layout.NHWC, scale, zp), norm, bgr=bgr)
    assert np.array_equal(target, nhwc)


@dataclass(frozen=True)
class Twins:
    classifier: dict[str, Path]  # "nhwc-int8"/"nchw-int8" -> file
    detector: dict[str, Path]  # "nhwc"/"nchw" x "float"/"int8" -> file


def _export(tf: Any, model: Any, path: Path, int8: bool, channels_first: bool) -> Path:
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if int8:
        rng = np.random.default_rng(0)

        def representative() -> Any:
            for _ in range(24):
                x = rng.integers(0, 256, (1, SIZE, SIZE, 3)).astype(np.float32)
                yield [x.transpose(0, 3, 1, 2) if channels_first else x]

        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = conv.inference_output_type = tf.int8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        path.write_bytes(conv.convert())
    return path


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> Twins:
    tf = pytest.importorskip("tensorflow", reason="building test models needs TensorFlow (the convert extra)")
    keras = tf.keras
    keras.utils.set_random_seed(0)
    folder = tmp_path_factory.mktemp("channels_first")
    body_in = keras.Input((SIZE, SIZE, 3))
    h = keras.layers.Rescaling(1 / 255.0)(body_in)
    h = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(h)
    feat = keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(h)
    cls = keras.Model(body_in, keras.layers.Dense(5, activation="softmax")(keras.layers.GlobalAveragePooling2D()(feat)))
    raw = keras.layers.Conv2D(4 + 3, 1)(feat)  # [1, 8, 8, 7] -> 64 candidates, cx cy w h + 3 scores
    raw = keras.layers.Reshape((64, 7))(raw)
    boxes = keras.layers.Lambda(lambda t: keras.ops.sigmoid(t[..., :4]) * SIZE, output_shape=(64, 4))(raw)
    scores = keras.layers.Lambda(lambda t: keras.ops.sigmoid(t[..., 4:]), output_shape=(64, 3))(raw)
    head = keras.layers.Permute((2, 1))(keras.layers.Concatenate()([boxes, scores]))  # [1, 4+C, N]
    det = keras.Model(body_in, head)
    out: dict[str, dict[str, Path]] = {"classifier": {}, "detector": {}}
    for kind, body in (("classifier", cls), ("detector", det)):
        nhwc_in = keras.Input((SIZE, SIZE, 3), batch_size=1)
        nchw_in = keras.Input((3, SIZE, SIZE), batch_size=1)
        nhwc = keras.Model(nhwc_in, body(nhwc_in))
        nchw = keras.Model(nchw_in, body(keras.layers.Permute((2, 3, 1))(nchw_in)))
        for name, model in (("nhwc", nhwc), ("nchw", nchw)):
            for q in ("float", "int8") if kind == "detector" else ("int8",):  # the float path is the detector's
                out[kind][f"{name}-{q}"] = _export(tf, model, folder / f"{kind}_{name}_{q}.tflite", q == "int8",
                                                   name == "nchw")
    return Twins(out["classifier"], out["detector"])


def _photo(shared_images: Path | None = None) -> np.ndarray:
    from tests.conftest import SHARED_IMAGES

    from edgekit import load_image

    if SHARED_IMAGES is not None and (SHARED_IMAGES / "parrot.jpg").exists():
        return load_image(SHARED_IMAGES / "parrot.jpg")
    rng = np.random.default_rng(5)  # no photos here: a smooth synthetic image
    return np.clip(rng.normal(128, 60, (48, 64, 3)), 0, 255).astype(np.uint8)


@pytest.mark.slow
@pytest.mark.parametrize("q", ["float", "int8"])
def test_classifier_and_detector_give_the_nhwc_results(twins: Twins, q: str) -> None:
    from edgekit import Classifier, Detector

    frame = _photo()
    if q == "int8":
        got = {}
        for layout in ("nhwc", "nchw"):
            with Classifier.create_from_model_path(twins.classifier[f"{layout}-{q}"], top_k=5) as c:
                assert c.input_size == (SIZE, SIZE)
                got[layout] = c.classify(frame)
        np.testing.assert_array_equal(got["nchw"].class_ids, got["nhwc"].class_ids)
        np.testing.assert_allclose(got["nchw"].scores, got["nhwc"].scores, atol=1 / 256)
    dets = {}
    for layout in ("nhwc", "nchw"):
        with Detector.create_from_model_path(twins.detector[f"{layout}-{q}"], threshold=0.3, resize="letterbox") as d:
            dets[layout] = d.detect(frame)
    assert len(dets["nhwc"]) > 0
    np.testing.assert_array_equal(dets["nchw"].class_ids, dets["nhwc"].class_ids)
    np.testing.assert_allclose(dets["nchw"].xyxy, dets["nhwc"].xyxy, atol=1e-3 if q == "float" else 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("performance", ["latency", "throughput"])
def test_the_loop_feeds_a_channels_first_model(twins: Twins, tmp_path: Path, performance: str) -> None:
    from PIL import Image

    from edgekit import Detector

    rng = np.random.default_rng(2)
    for i in range(8):  # image files are read with OpenCV (BGR), so the swap happens in the writer
        Image.fromarray(np.clip(rng.normal(128, 70, (40, 56, 3)), 0, 255).astype(np.uint8)).save(tmp_path / f"{i}.png")
    runs = {}
    for layout in ("nhwc", "nchw"):
        with Detector.create_from_model_path(twins.detector[f"{layout}-float"], threshold=0.3) as d:
            runs[layout] = [r.detections for r in d.stream(str(tmp_path / "*.png"), performance=performance)]
    assert len(runs["nchw"]) == 8 and sum(len(x) for x in runs["nhwc"]) > 0
    for a, b in zip(runs["nchw"], runs["nhwc"]):
        np.testing.assert_allclose(a.xyxy, b.xyxy, atol=1e-3)


@pytest.mark.slow
def test_cli_runs_it_and_info_shows_the_layout(twins: Twins, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import json

    from PIL import Image

    from edgekit.cli import main
    from edgekit.commands.info import info_dict

    nchw = str(twins.detector["nchw-int8"])
    d = info_dict(nchw)
    assert d["image_input"] == {"width": SIZE, "height": SIZE, "layout": "NCHW"}
    assert main(["info", nchw]) == 0
    assert "32x32 RGB, NCHW (channels first" in capsys.readouterr().out
    img = tmp_path / "frame.png"
    Image.fromarray(_photo()).save(img)
    outs = {}
    for layout in ("nhwc", "nchw"):
        assert main(["detect", "-m", str(twins.detector[f"{layout}-float"]), "--source", str(img), "--json", "-q",
                     "-t", "0.3"]) == 0
        outs[layout] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert outs["nchw"] and [r["detections"] for r in outs["nchw"]] == [r["detections"] for r in outs["nhwc"]]
    assert main(["classify", "-m", str(twins.classifier["nchw-int8"]), "-k", "2", str(img)]) == 0
