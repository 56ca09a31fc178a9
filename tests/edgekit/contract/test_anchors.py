"""Anchor generation and decoding against MediaPipe: its golden anchors (spot values from
mediapipe/calculators/tflite/testdata/anchor_golden_file_{0,1}.txt) and a reference decode
transcribed loop by loop from ssd_anchors_calculator.cc, tensors_to_detections_calculator.cc and
non_max_suppression_calculator.cc (WEIGHTED / DEFAULT, INTERSECTION_OVER_UNION)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from edgekit.contract.anchors import (
    ANCHOR_PRESETS,
    AnchorDecodeOptions,
    AnchorSpec,
    BoxCoding,
    NmsAlgorithm,
    SsdAnchorOptions,
    decode_anchors,
    generate_anchors,
)
from edgekit.errors import InputError, ModelError
from edgekit.preprocess import ResizeMode, Transform, fit

# --- reference, written from MediaPipe's C++ (loops kept as they are there) ----------------------


def _ref_scale(lo: float, hi: float, i: int, n: int) -> float:
    return (lo + hi) * 0.5 if n == 1 else lo + (hi - lo) * 1.0 * i / (n - 1.0)


def ref_anchors(o: SsdAnchorOptions) -> list[tuple[float, float, float, float]]:
    anchors = []
    layer_id = 0
    while layer_id < o.num_layers:
        heights, widths, ratios, scales = [], [], [], []
        last = layer_id
        while last < len(o.strides) and o.strides[last] == o.strides[layer_id]:
            scale = _ref_scale(o.min_scale, o.max_scale, last, len(o.strides))
            if last == 0 and o.reduce_boxes_in_lowest_layer:
                ratios += [1.0, 2.0, 0.5]
                scales += [0.1, scale, scale]
            else:
                for r in o.aspect_ratios:
                    ratios.append(r)
                    scales.append(scale)
                if o.interpolated_scale_aspect_ratio > 0.0:
                    nxt = 1.0 if last == len(o.strides) - 1 else _ref_scale(o.min_scale, o.max_scale, last + 1,
                                                                            len(o.strides))
                    scales.append(math.sqrt(scale * nxt))
                    ratios.append(o.interpolated_scale_aspect_ratio)
            last += 1
        for s, r in zip(scales, ratios):
            heights.append(s / math.sqrt(r))
            widths.append(s * math.sqrt(r))
        fh = math.ceil(o.input_size_height / o.strides[layer_id])
        fw = math.ceil(o.input_size_width / o.strides[layer_id])
        for y in range(fh):
            for x in range(fw):
                for a in range(len(heights)):
                    xc, yc = (x + o.anchor_offset_x) / fw, (y + o.anchor_offset_y) / fh
                    w, h = (1.0, 1.0) if o.fixed_anchor_size else (widths[a], heights[a])
                    anchors.append((xc, yc, w, h))
        layer_id = last
    return anchors


def ref_decode(raw_boxes, raw_scores, spec: AnchorSpec):
    """Per box: TensorsToDetections (CPU path), then NonMaxSuppression; boxes normalized x1, y1, x2, y2."""
    o = spec.decode
    anchors = ref_anchors(spec.anchors)
    dets = []
    for i, (ax, ay, aw, ah) in enumerate(anchors):
        r = raw_boxes[0, i]
        off = o.box_coord_offset
        if o.box_coding is BoxCoding.YXHW:
            y, x, h, w = r[off:off + 4]
        elif o.box_coding is BoxCoding.XYWH:
            x, y, w, h = r[off:off + 4]
        else:
            x, y = (-r[off] + r[off + 2]) / 2, (-r[off + 1] + r[off + 3]) / 2
            w, h = r[off + 2] + r[off], r[off + 3] + r[off + 1]
        xc = x / o.x_scale * aw + ax
        yc = y / o.y_scale * ah + ay
        if o.apply_exponential_on_box_size:
            h, w = math.exp(h / o.h_scale) * ah, math.exp(w / o.w_scale) * aw
        else:
            h, w = h / o.h_scale * ah, w / o.w_scale * aw
        kps = []
        for k in range(o.num_keypoints):
            ko = o.keypoint_coord_offset + k * o.num_values_per_keypoint
            ky, kx = (r[ko], r[ko + 1]) if o.box_coding is BoxCoding.YXHW else (r[ko + 1], r[ko])
            kps.append((kx / o.x_scale * aw + ax, ky / o.y_scale * ah + ay))
        best, cls = -np.inf, -1
        for c, score in enumerate(raw_scores[0, i]):
            if o.sigmoid_score:
                if o.score_clipping_thresh is not None:
                    score = min(max(score, -o.score_clipping_thresh), o.score_clipping_thresh)
                score = 1.0 / (1.0 + math.exp(-score))
            if best < score:
                best, cls = score, c
        if best >= o.min_score_thresh and w >= 0 and h >= 0:
            dets.append(((xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2), best, cls, kps))
    return _ref_nms(dets, o)


def _ref_iou(a, b):
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _ref_nms(dets, o: AnchorDecodeOptions):
    out = []
    for cls in sorted({d[2] for d in dets}):
        remained = sorted([d for d in dets if d[2] == cls], key=lambda d: -d[1])
        while remained and len(out) < o.max_results:
            top = remained[0]
            candidates = [d for d in remained if _ref_iou(d[0], top[0]) > o.iou_threshold]
            rest = [d for d in remained if _ref_iou(d[0], top[0]) <= o.iou_threshold]
            box, kps = top[0], top[3]
            if o.nms is NmsAlgorithm.WEIGHTED and candidates:
                total = sum(d[1] for d in candidates)
                box = tuple(sum(d[0][j] * d[1] for d in candidates) / total for j in range(4))
                kps = [tuple(sum(d[3][k][j] * d[1] for d in candidates) / total for j in range(2))
                       for k in range(len(top[3]))]
            out.append((box, top[1], cls, kps))
            remained = rest
    return out


# --- synthetic raw outputs: a few objects, every anchor inside one votes for it --------------------


def encode(spec: AnchorSpec, objects, seed: int = 0):
    """Raw [1, N, coords] and [1, N, C] outputs whose decode gives ``objects`` (x1, y1, x2, y2, class)
    jittered per anchor, with keypoints at the box corners and centre."""
    o, anchors = spec.decode, np.asarray(ref_anchors(spec.anchors), np.float64)
    rng = np.random.default_rng(seed)
    n, classes = len(anchors), 1 + max(c for *_, c in objects)
    boxes = rng.normal(0, 1, (1, n, o.num_coords)).astype(np.float32)
    scores = np.full((1, n, classes), -6.0, np.float32) + rng.normal(0, 0.5, (1, n, classes)).astype(np.float32)
    for x1, y1, x2, y2, c in objects:
        inside = np.flatnonzero((anchors[:, 0] > x1) & (anchors[:, 0] < x2) & (anchors[:, 1] > y1)
                                & (anchors[:, 1] < y2))
        for i in inside:
            ax, ay, aw, ah = anchors[i]
            j = rng.normal(0, 0.004, 4)
            bx1, by1, bx2, by2 = x1 + j[0], y1 + j[1], x2 + j[2], y2 + j[3]
            xc, yc, w, h = (bx1 + bx2) / 2, (by1 + by2) / 2, bx2 - bx1, by2 - by1
            rx, ry = (xc - ax) * o.x_scale / aw, (yc - ay) * o.y_scale / ah
            rw, rh = ((np.log(w / aw) * o.w_scale, np.log(h / ah) * o.h_scale) if o.apply_exponential_on_box_size
                      else (w * o.w_scale / aw, h * o.h_scale / ah))
            off = o.box_coord_offset
            if o.box_coding is BoxCoding.YXHW:
                boxes[0, i, off:off + 4] = ry, rx, rh, rw
            elif o.box_coding is BoxCoding.XYWH:
                boxes[0, i, off:off + 4] = rx, ry, rw, rh
            else:  # xmin, ymin, xmax, ymax as offsets that decode to the same centre and size
                boxes[0, i, off:off + 4] = (rw - rx * 2) / 2, (rh - ry * 2) / 2, (rw + rx * 2) / 2, (rh + ry * 2) / 2
            pts = [(xc, yc), (bx1, by1), (bx2, by2)] * o.num_keypoints
            for k in range(o.num_keypoints):
                kx, ky = (pts[k][0] - ax) * o.x_scale / aw, (pts[k][1] - ay) * o.y_scale / ah
                ko = o.keypoint_coord_offset + k * o.num_values_per_keypoint
                boxes[0, i, ko:ko + 2] = (ky, kx) if o.box_coding is BoxCoding.YXHW else (kx, ky)
            scores[0, i, c] = rng.uniform(1.0, 4.0)
    return boxes, scores


def _iou(a, b) -> float:
    return _ref_iou(tuple(a), tuple(b))


FACES = [(0.1, 0.15, 0.4, 0.5, 0), (0.55, 0.5, 0.9, 0.95, 0), (0.42, 0.05, 0.58, 0.25, 0)]


def _variants():
    face = ANCHOR_PRESETS["face-short-range"]
    yield "face-short-range", face, FACES
    yield "palm", ANCHOR_PRESETS["palm"], FACES[:2]
    yield "plain-nms", dataclasses.replace(face, decode=dataclasses.replace(face.decode, nms=NmsAlgorithm.PLAIN)), FACES
    ssd = AnchorSpec(SsdAnchorOptions(160, 96, 0.2, 0.9, 3, strides=(8, 16, 32), aspect_ratios=(1.0, 2.0, 0.5)),
                     AnchorDecodeOptions(10.0, 10.0, 5.0, 5.0, BoxCoding.YXHW, apply_exponential_on_box_size=True,
                                         min_score_thresh=0.6, iou_threshold=0.45, nms=NmsAlgorithm.PLAIN))
    yield "ssd-yxhw-exp-2-classes", ssd, [(0.1, 0.1, 0.45, 0.6, 0), (0.5, 0.4, 0.95, 0.9, 1)]
    xyxy = AnchorSpec(face.anchors, dataclasses.replace(face.decode, box_coding=BoxCoding.XYXY, num_keypoints=2))
    yield "xyxy", xyxy, FACES[:1]


@pytest.mark.parametrize("name,spec,objects", list(_variants()), ids=[v[0] for v in _variants()])
def test_decode_matches_reference(name, spec, objects):
    boxes, scores = encode(spec, objects, seed=len(name))
    identity = Transform((1000, 1000), (1000, 1000), 1.0, 1.0)
    ours = decode_anchors(boxes, scores, spec, identity)
    ref = ref_decode(boxes, scores, spec)
    assert len(ours.scores) == len(ref) == len(objects)
    ref.sort(key=lambda d: -d[1])
    for i, (box, score, cls, kps) in enumerate(ref):
        assert _iou(ours.xyxy[i] / 1000, box) >= 0.99
        assert ours.scores[i] == pytest.approx(score, abs=1e-5) and ours.class_ids[i] == cls
        assert np.allclose(ours.keypoints[i] / 1000, np.asarray(kps).reshape(-1, 2), atol=2e-3)
    for x1, y1, x2, y2, _ in objects:  # and each object was found where it was put
        assert max(_iou(b / 1000, (x1, y1, x2, y2)) for b in ours.xyxy) >= 0.9


def test_boxes_come_back_through_the_letterbox():
    spec = ANCHOR_PRESETS["face-short-range"]
    frame_h, frame_w = 480, 640
    tf = fit(np.zeros((frame_h, frame_w, 3), np.uint8), (128, 128), ResizeMode.LETTERBOX)[1]
    boxes, scores = encode(spec, FACES[:1], seed=3)
    ours = decode_anchors(boxes, scores, spec, tf)
    (x1, y1, x2, y2), *_ = ref_decode(boxes, scores, spec)[0]
    side, pad = frame_w, (frame_w - frame_h) / 2  # the frame padded to a centred square
    expected = (x1 * side, y1 * side - pad, x2 * side, y2 * side - pad)
    assert np.allclose(ours.xyxy[0], expected, atol=1.0)


@pytest.mark.parametrize("preset,count,coords", [("face-short-range", 896, 16), ("face-full-range", 2304, 16),
                                                 ("palm", 2016, 18)])
def test_preset_anchor_counts_are_the_documented_num_boxes(preset, count, coords):
    spec = ANCHOR_PRESETS[preset]
    assert spec.anchor_boxes.shape == (count, 4) and spec.decode.num_coords == coords
    assert np.allclose(spec.anchor_boxes, np.asarray(ref_anchors(spec.anchors)), atol=1e-6)


GOLDEN = [  # (options, count, {row: (x_center, y_center, w, h)}) from MediaPipe's golden files 0 and 1
    (SsdAnchorOptions(256, 256, 0.1171875, 0.75, 5, strides=(8, 16, 32, 32, 32), fixed_anchor_size=True), 2944,
     {0: (0.015625, 0.015625, 1, 1), 2: (0.046875, 0.015625, 1, 1), 1472: (0.015625, 0.734375, 1, 1),
      2943: (0.9375, 0.9375, 1, 1)}),
    (SsdAnchorOptions(300, 300, 0.2, 0.95, 6, strides=(16, 32, 64, 128, 256, 512),
                      aspect_ratios=(1.0, 2.0, 0.5, 3.0, 0.3333), reduce_boxes_in_lowest_layer=True), 1917,
     {0: (0.0263158, 0.0263158, 0.1, 0.1), 1: (0.0263158, 0.0263158, 0.282843, 0.141421),
      958: (0.81579, 0.868421, 0.282843, 0.141421), 1916: (0.5, 0.5, 0.974679, 0.974679)}),
]


@pytest.mark.parametrize("options,count,rows", GOLDEN)
def test_anchors_match_mediapipe_golden_files(options, count, rows):
    a = generate_anchors(options)
    assert a.shape == (count, 4)
    for i, expected in rows.items():
        assert np.allclose(a[i], expected, atol=1e-5)


def test_metadata_round_trip_and_errors():
    spec = ANCHOR_PRESETS["palm"]
    doc = spec.to_metadata()
    assert doc["decode"]["box_coding"] == "xywh" and doc["ssd"]["strides"] == [8, 16, 16, 16]
    back = AnchorSpec.from_metadata({"anchors": doc})
    assert back == spec and np.array_equal(back.anchor_boxes, spec.anchor_boxes)
    assert AnchorSpec.from_metadata({"labels": ["a"]}) is None
    bad = {"ssd": dict(doc["ssd"], stride=[8]), "decode": doc["decode"]}
    with pytest.raises(ModelError, match="unknown SsdAnchorOptions field.*stride"):
        AnchorSpec.from_metadata({"anchors": bad})
    with pytest.raises(ModelError, match="num_layers|stride"):
        AnchorSpec.from_dict({"ssd": dict(doc["ssd"], num_layers=3), "decode": doc["decode"]})
    with pytest.raises(InputError, match="box coding .cxcy."):
        AnchorDecodeOptions(1, 1, 1, 1, box_coding="cxcy")


def test_outputs_that_do_not_fit_the_anchors_are_refused():
    spec = ANCHOR_PRESETS["face-short-range"]
    tf = Transform((128, 128), (128, 128), 1.0, 1.0)
    with pytest.raises(ModelError, match=r"896 anchors.*\[1, 2016, 18\]"):
        decode_anchors(np.zeros((1, 2016, 18)), np.zeros((1, 2016, 1)), spec, tf)


def test_nothing_above_threshold_is_an_empty_answer():
    spec = ANCHOR_PRESETS["face-short-range"]
    out = decode_anchors(np.zeros((1, 896, 16)), np.full((1, 896, 1), -10.0), spec,
                         Transform((128, 128), (128, 128), 1.0, 1.0))
    assert out.xyxy.shape == (0, 4) and out.keypoints.shape == (0, 6, 2)


@pytest.mark.slow
def test_a_real_tflite_face_model_on_a_real_photo_matches_the_reference(vision_models, shared_images):
    """The test-built [1, 896, 16] + [1, 896, 1] model run on a photo: every decoded box within IoU 0.99 of
    MediaPipe's calculators transcribed (boxes compared in the input's normalized coordinates)."""
    from edgekit import load_image, load_model
    from edgekit.preprocess import to_input

    image = load_image(shared_images / "grace_hopper.png")
    with load_model(vision_models.face, isolate=False) as m:
        resized, _ = fit(image, (128, 128), ResizeMode.LETTERBOX)
        m.input_view(0)[...] = to_input(resized, m.inputs[0])
        m.invoke()
        boxes, scores = m.output(0), m.output(1)
    spec = ANCHOR_PRESETS["face-short-range"]
    # A 10000-pixel square "frame" that is the input itself: boxes come back normalized x 10000 (clipped).
    ours = decode_anchors(boxes, scores, spec, Transform((10_000, 10_000), (10_000, 10_000), 1.0, 1.0))
    ref = sorted(ref_decode(boxes, scores, spec), key=lambda d: -d[1])
    assert len(ours.scores) == len(ref) > 0
    for got, (box, score, _, _) in zip(ours.xyxy / 10_000, ref):
        clipped = tuple(min(max(v, 0.0), 1.0) for v in box)
        assert _iou(got, clipped) >= 0.99 or (clipped[2] <= clipped[0] or clipped[3] <= clipped[1])
