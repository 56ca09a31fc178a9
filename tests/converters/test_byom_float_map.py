"""One network, three ways in: the gate's float mAP@0.5 against the labels must not depend on the door.

The detector trained here enters as Keras (pixels in, Rescaling inside), as its ONNX export
(NCHW, 0..1, run by onnxruntime as the reference) and as a float .tflite (NHWC, 0..1, edgekit
metadata saying pixels / 255). All three compute the same function of the same images, so the
float mAP each conversion reports must agree (a reported regression had Keras and .tflite at
0.012 beside ONNX at 0.75: a data or evaluation path, not quantization). The demo has 4 classes,
so a split head's boxes [1, 4, N] and scores [1, 4, N] have the same shape: only the roles the
file's metadata states tell them apart. A float .tflite whose head was already split (edgekit's
own float32 output, scores first) was read by shape, scores as boxes: float mAP 0.000, gate PASS.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.needs_tf]


@pytest.fixture(scope="module")
def float_maps(yolo_detector, tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    from edgekit.converters import ConvertOptions, Mode, PreprocessingOverrides, convert
    from edgekit.runtimes import load_model

    work = tmp_path_factory.mktemp("byom_float_map")
    sources: dict[str, Path] = {"keras": yolo_detector.keras_path, "onnx": yolo_detector.onnx_path}
    for kind, split in (("tflite", False), ("split tflite", True)):  # one [1, 8, N] output, or boxes and scores
        sources[kind] = convert(  # the split's roles are found on validation samples
            yolo_detector.unit_keras_path, work / f"{kind}_float32.tflite",
            validation=yolo_detector.validation if split else None, options=ConvertOptions(
                mode=Mode.FLOAT32, progress=False, preprocessing=PreprocessingOverrides(scale=1 / 255),
                split_head=split)).output

    with load_model(sources["split tflite"]) as model:
        stated = model.metadata["detection"]["outputs"]
    assert stated == ["scores", "boxes"], "the case needs the scores first: read by shape they would be the boxes"
    maps = {}
    for kind, path in sources.items():
        res = convert(path, work / f"{kind}.tflite", calibration=yolo_detector.calibration,
                      validation=yolo_detector.validation,
                      options=ConvertOptions(mode=Mode.FLOAT32, max_drop=1.0, diagnose=False, progress=False))
        assert res.gate.basis == "map50-truth", (kind, res.gate.reason)
        assert sorted(res.metadata["detection"]["outputs"]) == ["boxes", "scores"], kind  # split by default
        assert res.metadata["detection"]["normalized"] is False, kind  # boxes in input pixels
        if kind == "split tflite":  # the file's own roles travel on, so the device reads it as the gate did
            assert res.metadata["detection"]["outputs"] == stated
        maps[kind] = res.metrics.float_map50_truth
    return maps


def test_float_map_is_well_above_chance_for_every_source(float_maps: dict[str, float]) -> None:
    assert all(m is not None and m > 0.5 for m in float_maps.values()), float_maps


@pytest.mark.parametrize("kind", ["keras", "tflite", "split tflite"])
def test_float_map_matches_the_onnx_source_on_the_same_network(float_maps: dict[str, float], kind: str) -> None:
    assert abs(float_maps[kind] - float_maps["onnx"]) <= 0.01, float_maps
