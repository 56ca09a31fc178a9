"""A detector's fidelity to its float model (found, missing, extra, box IoU, score error) and the gate on it.

Hand-computed cases for the matching, then a real detector (tests/data's SSD MobileNet on real
photos) against itself and against itself with its boxes moved by a known amount.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from edgekit.cli import main
from edgekit.contract import OutputFormat
from edgekit.converters.evaluate import PREDICTION_SCORE, TRUTH_SCORE, Metrics, ModelOutputs, compare, predict
from edgekit.converters.fidelity import DetectionFidelity, detection_fidelity
from edgekit.converters.gate import GateMeasure, GateTargets, check_gate
from edgekit.converters.report import render_markdown, summary_lines
from edgekit.errors import InputError
from edgekit.preprocess import fit, load_image
from edgekit.results import Detections
from tests.conftest import shared_model


def _dets(boxes: list[list[float]], scores: list[float], classes: list[int]) -> Detections:
    return Detections(np.array(boxes, np.float32).reshape(-1, 4), np.array(scores, np.float32),
                      np.array(classes, np.int64))


A, B, C = [0, 0, 10, 10], [20, 20, 30, 30], [40, 40, 50, 50]
A_NEAR = [1, 0, 11, 10]  # IoU with A: 90/110


def test_found_missing_extra_iou_and_score_error_by_hand() -> None:
    ref = [_dets([A, B, C], [0.9, 0.6, 0.3], [0, 1, 0]), _dets([], [], [])]
    # A found a little off and less sure; B kept at a score under the threshold (missing, but matched:
    # its box and score error count); C not there at all; one box of the wrong class; one extra on image 2
    quant = [_dets([A_NEAR, B, A], [0.8, 0.2, 0.7], [0, 1, 1]), _dets([C], [0.5], [0])]
    f = detection_fidelity(ref, quant, threshold=0.25, ranked=0.05)
    assert (f.float_objects, f.found, f.missing, f.extra, f.matched) == (3, 1, 2, 2, 2)
    assert f.found_share == pytest.approx(1 / 3)
    assert f.box_iou_mean == pytest.approx((90 / 110 + 1.0) / 2)
    assert f.box_iou_min == pytest.approx(90 / 110)
    assert f.score_error_mean == pytest.approx((0.1 + 0.4) / 2, abs=1e-6)
    assert f.score_error_max == pytest.approx(0.4, abs=1e-6)


def test_each_quantized_box_stands_for_one_float_box() -> None:
    ref = [_dets([A, A_NEAR], [0.9, 0.8], [0, 0])]
    f = detection_fidelity(ref, [_dets([A], [0.9], [0])], 0.25, 0.05)
    assert (f.found, f.missing, f.extra) == (1, 1, 0)
    assert f.box_iou_mean == pytest.approx(1.0)  # the surer float box took it


def test_nothing_found_measures_no_box_precision() -> None:
    f = detection_fidelity([_dets([A], [0.9], [0])], [_dets([], [], [])], 0.25, 0.05)
    assert (f.float_objects, f.found, f.missing, f.matched) == (1, 0, 1, 0)
    assert f.box_iou_mean is None and f.score_error_mean is None
    g = check_gate(Metrics(1, (), map50=0.0, float_objects=1, detection=f), GateTargets(min_box_iou=0.9))
    assert not g.passed and "could not be measured (no float detection was matched" in g.reason


def _fid(**kw: float | int | None) -> DetectionFidelity:
    base = dict(threshold=0.25, float_objects=100, found=98, missing=2, extra=1, matched=99, box_iou_mean=0.93,
                box_iou_p5=0.8, box_iou_min=0.6, score_error_mean=0.03, score_error_max=0.2)
    return DetectionFidelity(**{**base, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("targets", "passed", "gated_on", "in_reason"),
    [
        (GateTargets(min_box_iou=0.95), False, ["box-iou"], "mean IoU with the float model's is 0.930, under the 0.95"),
        (GateTargets(min_box_iou=0.9), True, ["box-iou"], "0.930, at least the 0.9 wanted (--min-box-iou)"),
        (GateTargets(max_score_error=0.02), False, ["score-error"], "0.030, over the 0.02 allowed (--max-score-error)"),
        (GateTargets(max_extra_boxes=0), False, ["extra-boxes"], "does not show is 1, over the 0 allowed"),
        (GateTargets(max_drop=2.0, min_box_iou=0.9, max_score_error=0.05), True, ["drop", "box-iou", "score-error"],
         "dropped 1.00 points, within the 2 allowed"),
        (GateTargets(max_drop=0.5, min_box_iou=0.9), False, ["drop", "box-iou"], "dropped 1.00 points, over"),
    ],
)
def test_the_gate_names_what_it_gated_on(targets: GateTargets, passed: bool, gated_on: list[str],
                                         in_reason: str) -> None:
    g = check_gate(Metrics(10, (), map50=0.99, float_objects=100, detection=_fid()), targets)
    assert g.passed is passed and g.status == ("PASS" if passed else "FAIL")
    assert [m.value for m in g.gated_on] == gated_on and g.to_dict()["gated_on"] == gated_on
    assert in_reason in g.reason


def test_a_fidelity_target_on_a_classifier_fails_with_why() -> None:
    g = check_gate(Metrics(10, (), top1_agreement=1.0), GateTargets(max_score_error=0.02))
    assert not g.passed and g.gated_on == (GateMeasure.SCORE_ERROR,)
    assert "could not be measured (the model is not a detector; --max-score-error)" in g.reason


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--min-box-iou", "1.5", "is an IoU in (0, 1]"), ("--max-score-error", "-0.1", "is a score difference in [0, 1]"),
    ("--max-extra-boxes", "-1", "is a count, 0 or more")])
def test_bad_fidelity_limits_exit_2_before_any_work(flag: str, value: str, message: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(b"not read")
    assert main(["convert", str(model), flag, value, "-o", str(tmp_path / "o.tflite")]) == 2
    assert message in capsys.readouterr().err


def test_auto_fallback_aims_at_any_gate_target() -> None:
    from edgekit.converters import ConvertOptions

    with pytest.raises(InputError, match="auto_fallback needs a gate to aim for"):
        ConvertOptions(auto_fallback=True)
    assert ConvertOptions(auto_fallback=True, min_box_iou=0.95).gate_targets == GateTargets(min_box_iou=0.95)


def _real_inputs(path: Path, size: int) -> np.ndarray:
    img, _ = fit(load_image(path), (size, size))
    return ((img.astype(np.float32) - 128.0) / 128.0)[np.newaxis]


def test_a_real_detector_against_itself_and_with_its_boxes_moved(shared_models: Path, shared_images: Path) -> None:
    ssd = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    x = np.concatenate([_real_inputs(shared_images / n, 300) for n in ("grace_hopper.png", "kite_and_cold.jpg")])
    outs = predict(ssd, x)
    same = compare(outs, outs, None, OutputFormat.SSD).detection
    assert same is not None and same.float_objects > 0
    assert (same.found, same.missing, same.extra) == (same.float_objects, 0, 0)
    assert same.box_iou_mean == pytest.approx(1.0) and same.score_error_max == pytest.approx(0.0)
    # every box moved right by 2% of the image (SSD boxes: y1 x1 y2 x2, normalized), every score down by 0.05
    boxes, classes, scores, count = (a.copy() for a in outs.arrays)
    boxes[..., 1::2] += 0.02
    moved = ModelOutputs(outs.specs, (boxes, classes, np.clip(scores - 0.05, 0, 1), count), outs.inputs)
    m = compare(outs, moved, None, OutputFormat.SSD)
    f = m.detection
    assert f is not None and f.float_objects == same.float_objects and f.matched > 0
    assert f.box_iou_mean is not None and f.box_iou_mean < 0.99
    assert f.score_error_mean == pytest.approx(0.05, abs=1e-3)  # the scores as the decoder reads them
    assert f.found + f.missing == f.float_objects
    doc = {"mode": "int8", "output": "o", "size_bytes": 1, "float_size_bytes": 2, "size_ratio": 0.5,
           "metrics": m.to_dict(), "layers_kept_in_float": [], "worst_layers": [], "warnings": [],
           "gate": check_gate(m, GateTargets(min_box_iou=0.999, max_score_error=0.02)).to_dict()}
    md = render_markdown(doc)
    assert "**Gate: FAIL** gated on box-iou, score-error" in md
    assert f"| float detections it rests on (2 images) | {f.float_objects} |" in md
    assert f"| score error, mean / max | {f.score_error_mean:.3f} /" in md
    assert any(f"{f.found}/{f.float_objects} found" in line for line in summary_lines(doc))
    assert TRUTH_SCORE > PREDICTION_SCORE and dataclasses.asdict(f)["threshold"] == TRUTH_SCORE
