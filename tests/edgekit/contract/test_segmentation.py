"""Segmentation decoding against a direct implementation: crop the letterbox off the arg-max map,
resize it to the frame with OpenCV's nearest neighbour, compare pixel by pixel."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from edgekit.contract.segmentation import (
    SegmentationLayout,
    SegmentationMask,
    class_map_of,
    decode_segmentation,
    resize_to_source,
    segmentation_layout,
)
from edgekit.errors import InputError, ModelError
from edgekit.preprocess import ResizeMode, Transform, fit

FRAME = (480, 640)  # H, W


def _transform(frame_hw: tuple[int, int], input_wh: tuple[int, int], mode: ResizeMode) -> Transform:
    return fit(np.zeros((*frame_hw, 3), np.uint8), input_wh, mode)[1]


def _smooth_scores(h: int, w: int, classes: int, seed: int) -> np.ndarray:
    """[1, h, w, C] logits whose arg-max forms blobs, as a segmenter's do (not per-pixel noise)."""
    rng = np.random.default_rng(seed)
    coarse = rng.normal(size=(max(3, h // 12), max(3, w // 12), classes)).astype(np.float32)
    return cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC)[None]


def _reference(class_map: np.ndarray, tf: Transform) -> np.ndarray:
    """The map's content (letterbox padding cut off, in map cells) resized to the frame by OpenCV."""
    gh, gw = class_map.shape
    dw, dh = tf.dst_size
    w, h = tf.src_size
    x0, y0 = tf.pad_x * gw / dw, tf.pad_y * gh / dh
    x1, y1 = (tf.pad_x + w * tf.scale_x) * gw / dw, (tf.pad_y + h * tf.scale_y) * gh / dh
    content = class_map[int(round(y0)):int(round(y1)), int(round(x0)):int(round(x1))]
    return cv2.resize(content.astype(np.uint8), (w, h), interpolation=cv2.INTER_NEAREST_EXACT)


@pytest.mark.parametrize("mode", [ResizeMode.LETTERBOX, ResizeMode.STRETCH])
@pytest.mark.parametrize("out_hw,input_wh,classes", [
    ((257, 257), (257, 257), 21),   # DeepLab v3 (MobileNetV2), output at the input's size
    ((64, 64), (256, 256), 6),      # an output a quarter of the input
    ((48, 80), (320, 192), 3),      # not square
])
def test_scores_match_opencv_nearest_resize(mode, out_hw, input_wh, classes):
    tf = _transform(FRAME, input_wh, mode)
    scores = _smooth_scores(*out_hw, classes, seed=out_hw[0])
    mask = decode_segmentation(scores, tf)
    ref = _reference(scores[0].argmax(-1), tf)
    assert mask.class_map.shape == FRAME
    assert (mask.class_map == ref).mean() >= 0.99


def test_int64_argmax_map_like_deeplab():
    tf = _transform((900, 1352), (513, 513), ResizeMode.LETTERBOX)
    cmap = _smooth_scores(513, 513, 21, seed=3)[0].argmax(-1).astype(np.int64)[None]
    assert segmentation_layout(cmap.shape, cmap.dtype) is SegmentationLayout.CLASS_MAP
    mask = decode_segmentation(cmap, tf, labels=[f"c{i}" for i in range(21)])
    assert (mask.class_map == _reference(cmap[0], tf)).mean() >= 0.99
    areas = mask.areas()
    assert areas.sum() == 900 * 1352 and len(areas) == 21
    assert [c.area for c in mask.classes()] == sorted(areas[areas > 0].tolist(), reverse=True)


def test_identity_transform_keeps_the_map_exactly():
    cmap = np.random.default_rng(0).integers(0, 4, (1, 40, 30)).astype(np.int32)
    tf = Transform((30, 40), (30, 40), 1.0, 1.0)
    assert np.array_equal(decode_segmentation(cmap, tf).class_map, cmap[0])


def test_areas_and_fractions():
    m = np.zeros((10, 20), np.int32)
    m[2:4, 5:10] = 2  # 10 px
    mask = SegmentationMask(m, ("background", "oil", "scratch"))
    assert [(c.label, c.area) for c in mask.classes()] == [("background", 190), ("scratch", 10)]
    assert mask.to_list()[1] == {"id": 2, "label": "scratch", "area": 10, "fraction": 0.05}
    assert mask.mask(2).sum() == 10 and mask.label(7) == "7"


def test_foreground_probabilities_and_logits_agree():
    p = np.linspace(0.01, 0.99, 32 * 32, dtype=np.float32).reshape(1, 32, 32, 1)
    logits = np.log(p / (1 - p))
    a = class_map_of(p, SegmentationLayout.FOREGROUND, threshold=0.7)
    b = class_map_of(logits, SegmentationLayout.FOREGROUND, threshold=0.7)
    assert a.sum() == (p >= 0.7).sum()
    assert np.abs(a.astype(int) - b).sum() <= 1  # float rounding at the threshold itself


@pytest.mark.parametrize("shape,dtype,quantized,expected", [
    ((1, 513, 513), np.int64, False, SegmentationLayout.CLASS_MAP),
    ((1, 257, 257, 1), np.int32, False, SegmentationLayout.CLASS_MAP),
    ((1, 257, 257, 21), np.float32, False, SegmentationLayout.SCORES),
    ((1, 257, 257, 21), np.uint8, True, SegmentationLayout.SCORES),
    ((1, 256, 256, 1), np.float32, False, SegmentationLayout.FOREGROUND),
    ((1, 256, 256, 1), np.uint8, True, SegmentationLayout.FOREGROUND),
    ((1, 84, 8400), np.float32, False, None),  # YOLO
    ((1, 1, 17, 3), np.float32, False, None),  # MoveNet
    ((1, 1001), np.uint8, True, None),  # a classifier
    ((1, 896, 16), np.float32, False, None),  # MediaPipe face boxes
    ((1, 257, 257, 21), np.uint8, False, None),  # integers that are not quantized are no scores
])
def test_layout_table(shape, dtype, quantized, expected):
    assert segmentation_layout(shape, dtype, quantized) is expected


def test_bad_outputs_are_refused_with_the_shape():
    tf = Transform((10, 10), (10, 10), 1.0, 1.0)
    with pytest.raises(ModelError, match=r"\[1, 84, 8400\]"):
        decode_segmentation(np.zeros((1, 84, 8400), np.float32), tf)
    with pytest.raises(ModelError, match="negative|>= 0"):
        decode_segmentation(np.full((1, 10, 10), -1, np.int32), tf)
    with pytest.raises(ModelError, match="fractions"):
        class_map_of(np.full((1, 10, 10), 0.5, np.float32), SegmentationLayout.CLASS_MAP)
    with pytest.raises(InputError, match="2-D"):
        resize_to_source(np.zeros(5), tf)
    with pytest.raises(InputError, match="2-D integer"):
        SegmentationMask(np.zeros((3, 3), np.float32))


def test_contract_modules_import_numpy_only():
    """The contract runs on the device beside the interpreter: no OpenCV, no TensorFlow, no loop."""
    code = ("import sys, edgekit.contract.segmentation, edgekit.contract.keypoints, edgekit.contract.anchors, "
            "edgekit.contract.readings; print(sorted(m for m in ('cv2', 'tensorflow', 'edgekit.loop', "
            "'edgekit.video', 'edgekit.sources') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[3])
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
