"""Pose outputs -> keypoints in source-frame pixels (numpy only).

Two MoveNet layouts are read (y, x normalized to the model input, then a score)::

    [1, 1, K, 3]   single pose (MoveNet Lightning/Thunder): K keypoints as y, x, score
    [1, P, 56]     multi pose (MoveNet MultiPose): per person 17 x (y, x, score), then
                   ymin, xmin, ymax, xmax and the person's score

Keypoints go back onto the frame through the preprocessing's transform, exactly as boxes::

    poses = decode_poses(output, transform, threshold=0.2)
    for pose in poses:                       # Pose(score, keypoints, keypoint_scores, box)
        print(pose.score, pose.keypoints[0])  # the nose, (x, y) in frame pixels
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from edgekit.contract.enums import Choice
from edgekit.contract._mapping import PixelMapping, normalized_points_to_source
from edgekit.errors import ModelError
from edgekit.results.poses import COCO_KEYPOINTS, COCO_SKELETON, Pose, Poses

__all__ = ["PoseLayout", "Pose", "Poses", "COCO_KEYPOINTS", "COCO_SKELETON", "pose_layout", "decode_poses",
           "decode_single_pose", "decode_multi_pose"]

MULTI_KEYPOINTS = 17
MULTI_WIDTH = MULTI_KEYPOINTS * 3 + 5  # 56


class PoseLayout(Choice):
    SINGLE = "single"  # [1, 1, K, 3]
    MULTI = "multi"  # [1, P, 56]


def pose_layout(shape: Sequence[int]) -> PoseLayout | None:
    """Which pose layout an output of ``shape`` holds, or None."""
    s = tuple(int(d) for d in shape)
    if len(s) == 4 and s[:2] == (1, 1) and s[3] == 3 and s[2] >= 1:
        return PoseLayout.SINGLE
    if len(s) == 3 and s[0] == 1 and s[2] == MULTI_WIDTH and 1 <= s[1] <= 100:
        return PoseLayout.MULTI
    return None


def _yx_to_frame(yx: np.ndarray, transform: PixelMapping) -> np.ndarray:
    return normalized_points_to_source(yx[..., ::-1], transform)


def decode_single_pose(output: np.ndarray, transform: PixelMapping, *, threshold: float = 0.0) -> Poses:
    """A [1, 1, K, 3] output -> one pose (none when its score, the mean keypoint score, is below ``threshold``).

    Raises:
        ModelError: the output is not [1, 1, K, 3].
    """
    a = np.asarray(output, dtype=np.float32)
    if pose_layout(a.shape) is not PoseLayout.SINGLE:
        raise ModelError(f"a single-pose output is [1, 1, K, 3] (y, x, score), got {list(a.shape)}")
    rows = a.reshape(-1, 3)
    score = float(rows[:, 2].mean())
    if score < threshold:
        return Poses(np.zeros((0, len(rows), 2)), np.zeros((0, len(rows))), np.zeros(0))
    return Poses(_yx_to_frame(rows[None, :, :2], transform), rows[None, :, 2], np.array([score]))


def decode_multi_pose(output: np.ndarray, transform: PixelMapping, *, threshold: float = 0.2) -> Poses:
    """A [1, P, 56] output -> the people scoring at least ``threshold``, best first.

    Raises:
        ModelError: the output is not [1, P, 56].
    """
    a = np.asarray(output, dtype=np.float32)
    if pose_layout(a.shape) is not PoseLayout.MULTI:
        raise ModelError(f"a multi-pose output is [1, P, 56] (17 x (y, x, score), box, score), got {list(a.shape)}")
    rows = a[0]
    rows = rows[rows[:, -1] >= threshold]
    rows = rows[np.argsort(-rows[:, -1], kind="stable")]
    kp = rows[:, :MULTI_KEYPOINTS * 3].reshape(-1, MULTI_KEYPOINTS, 3)
    yxyx = rows[:, MULTI_KEYPOINTS * 3:MULTI_KEYPOINTS * 3 + 4].reshape(-1, 2, 2)  # (ymin, xmin), (ymax, xmax)
    boxes = _yx_to_frame(yxyx, transform).reshape(-1, 4)
    return Poses(_yx_to_frame(kp[..., :2], transform), kp[..., 2], rows[:, -1], boxes)


def decode_poses(output: np.ndarray, transform: PixelMapping, *, layout: PoseLayout | None = None,
                 threshold: float = 0.2) -> Poses:
    """A pose model's output (dequantized) -> :class:`Poses` in source pixels; ``layout`` None reads the shape.

    Raises:
        ModelError: the output has no pose layout.
    """
    layout = layout or pose_layout(np.shape(output))
    if layout is PoseLayout.SINGLE:
        return decode_single_pose(output, transform, threshold=threshold)
    if layout is PoseLayout.MULTI:
        return decode_multi_pose(output, transform, threshold=threshold)
    raise ModelError(f"a pose output is [1, 1, K, 3] (single pose) or [1, P, 56] (multi pose); got "
                     f"{list(np.shape(output))}")
