"""Quantized-against-float measures: output metrics, the gate, detection mAP, the calibration audit.

Pure functions are checked against hand-computed values; SSD parsing against real objects
in real photos (../shared); the YOLO path on a tiny detector built here (TensorFlow). The
decoders and mAP are the device's (edgekit.contract); their own tests are in
tests/edgekit/contract/.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgekit.converters.audit import audit_calibration
from edgekit.converters.data import Samples
from edgekit.contract import OutputFormat, Task, box_iou, map50
from edgekit.converters.evaluate import (TRUTH_SCORE, Metrics, ModelOutputs, compare, detections, few_objects_warning,
                                         infer_output_format, predict)
from edgekit.converters.gate import check_gate
from edgekit.errors import ConversionError
from edgekit.preprocess import fit, load_image
from edgekit.results import Detections
from edgekit.runtimes import TensorSpec
from tests.conftest import shared_model


def _dets(boxes: list[list[float]], scores: list[float], classes: list[int]) -> Detections:
    return Detections(np.array(boxes, np.float32).reshape(-1, 4), np.array(scores, np.float32),
                      np.array(classes, np.int64))


A = [0, 0, 10, 10]
B = [20, 20, 30, 30]
A_SHIFTED = [6, 6, 16, 16]  # IoU with A: 16/184 < 0.5
A_NEAR = [1, 0, 11, 10]  # IoU with A: 90/110 > 0.5


@pytest.mark.parametrize(
    ("truth", "predicted", "expected"),
    [
        ([_dets([A, B], [.9, .8], [0, 1])], [_dets([A, B], [.9, .8], [0, 1])], 1.0),
        ([_dets([A], [.9], [0])], [_dets([A_NEAR], [.5], [0])], 1.0),
        ([_dets([A], [.9], [0])], [_dets([A_SHIFTED], [.9], [0])], 0.0),
        ([_dets([A], [.9], [0])], [_dets([A], [.9], [1])], 0.0),  # right box, wrong class
        ([_dets([A, B], [.9, .9], [0, 0])], [_dets([A], [.9], [0])], 0.5),  # half the objects found
        # a confident false positive ranked first: precision 1/2 at full recall
        ([_dets([A], [.9], [0])], [_dets([B, A], [.9, .8], [0, 0])], 0.5),
        # two images, one class each: the mean over classes
        ([_dets([A], [.9], [0]), _dets([B], [.9], [1])], [_dets([A], [.9], [0]), _dets([], [], [])], 0.5),
        ([_dets([], [], [])], [_dets([A], [.9], [0])], None),  # nothing to find: undefined
    ],
)
def test_map50(truth: list[Detections], predicted: list[Detections], expected: float | None) -> None:
    got = map50(truth, predicted)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_box_iou() -> None:
    assert box_iou(np.array(A, np.float32), np.array([A, A_NEAR, A_SHIFTED, B], np.float32)) == pytest.approx(
        [1.0, 90 / 110, 16 / 184, 0.0])


def test_detections_of_a_classifier_are_refused() -> None:
    scores = np.array([[0.1, 0.7, 0.2]], np.float32)
    outs = ModelOutputs((TensorSpec("scores", 0, (1, 3), np.dtype(np.float32)),), (scores[None],),
                        (TensorSpec("image", 0, (1, 32, 32, 3), np.dtype(np.float32)),))
    with pytest.raises(ConversionError, match="the outputs read as classes, not as detections"):
        detections(outs, {"output_format": "classes"})


@pytest.mark.parametrize("layout", ["v5", "v8"])
def test_yolo_layouts_decode_the_same_boxes(layout: str) -> None:
    rows = np.array([[5, 5, 10, 10, 0.9, 0.1, 0.8],  # cx, cy, w, h, objectness, two class scores
                     [25, 25, 4, 4, 0.5, 0.9, 0.2],
                     [5, 5, 10, 10, 0.01, 0.9, 0.9]], np.float32)  # below every threshold
    # real heads have many more candidates than channels; that is how the layout is told apart
    rows = np.concatenate([rows, np.zeros((7, 7), np.float32)])
    if layout == "v5":
        raw = rows
    else:  # [4+C, N] without objectness: fold it into the class scores
        raw = np.concatenate([rows[:, :4], rows[:, 5:] * rows[:, 4:5]], axis=1).T
    outs = ModelOutputs((TensorSpec("raw", 0, (1, *raw.shape), np.dtype(np.float32)),), (raw[None],),
                        (TensorSpec("image", 0, (1, 32, 32, 3), np.dtype(np.float32)),))
    meta = {"output_format": "yolo", "detection": {"normalized": False}}
    (d,) = detections(outs, meta, threshold=0.05)
    assert d.xyxy.tolist() == [[0, 0, 10, 10], [23, 23, 27, 27]]
    assert d.class_ids.tolist() == [1, 0]
    assert d.scores.tolist() == pytest.approx([0.72, 0.45])


def _outputs(*arrays: np.ndarray) -> ModelOutputs:
    specs = tuple(TensorSpec(f"out{i}", i, (1, *a.shape[1:]), np.dtype(np.float32)) for i, a in enumerate(arrays))
    return ModelOutputs(specs, tuple(arrays))


def test_compare_classifier_against_hand_computed_values() -> None:
    ref = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.4, 0.1]], np.float32)
    quant = ref.copy()
    quant[3] = [0.4, 0.5, 0.1]  # the last sample flips its top-1
    labels = np.array([0, 1, 2, 1])
    m = compare(_outputs(ref), _outputs(quant), labels, OutputFormat.CLASSES)
    assert m.top1_agreement == 0.75
    assert (m.float_accuracy, m.accuracy) == (0.75, 1.0)
    out = m.outputs[0]
    assert out.max_abs_error == pytest.approx(0.1)
    assert out.mean_abs_error == pytest.approx(0.2 / 12)
    assert out.snr_db == pytest.approx(10 * np.log10(np.sum(ref.astype(np.float64) ** 2) / 0.02), rel=1e-5)
    cos_last = np.dot(ref[3], quant[3]) / (np.linalg.norm(ref[3]) * np.linalg.norm(quant[3]))
    assert out.cosine_min == pytest.approx(cos_last, rel=1e-6)
    same = compare(_outputs(ref), _outputs(ref), None, OutputFormat.CLASSES)
    assert same.outputs[0].snr_db is None and same.outputs[0].cosine == pytest.approx(1.0)


def test_compare_refuses_outputs_that_do_not_correspond() -> None:
    with pytest.raises(ConversionError, match="do not match"):
        compare(_outputs(np.zeros((2, 3))), _outputs(np.zeros((2, 4))), None, OutputFormat.CLASSES)


@pytest.mark.parametrize(
    ("metrics", "max_drop", "passed", "drop", "basis"),
    [
        (Metrics(10, (), top1_agreement=0.9, float_accuracy=0.8, accuracy=0.75), 5.0, True, 5.0, "accuracy"),
        (Metrics(10, (), top1_agreement=0.9, float_accuracy=0.8, accuracy=0.7), 5.0, False, 10.0, "accuracy"),
        (Metrics(10, (), top1_agreement=0.97), 2.0, False, 3.0, "agreement"),
        (Metrics(10, (), top1_agreement=0.99), 2.0, True, 1.0, "agreement"),
        (Metrics(10, (), map50=0.9), 5.0, False, 10.0, "map50"),
        (Metrics(10, (), top1_agreement=1.0), -1.0, False, 0.0, "agreement"),  # an impossible gate
        (Metrics(10, (), top1_agreement=0.5), None, True, 50.0, "agreement"),  # no gate set
        (Metrics(10, ()), 1.0, False, None, "none"),  # nothing to measure the drop on
        (None, 1.0, False, None, "none"),
    ],
)
def test_gate(metrics: Metrics | None, max_drop: float | None, passed: bool, drop: float | None, basis: str) -> None:
    g = check_gate(metrics, max_drop)
    assert (g.passed, g.basis) == (passed, basis)
    assert g.drop == (pytest.approx(drop) if drop is not None else None)
    assert g.status == ("NOT SET" if max_drop is None else "PASS" if passed else "FAIL")


def _real_inputs(path: Path, size: int) -> np.ndarray:
    img, _ = fit(load_image(path), (size, size))
    return ((img.astype(np.float32) - 128.0) / 128.0)[np.newaxis]


def test_ssd_outputs_are_read_as_real_objects(shared_models: Path, shared_images: Path) -> None:
    ssd = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    assert infer_output_format(ssd.read_bytes(), None, None) is OutputFormat.SSD
    x = np.concatenate([_real_inputs(shared_images / n, 300) for n in ("grace_hopper.png", "kite_and_cold.jpg")])
    outs = predict(ssd, x)
    hopper, kites = detections(outs, OutputFormat.SSD, threshold=0.4)
    person, kite = 0, 37  # COCO label ids of this model (coco_labels.txt line numbers)
    assert person in hopper.class_ids.tolist()
    assert hopper.scores[hopper.class_ids == person].max() == pytest.approx(0.71, abs=0.08)
    assert {person, kite} <= set(kites.class_ids.tolist())
    assert np.all((hopper.xyxy >= 0) & (hopper.xyxy <= 300))  # no transforms: model-input pixels
    # a model against itself: every detection found again
    metrics = compare(outs, outs, None, OutputFormat.SSD)
    assert metrics.map50 == pytest.approx(1.0)
    # the objects it is measured on: the float detections at TRUTH_SCORE, counted
    assert metrics.float_objects == sum(len(d) for d in detections(outs, OutputFormat.SSD, threshold=TRUTH_SCORE))
    assert 0 < metrics.float_objects < 50
    warning = few_objects_warning(metrics)
    assert warning and f"only {metrics.float_objects} object(s)" in warning and "2 validation image(s)" in warning


def test_the_gate_refuses_a_detector_judged_on_no_objects() -> None:
    none_found = Metrics(6, (), map50=1.0, float_objects=0)
    g = check_gate(none_found, 3.0)
    assert not g.passed and "found no objects in the 6 validation image(s)" in g.reason
    assert check_gate(Metrics(6, (), map50=1.0, float_objects=3), 3.0).passed  # few: passes, with a warning
    assert few_objects_warning(Metrics(6, (), map50=1.0, float_objects=3)) is not None
    assert few_objects_warning(Metrics(60, (), map50=1.0, float_objects=400)) is None
    assert few_objects_warning(Metrics(6, (), top1_agreement=1.0)) is None  # a classifier: not a detector measure


@pytest.mark.parametrize(
    ("name", "task", "expected"),
    [
        ("mobilenet_v1_0.25_128_quant.tflite", None, OutputFormat.CLASSES),
        ("ssd_mobilenet_v1_coco_quant.tflite", None, OutputFormat.SSD),
        ("ssd_mobilenet_v1_coco_quant.tflite", Task.DETECT, OutputFormat.SSD),
        ("mobilenet_v1_0.25_128_quant.tflite", Task.DETECT, ConversionError),
    ],
)
def test_infer_output_format(shared_models: Path, name: str, task: Task | None, expected: object) -> None:
    data = shared_model(shared_models, name).read_bytes()
    if expected is ConversionError:
        with pytest.raises(ConversionError, match="neither SSD"):
            infer_output_format(data, task, None)
    else:
        assert infer_output_format(data, task, None) is expected


def _samples(x: np.ndarray, y: list[int] | None = None) -> Samples:
    return Samples(x.astype(np.float32), None if y is None else np.array(y), "test")


RNG = np.random.default_rng(0)
WIDE = RNG.uniform(0, 255, (120, 8, 8, 3))


@pytest.mark.parametrize(
    ("cal", "val", "codes"),
    [
        (_samples(WIDE[:100]), _samples(WIDE[100:]), set()),
        (_samples(WIDE[:40]), _samples(WIDE[100:]), {"few-samples"}),
        (_samples(np.zeros((100, 8, 8, 3))), _samples(WIDE[100:]),
         {"constant", "mean-shift", "spread-shift", "out-of-range"}),
        (_samples(WIDE[:100] * 0.2), _samples(WIDE[100:]), {"mean-shift", "spread-shift", "out-of-range"}),
        (_samples(WIDE[:100] * 0.2), None, set()),  # nothing to compare with
        (_samples(WIDE[:100], [0, 1] * 50), _samples(WIDE[100:], [0, 1, 2, 3] * 5), {"missing-class"}),
        (_samples(WIDE[:100], [0, 1, 2, 3] * 25), _samples(WIDE[100:], [0, 1, 2, 3] * 5), set()),
    ],
)
def test_calibration_audit(cal: Samples, val: Samples | None, codes: set[str]) -> None:
    report = audit_calibration(cal, val, ("a", "b", "c", "d"))
    assert {f.code for f in report.findings} == codes


def test_audit_names_the_missing_classes_and_gives_statistics() -> None:
    report = audit_calibration(_samples(WIDE[:100], [0] * 100), _samples(WIDE[100:], [0, 2] * 10), ("a", "b", "c"))
    assert report.warnings == ["1 class(es) never appear in the calibration set: c. "
                               "Calibrate on samples of every class"]
    assert report.calibration is not None and len(report.calibration.mean) == 3
    assert report.calibration.mean[0] == pytest.approx(WIDE[:100, ..., 0].mean())
    assert report.to_dict()["calibration_samples"] == 100


def test_yolo_head_float16_keeps_every_detection(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    from edgekit.converters import convert
    from tests._tiny_models import shapes, yolo_head

    x, _ = shapes(60, seed=3)
    r = convert(yolo_head(), tmp_path / "yolo.tflite", calibration=x, mode="float16", task="detect",
                max_drop=1.0, progress=False)
    assert r.output_format is OutputFormat.YOLO and r.task is Task.DETECT
    assert r.metrics.map50 == pytest.approx(1.0, abs=0.01)
    assert r.gate.basis == "map50" and r.gate.passed
    assert r.metadata["output_format"] == "yolo" and r.metadata["task"] == "detect"
    # this head's boxes are in input pixels (0..32), not 0..1
    det = r.metadata["detection"]  # (and "outputs" when the converter split the head)
    assert {k: det[k] for k in ("box_format", "iou_threshold", "normalized")} == {
        "box_format": "cxcywh", "iou_threshold": 0.45, "normalized": False}
