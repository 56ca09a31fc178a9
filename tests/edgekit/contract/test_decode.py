"""Decoders on hand-made tensors with known answers: NMS, YOLO in both layouts (pixels and
normalized, stretch and letterbox), SSD post-processed outputs, classification; picking the
decoder from metadata or output shapes; the result types and drawing."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.contract import (
    BoxFormat,
    OutputFormat,
    YoloLayout,
    batched_nms,
    decode_classes,
    decode_ssd,
    decode_yolo,
    detect_format,
    make_decoder,
    nms,
    to_xyxy,
    yolo_layout,
)
from edgekit.errors import InputError, ModelError
from edgekit.preprocess import ResizeMode, Transform, fit
from edgekit.drawing import draw
from edgekit.results import Classes, Detection, Detections
from edgekit.runtimes.tensors import TensorSpec

BOXES = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 5]], np.float32)


@pytest.mark.parametrize("scores, iou, expected", [
    ([0.9, 0.8, 0.7, 0.6], 0.5, [0, 2, 3]),  # 1 overlaps 0 (IoU 81/119); 3 is half of 0 (IoU 0.5: not above)
    ([0.9, 0.8, 0.7, 0.6], 0.49, [0, 2]),
    ([0.9, 0.8, 0.7, 0.6], 0.7, [0, 1, 2, 3]),
    ([0.6, 0.9, 0.7, 0.8], 0.5, [1, 3, 2]),  # 0 goes with 1; 3 overlaps 1 by 36/114 only
])
def test_nms(scores: list[float], iou: float, expected: list[int]) -> None:
    assert nms(BOXES, np.array(scores), iou).tolist() == expected


def test_nms_of_nothing_and_max_output() -> None:
    assert nms(np.zeros((0, 4)), np.zeros(0)).tolist() == []
    assert nms(BOXES, np.array([0.9, 0.1, 0.8, 0.2]), 0.99, max_output=2).tolist() == [0, 2]


def test_batched_nms_never_suppresses_across_classes() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    assert sorted(batched_nms(BOXES, scores, np.array([0, 1, 0, 0]), 0.45).tolist()) == [0, 1, 2]
    assert sorted(batched_nms(BOXES, scores, np.array([0, 0, 0, 0]), 0.45).tolist()) == [0, 2]


@pytest.mark.parametrize("fmt, box, expected", [
    (BoxFormat.XYXY, [1, 2, 3, 4], [1, 2, 3, 4]),
    (BoxFormat.CXCYWH, [10, 20, 4, 6], [8, 17, 12, 23]),
    (BoxFormat.YXYX, [1, 2, 3, 4], [2, 1, 4, 3]),
])
def test_to_xyxy(fmt: BoxFormat, box: list[float], expected: list[float]) -> None:
    assert to_xyxy(np.array([box]), fmt).tolist() == [expected]


# --- YOLO ---------------------------------------------------------------------------------
# A 640x480 frame letterboxed into a 320x320 input: scale 0.5, 40 px of padding top and bottom.
FRAME = np.zeros((480, 640, 3), np.uint8)
LETTERBOX = fit(FRAME, (320, 320), ResizeMode.LETTERBOX)[1]
STRETCH = fit(FRAME, (320, 320), ResizeMode.STRETCH)[1]

# Rows: cx, cy, w, h (input pixels), then 3 class scores. Known answer below.
ROWS = np.array([
    [100, 100, 40, 60, 0.10, 0.90, 0.00],  # class 1, 0.9: kept
    [102, 101, 40, 60, 0.05, 0.80, 0.10],  # class 1, 0.8, overlaps the first: suppressed
    [101, 100, 40, 60, 0.70, 0.00, 0.00],  # class 0 on the same spot: kept (class-wise NMS)
    [250, 200, 20, 20, 0.00, 0.00, 0.60],  # class 2: kept
    [50, 250, 10, 10, 0.20, 0.10, 0.00],  # below the threshold
    [160, 10, 20, 10, 0.00, 0.00, 0.50],  # wholly inside the top padding: clips to nothing
], np.float32)
EXPECTED_LETTERBOX = [  # (class, score, box in the 640x480 frame)
    (1, 0.9, [160, 60, 240, 180]),
    (0, 0.7, [162, 60, 242, 180]),
    (2, 0.6, [480, 300, 520, 340]),
]


def _v8(rows: np.ndarray) -> np.ndarray:
    return rows.T[None]  # [1, 4+C, N]


def _v5(rows: np.ndarray) -> np.ndarray:
    # [1, N, 5+C]: objectness 1.0 except for a row whose score is split across obj x class
    obj = np.ones((len(rows), 1), np.float32)
    out = np.concatenate([rows[:, :4], obj, rows[:, 4:]], axis=1)
    out[0, 4], out[0, 5:] = 0.5, out[0, 5:] * 2  # 0.5 * (0.9 * 2) = 0.9 again; class 1 still best
    return out[None]


@pytest.mark.parametrize("make, layout", [(_v8, YoloLayout.V8), (_v5, YoloLayout.V5)])
@pytest.mark.parametrize("normalized", [False, True])
def test_decode_yolo_known_answer(make, layout: YoloLayout, normalized: bool) -> None:
    rows = ROWS.copy()
    if normalized:
        rows[:, :4] /= 320.0
    out = make(rows)
    assert yolo_layout(out.shape, 3) is layout
    dets = decode_yolo(out, LETTERBOX, threshold=0.3, iou_threshold=0.5, labels=["a", "b", "c"])
    got = [(int(c), round(float(s), 3), [round(float(v), 2) for v in b])
           for c, s, b in zip(dets.class_ids, dets.scores, dets.xyxy)]
    assert got == [(c, s, [float(v) for v in b]) for c, s, b in EXPECTED_LETTERBOX]
    assert dets.labels == ("b", "a", "c")


def test_decode_yolo_stretch_maps_each_axis() -> None:
    dets = decode_yolo(_v8(ROWS[:1]), STRETCH, threshold=0.3)
    # x scale 320/640, y scale 320/480: cx 100 -> 200, cy 100 -> 150, w 40 -> 80, h 60 -> 90
    assert dets.xyxy.tolist() == [[160.0, 105.0, 240.0, 195.0]]


def test_decode_yolo_metadata_normalized_flag_wins_over_guessing() -> None:
    rows = ROWS[:1].copy()
    rows[:, :4] = [1.0, 1.0, 1.0, 1.0]  # a tiny box in pixels looks normalized
    as_pixels = decode_yolo(_v8(rows), STRETCH, threshold=0.3, normalized=False)
    assert as_pixels.xyxy.tolist() == [[1.0, 0.75, 3.0, 2.25]]
    guessed = decode_yolo(_v8(rows), STRETCH, threshold=0.3)
    assert guessed.xyxy.tolist() == [[320.0, 240.0, 640.0, 480.0]]  # 0.5..1.5 of the input, clipped


def test_decode_yolo_xyxy_box_format_and_empty_output() -> None:
    rows = ROWS[:1].copy()
    rows[0, :4] = [80, 70, 120, 130]
    dets = decode_yolo(_v8(rows), LETTERBOX, threshold=0.3, box_format=BoxFormat.XYXY)
    assert dets.xyxy.tolist() == [[160.0, 60.0, 240.0, 180.0]]
    none = decode_yolo(_v8(ROWS), LETTERBOX, threshold=0.95, layout=YoloLayout.V8)
    assert len(none) == 0 and none.xyxy.shape == (0, 4)


@pytest.mark.parametrize("shape, labels, expected", [
    ((1, 84, 8400), None, YoloLayout.V8),
    ((1, 25200, 85), None, YoloLayout.V5),
    ((1, 7, 6), 3, YoloLayout.V8),  # few boxes: the label count decides
    ((1, 6, 8), 3, YoloLayout.V5),
    ((84, 8400), None, YoloLayout.V8),
])
def test_yolo_layout(shape: tuple[int, ...], labels: int | None, expected: YoloLayout) -> None:
    assert yolo_layout(shape, labels) is expected


@pytest.mark.parametrize("shape", [(1, 4, 5), (2, 84, 8400), (84,), (1, 2, 3, 4)])
def test_yolo_layout_rejects(shape: tuple[int, ...]) -> None:
    with pytest.raises(ModelError, match=r"\[1, 4\+C, N\]"):
        yolo_layout(shape)


# --- SSD and classification ---------------------------------------------------------------
def test_decode_ssd_known_answer() -> None:
    boxes = np.array([[[0.25, 0.5, 0.75, 1.0], [0.0, 0.0, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2]]], np.float32)
    classes = np.array([[0.0, 17.0, 3.0]], np.float32)
    scores = np.array([[0.9, 0.3, 0.95]], np.float32)
    count = np.array([2.0], np.float32)  # the third row is padding beyond count
    dets = decode_ssd(boxes, classes, scores, count, LETTERBOX, labels=["person"], threshold=0.25)
    assert [(d.id, d.label) for d in dets] == [(0, "person"), (17, "17")]
    # normalized to the 320x320 letterboxed input: y 0.25 -> 80 px -> (80 - 40) / 0.5 = 80 in the frame
    assert dets.xyxy.tolist() == [[320.0, 80.0, 640.0, 400.0], [0.0, 0.0, 320.0, 240.0]]


@pytest.mark.parametrize("scores, k, threshold, expected", [
    ([0.1, 0.5, 0.2, 0.5], 2, 0.0, [(1, 0.5), (3, 0.5)]),  # ties: lower id first
    ([0.1, 0.5, 0.2, 0.5], 10, 0.15, [(1, 0.5), (3, 0.5), (2, 0.2)]),
    ([3.0, -1.0, 7.5], 1, 0.0, [(2, 7.5)]),  # logits are reported as they are
])
def test_decode_classes(scores: list[float], k: int, threshold: float, expected: list[tuple[int, float]]) -> None:
    got = decode_classes(np.array([scores], np.float32), top_k=k, threshold=threshold)
    assert [(c.id, round(c.score, 3)) for c in got] == expected


def _reference_top_k(s: np.ndarray, k: int) -> list[int]:
    return sorted(range(s.size), key=lambda i: (-float(s[i]), i))[:k]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 5, 10])
def test_top_k_ties_are_lower_id_first_whatever_the_order_numpy_partitions_in(seed: int, k: int) -> None:
    """A uint8 classifier (1001 classes, scale 1/256) gives hundreds of equal scores. argpartition
    alone kept different tied ids on x86/numpy 2.4 ([89, 984, 985, ...]) and on ARM or numpy 1.24
    ([89, 666, 668, ...]); the answer is the stable order of (-score, id)."""
    rng = np.random.default_rng(seed)
    q = rng.choice([0, 1, 2, 3], size=1001, p=[0.5, 0.3, 0.15, 0.05]).astype(np.uint8)
    q[89] = 200
    scores = (q.astype(np.int32) * np.float32(1 / 256)).astype(np.float32)
    got = decode_classes(scores, top_k=k)
    assert got.class_ids.tolist() == _reference_top_k(scores.astype(np.float32), k)


def test_top_k_ties_at_the_cut_from_the_issue() -> None:
    scores = np.zeros(1001, np.float32)
    scores[89] = 0.78125
    scores[[666, 668, 984, 985, 990]] = 0.00390625  # five tied for the last four places
    assert decode_classes(scores, top_k=5).class_ids.tolist() == [89, 666, 668, 984, 985]


# --- picking the decoder --------------------------------------------------------------------
def _specs(*shapes: tuple[int, ...], names: tuple[str, ...] | None = None) -> list[TensorSpec]:
    names = names or tuple(f"out{i}" for i in range(len(shapes)))
    return [TensorSpec(n, i, s, np.dtype(np.float32)) for i, (n, s) in enumerate(zip(names, shapes))]


SSD_NAMES = ("TFLite_Detection_PostProcess", "TFLite_Detection_PostProcess:1",
             "TFLite_Detection_PostProcess:2", "TFLite_Detection_PostProcess:3")


@pytest.mark.parametrize("specs, meta, expected", [
    (_specs((1, 10, 4), (1, 10), (1, 10), (1,)), None, OutputFormat.SSD),
    (_specs((1, 84, 8400)), None, OutputFormat.YOLO),
    (_specs((1, 1001)), None, OutputFormat.CLASSES),
    (_specs((1, 1001)), {"output_format": "yolo"}, OutputFormat.YOLO),
    (_specs((1, 25200, 85)), {"output_format": "YOLO"}, OutputFormat.YOLO),
])
def test_detect_format(specs: list[TensorSpec], meta: dict | None, expected: OutputFormat) -> None:
    assert detect_format(specs, meta) is expected


@pytest.mark.parametrize("specs, meta, fragment", [
    (_specs((1, 10, 4), (1, 10)), None, "cannot tell how to read"),
    (_specs((1, 1001)), {"output_format": "centernet"}, "output_format 'centernet'"),
    (_specs((1, 1001)), {"output_format": "ssd"}, r"an SSD model has 4 outputs.*\[\[1, 1001\]\]"),
    (_specs((1, 10, 4), (1, 10)), {"output_format": "yolo"}, "a yolo model has one output"),
])
def test_wrong_outputs_for_the_format(specs: list[TensorSpec], meta: dict | None, fragment: str) -> None:
    with pytest.raises(ModelError, match=fragment):
        make_decoder(specs, meta)


def test_ssd_outputs_are_matched_by_name_or_by_value() -> None:
    shuffled = [SSD_NAMES[2], SSD_NAMES[0], SSD_NAMES[3], SSD_NAMES[1]]  # scores, boxes, count, classes
    specs = _specs((1, 3), (1, 3, 4), (1,), (1, 3), names=tuple(shuffled))
    dec = make_decoder(specs, None, threshold=0.5)
    assert dec.ssd_order == (1, 3, 0, 2)
    outputs = [np.array([[0.9, 0.2, 0.1]]), np.array([[[0, 0, 1, 1]] * 3], np.float32), np.array([3.0]),
               np.array([[5.0, 1.0, 2.0]])]
    by_name = dec(outputs, Transform((100, 50), (10, 10), 0.1, 0.2))
    by_value = make_decoder(_specs((1, 3), (1, 3, 4), (1,), (1, 3)), None, threshold=0.5)(
        outputs, Transform((100, 50), (10, 10), 0.1, 0.2))
    for dets in (by_name, by_value):
        assert dets.class_ids.tolist() == [5] and dets.xyxy.tolist() == [[0.0, 0.0, 100.0, 50.0]]


def test_make_decoder_reads_the_metadata() -> None:
    meta = {"output_format": "yolo", "detection": {"box_format": "xyxy", "normalized": True, "iou_threshold": 0.6}}
    dec = make_decoder(_specs((1, 7, 50)), meta, labels=["a", "b", "c"], threshold=0.4)
    assert dec.yolo is not None and not dec.yolo.split
    assert (dec.format, dec.box_format, dec.normalized, dec.iou_threshold, dec.yolo.layout) == (
        OutputFormat.YOLO, BoxFormat.XYXY, True, 0.6, YoloLayout.V8)
    with pytest.raises(ModelError, match="box_format 'ltwh'"):
        make_decoder(_specs((1, 7, 50)), {"output_format": "yolo", "detection": {"box_format": "ltwh"}})
    with pytest.raises(InputError, match="threshold must be between 0 and 1"):
        make_decoder(_specs((1, 7, 50)), None, threshold=1.5)


# --- results ------------------------------------------------------------------------------
def _dets() -> Detections:
    return Detections(np.array([[0, 0, 10, 10], [5, 5, 20, 30]]), np.array([0.9, 0.4]), np.array([0, 2]),
                      ("person", "car"))


def test_detections_behave_like_a_sequence() -> None:
    d = _dets()
    assert len(d) == 2 and d.boxes is d.xyxy and d.xyxy.dtype == np.float32
    assert list(d)[1] == Detection(2, "car", pytest.approx(0.4), (5.0, 5.0, 20.0, 30.0))
    assert d[0].label == "person" and len(d[1:]) == 1 and len(d[np.array([False, True])]) == 1
    assert [x.label for x in d.filter(threshold=0.5)] == ["person"]
    assert [x.label for x in d.filter(classes=["car"])] == ["car"]
    assert [x.label for x in d.filter(classes=[0])] == ["person"]
    assert d.to_list()[0] == {"id": 0, "label": "person", "score": 0.9, "box": [0.0, 0.0, 10.0, 10.0]}


@pytest.mark.parametrize("xyxy, scores, ids, labels", [
    (np.zeros((2, 4)), np.zeros(3), np.zeros(2), ()),
    (np.zeros((2, 5)), np.zeros(2), np.zeros(2), ()),
    (np.zeros((2, 4)), np.zeros(2), np.zeros(2), ("one",)),
])
def test_detections_validate_their_shapes(xyxy, scores, ids, labels) -> None:
    with pytest.raises(InputError, match="Detections expects"):
        Detections(xyxy, scores, ids, labels)


def test_classes_and_empty_detections() -> None:
    c = Classes(np.array([3, 1]), np.array([0.7, 0.2]), ("cat", "dog"))
    assert c.top.label == "cat" and [x.id for x in c] == [3, 1]
    assert len(Detections.empty()) == 0 and Detections.empty().to_list() == []


def test_draw_marks_the_box_and_leaves_the_input_alone() -> None:
    frame = np.zeros((60, 80, 3), np.uint8)
    dets = Detections(np.array([[20, 25, 60, 55]]), np.array([0.9]), np.array([0]), ("person",))
    out = draw(frame, dets)
    assert frame.max() == 0  # a copy by default
    assert out[40, 20].any() and out[40, 59].any()  # left and right edges drawn
    assert not out[40, 40].any()  # the inside is untouched
    with pytest.raises(InputError, match="RGB uint8"):
        draw(np.zeros((60, 80), np.uint8), dets)


def test_draw_on_bgr_gives_the_same_picture_as_on_rgb() -> None:
    import cv2

    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (90, 120, 3), dtype=np.uint8)
    dets = Detections(np.array([[10, 20, 70, 80], [30, 5, 110, 60]]), np.array([0.9, 0.6]), np.array([0, 5]),
                      ("person", "bus"))
    on_rgb = draw(rgb, dets)
    on_bgr = draw(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), dets, bgr=True)
    assert np.array_equal(cv2.cvtColor(on_bgr, cv2.COLOR_BGR2RGB), on_rgb)
