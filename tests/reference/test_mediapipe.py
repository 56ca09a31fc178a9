"""edgekit on MediaPipe 0.10.14's own .tflite files against MediaPipe's own graphs, on real photos.

Skipped without mediapipe (`.ci/reference` makes the venv it runs in). The targets are issue 24's:
faces IoU >= 0.9 and keypoints within 2 % of the image size; selfie mask IoU >= 0.95; palms: the
reference's found and no other >= 0.5; hand landmarks on the reference's crops within 2 %.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from edgekit import Detector, PoseEstimator, Segmenter
from edgekit.contract.enums import Interpolation, ResizeMode
from edgekit.contract.preprocessing import Provenance
from edgekit.preprocess import load_image
from tests.reference import _mediapipe as ref


@pytest.mark.parametrize("key, selection", [("face-short", 0), ("face-full", 1)])
def test_faces_match_mediapipe(mp: Any, mp_models: dict[str, Path], photos: list[Path], key: str,
                               selection: int) -> None:
    seen = 0
    with Detector.create_from_model_path(mp_models[key], threshold=0.5, isolate=False) as det:
        for photo in photos:
            image = load_image(photo)
            want, got = ref.reference_faces(mp, image, selection), ref.edgekit_faces(det, image)
            ious, errors, extra = ref.match_faces(want, got, (image.shape[1], image.shape[0]))
            seen += len(want)
            assert min(ious, default=1.0) >= 0.9, (photo.name, ious)
            assert max(errors, default=0.0) <= 0.02, (photo.name, errors)
            assert not [s for s in extra if s >= 0.5], (photo.name, extra)
    assert seen >= 4  # the photos hold faces for both models


@pytest.mark.parametrize("key", ["face-short", "face-full", "palm-full", "pose-detector", "selfie",
                                 "hand-landmark-lite"])
def test_mediapipe_files_are_read_from_their_metadata_and_preset(mp_models: dict[str, Path], key: str) -> None:
    task = {"selfie": Segmenter, "hand-landmark-lite": PoseEstimator}.get(key, Detector)
    with task.create_from_model_path(mp_models[key], isolate=False) as t:
        pre = t.preprocessing
    assert pre.preset is not None and pre.preset.startswith("mediapipe-") and not pre.guessed
    assert pre.sources["normalization"] is Provenance.TFLITE  # NormalizationOptions in the file
    assert pre.interpolation is Interpolation.MEDIAPIPE and pre.pad_value == 0
    assert pre.resize is (ResizeMode.STRETCH if key == "selfie" else ResizeMode.LETTERBOX)


def test_selfie_mask_matches_mediapipe(mp: Any, mp_models: dict[str, Path], photos: list[Path]) -> None:
    compared = 0
    with Segmenter.create_from_model_path(mp_models["selfie"], isolate=False) as seg:
        for photo in photos:
            image = load_image(photo)
            want = ref.reference_selfie(mp, image, 0)
            if want.mean() < 0.01:
                continue
            got = seg.segment(image).mask.class_map == 1
            assert ref.mask_iou(want, got) >= 0.95, photo.name
            compared += 1
    assert compared >= 5


@pytest.mark.parametrize("key, complexity", [("palm-lite", 0), ("palm-full", 1)])
def test_palms_match_mediapipe(mp: Any, mp_models: dict[str, Path], photos: list[Path], key: str,
                               complexity: int) -> None:
    found = 0
    with Detector.create_from_model_path(mp_models[key], threshold=0.5, isolate=False) as det:
        for photo in photos:
            image = load_image(photo)
            want, _ = ref.reference_palms_and_hands(mp, image, complexity)
            got = det.detect(image)
            matched = set()
            for _, box, _ in want:
                best = max(range(len(got)), key=lambda i: ref.iou(box, got.xyxy[i]), default=None)
                assert best is not None and ref.iou(box, got.xyxy[best]) >= 0.9, (photo.name, want, got.xyxy)
                matched.add(best)
            extra = [float(s) for i, s in enumerate(got.scores) if i not in matched and s >= 0.5]
            assert not extra, (photo.name, extra)
            found += len(want)
    assert found >= 4


@pytest.mark.parametrize("key, complexity", [("hand-landmark-lite", 0), ("hand-landmark-full", 1)])
def test_hand_landmarks_on_the_reference_crops(mp: Any, mp_models: dict[str, Path], photos: list[Path], key: str,
                                               complexity: int) -> None:
    """Each hand MediaPipe keeps, from the crop of its palm: edgekit's landmarks on that crop,
    taken back to the frame, against MediaPipe's."""
    hands = 0
    with PoseEstimator.create_from_model_path(mp_models[key], threshold=0.5, isolate=False) as est:
        for photo in photos:
            image = load_image(photo)
            palms, landmarks = ref.reference_palms_and_hands(mp, image, complexity)
            for want in landmarks:
                errors = []
                for _, _, m in palms:  # the crop this hand came from is the one whose landmarks fit
                    crop = cv2.warpAffine(image, m, (224, 224), flags=cv2.INTER_LINEAR,
                                          borderMode=cv2.BORDER_CONSTANT)
                    poses = est.estimate(crop)
                    if len(poses):
                        inv = cv2.invertAffineTransform(m)
                        back = poses.keypoints[0] @ inv[:, :2].T + inv[:, 2]
                        errors.append(float(np.abs(back - want).max() / max(image.shape[:2])))
                assert min(errors, default=1.0) <= 0.02, (photo.name, errors)
                hands += 1
    assert hands >= 4


def test_pose_detector_matches_mediapipe(mp: Any, mp_models: dict[str, Path], photos: list[Path]) -> None:
    """The best person of edgekit's pose detector against MediaPipe's (its pose graph's DETECTION),
    both clipped to the image as edgekit reports boxes and keypoints in the frame's pixels."""
    people = 0
    with Detector.create_from_model_path(mp_models["pose-detector"], threshold=0.5, isolate=False) as det:
        for photo in photos:
            image = load_image(photo)
            h, w = image.shape[:2]
            want = ref.reference_pose_detection(mp, image)
            got = ref.edgekit_faces(det, image)
            if want is None:
                assert not got, photo.name
                continue
            want["box"] = tuple(np.clip(want["box"], 0, [w, h, w, h]))
            want["keypoints"] = np.clip(want["keypoints"], 0, [w, h])
            ious, errors, _ = ref.match_faces([want], got, (w, h))
            assert ious[0] >= 0.9 and errors[0] <= 0.02, (photo.name, ious, errors)
            people += 1
    assert people >= 5
