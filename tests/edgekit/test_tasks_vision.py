"""Segmenter and PoseEstimator end to end: small real .tflite files with public models' output
signatures, run on a real photo, against direct implementations of what their documentation says."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from edgekit import Detector, DetectorOptions, PoseEstimator, Segmenter, SegmenterOptions, load_image, load_model
from edgekit.contract.anchors import ANCHOR_PRESETS, decode_anchors
from edgekit.errors import InputError, ModelError
from edgekit.contract.preprocessing import preprocessing_for
from edgekit.preprocess import ResizeMode, fit, to_input
from edgekit.segment import Segmentation

pytestmark = pytest.mark.slow  # the models are built with TensorFlow once per session (~10 s)

LABELS = ["background", "red", "green"]


@pytest.fixture(scope="module")
def parrot(shared_images: Path) -> np.ndarray:
    return load_image(shared_images / "parrot.jpg")


def _raw(path: Path, image: np.ndarray, size: int) -> tuple[list[np.ndarray], object]:
    """The model run by hand on the letterboxed image, fed as its family's preset says (a [1, 1, 17, 3]
    model is MoveNet's, 0..255 padded black; [1, 896, 16] + [1, 896, 1] MediaPipe's face detector's):
    its outputs (dequantized) and the transform."""
    with load_model(path, isolate=False) as m:
        pre = preprocessing_for(m, resize=ResizeMode.LETTERBOX)
        resized, tf = fit(image, (size, size), ResizeMode.LETTERBOX, pad_value=pre.pad_value,
                          interpolation=pre.interpolation)
        m.input_view(0)[...] = to_input(resized, m.inputs[0], pre.normalization)
        m.invoke()
        return [m.output(i) for i in range(len(m.outputs))], tf


def _reference_mask(class_map: np.ndarray, tf) -> np.ndarray:
    """The arg-max map taken back through the letterbox by OpenCV: an affine warp (pixel centres,
    nearest cell) from the frame's pixels into the map's cells."""
    gh, gw = class_map.shape
    (dw, dh), (w, h) = tf.dst_size, tf.src_size
    m = np.float64([[tf.scale_x * gw / dw, 0, (0.5 * tf.scale_x + tf.pad_x) * gw / dw - 0.5],
                    [0, tf.scale_y * gh / dh, (0.5 * tf.scale_y + tf.pad_y) * gh / dh - 0.5]])
    return cv2.warpAffine(class_map.astype(np.uint8), m, (w, h), flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_REPLICATE)


@pytest.mark.parametrize("field", ["seg_scores", "seg_scores_int8", "seg_argmax"])
def test_masks_agree_with_the_raw_arg_max(vision_models, parrot, field):
    outputs, tf = _raw(getattr(vision_models, field), parrot, 128)
    raw = outputs[0][0]
    cmap = raw if raw.ndim == 2 else raw.argmax(-1)
    with Segmenter.create_from_model_path(getattr(vision_models, field), labels=LABELS) as seg:
        got = seg.segment(parrot)
    assert isinstance(got, Segmentation) and got.mask.class_map.shape == parrot.shape[:2]
    agreement = (got.mask.class_map == _reference_mask(cmap, tf)).mean()
    assert agreement >= 0.99
    classes = {c.label: c for c in got.mask.classes()}
    assert classes["red"].fraction > 0.1  # a red macaw: its body is segmented, not noise
    assert sum(c.area for c in classes.values()) == parrot.shape[0] * parrot.shape[1]


def test_regions_are_the_red_blobs(vision_models, parrot):
    with Segmenter.create_from_options(SegmenterOptions(model=vision_models.seg_scores, labels=LABELS,
                                                        min_area=500, classes=["red"])) as seg:
        got = seg.segment(parrot)
    assert got.regions and all(r.label == "red" and r.area >= 500 for r in got.regions)
    mask = (got.mask.class_map == 1).astype(np.uint8)
    n, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    expected = sorted((int(a) for a in stats[1:, cv2.CC_STAT_AREA] if a >= 500), reverse=True)
    assert [r.area for r in got.regions] == expected
    biggest = got.regions[0]
    x1, y1, x2, y2 = biggest.box
    assert mask[int(y1):int(y2), int(x1):int(x2)].sum() >= biggest.area


def test_single_pose_keypoints_within_one_pixel(vision_models, parrot):
    outputs, tf = _raw(vision_models.pose_single, parrot, 192)
    yx = outputs[0][0, 0, :, :2].astype(np.float64)
    h, w = parrot.shape[:2]
    # Keypoints are fractions of the padded input (tf.image.resize_with_pad's placement, the preset's)
    ref = np.stack([(yx[:, 1] * 192 - tf.pad_x) / tf.scale_x, (yx[:, 0] * 192 - tf.pad_y) / tf.scale_y], axis=1)
    with PoseEstimator.create_from_model_path(vision_models.pose_single, threshold=0.0) as est:
        poses = est.estimate(parrot)
    assert len(poses) == 1
    assert np.abs(poses.keypoints[0] - np.clip(ref, 0, [w, h])).max() <= 1.0


def test_multi_pose_people_are_sorted_and_in_the_frame(vision_models, parrot):
    with PoseEstimator.create_from_model_path(vision_models.pose_multi, threshold=0.0) as est:
        poses = est.estimate(parrot)
    assert len(poses) == 6 and list(poses.scores) == sorted(poses.scores, reverse=True)
    h, w = parrot.shape[:2]
    assert np.all((poses.keypoints >= 0) & (poses.keypoints <= [w, h])) and poses.boxes is not None


def test_face_detector_through_the_detector(vision_models, parrot):
    """The raw [1, 896, 16] + [1, 896, 1] model runs in a Detector with the face preset, as decode_anchors reads it."""
    outputs, tf = _raw(vision_models.face, parrot, 128)
    ref = decode_anchors(outputs[0], outputs[1], ANCHOR_PRESETS["face-short-range"], tf, threshold=0.5)
    with Detector.create_from_model_path(vision_models.face, threshold=0.5, resize="letterbox") as det:
        got = det.detect(parrot)
    inside = (ref.xyxy[:, 2] > ref.xyxy[:, 0]) & (ref.xyxy[:, 3] > ref.xyxy[:, 1])  # not wholly in the padding
    assert len(got) == inside.sum() > 0
    assert np.allclose(got.xyxy, ref.xyxy[inside], atol=1e-3) and np.allclose(got.scores, ref.scores[inside])


def test_stream_over_images_gives_json_ready_frames(vision_models, shared_images):
    with Segmenter.create_from_model_path(vision_models.seg_argmax, labels=LABELS) as seg:
        results = list(seg.stream(str(shared_images / "*.jpg")))
    assert len(results) == 2
    doc = results[0].to_dict()
    assert set(doc) == {"frame", "timestamp", "latency_ms", "classes", "regions"}
    assert {c["label"] for c in doc["classes"]} <= set(LABELS)


@pytest.mark.parametrize("task, field, fragment", [
    (Segmenter, "pose_single", r"not a segmenter.*keypoints.*`edgekit pose`"),
    (PoseEstimator, "seg_argmax", r"not a pose model.*segmentation.*`edgekit segment`"),
    (Detector, "seg_scores", r"Segmenter \(`edgekit segment`\)"),
])
def test_a_model_of_another_task_is_refused_with_the_command_to_use(vision_models, task, field, fragment):
    with pytest.raises(ModelError, match=fragment):
        task.create_from_model_path(getattr(vision_models, field))


def test_a_task_given_another_tasks_options_says_what_it_is_made_with(vision_models):
    with pytest.raises(InputError, match=r"a Segmenter is made with SegmenterOptions, got DetectorOptions: "
                                         r"Segmenter\(SegmenterOptions\(model=\.\.\.\)\)"):
        Segmenter(DetectorOptions(model=vision_models.seg_scores))
    with pytest.raises(InputError, match="a Detector is made with DetectorOptions, got SegmenterOptions"):
        Detector(SegmenterOptions(model=vision_models.seg_scores))


def test_bad_options(vision_models):
    with pytest.raises(InputError, match="min_area"):
        Segmenter.create_from_model_path(vision_models.seg_scores, min_area=-1)
    with pytest.raises(InputError, match="threshold"):
        PoseEstimator.create_from_model_path(vision_models.pose_single, threshold=2.0)
