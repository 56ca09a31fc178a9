"""Pose outputs -> keypoints in source-frame pixels (numpy only).

Two MoveNet layouts are read (y, x normalized to the model input, then a score)::

    [1, 1, K, 3]   single pose (MoveNet Lightning/Thunder): K keypoints as y, x, score
    [1, P, 56]     multi pose (MoveNet MultiPose): per person 17 x (y, x, score), then
                   ymin, xmin, ymax, xmax and the person's score

and MediaPipe's hand landmarks (four outputs, on a hand's crop)::

    [1, 63] 21 x (x, y, z) in input pixels, [1, 1] presence, [1, 1] handedness, [1, 63] world

Keypoints go back onto the frame through the preprocessing's transform, exactly as boxes::

    poses = decode_poses(output, transform, threshold=0.2)
    for pose in poses:                       # Pose(score, keypoints, keypoint_scores, box)
        print(pose.score, pose.keypoints[0])  # the nose, (x, y) in frame pixels
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from edgekit._lazy import load_export
from edgekit.contract._mapping import PixelMapping, normalized_points_to_source
from edgekit.contract.enums import Choice
from edgekit.errors import ModelError

if TYPE_CHECKING:
    from edgekit.results.poses import COCO_KEYPOINTS, COCO_SKELETON, Pose, Poses

# The results this module hands on load when first asked for (PEP 562): every model's reading asks
# pose_layout_of here, and only a pose model's decoding makes Poses (start-up time).
_EXPORTS = dict.fromkeys(("COCO_KEYPOINTS", "COCO_SKELETON", "Pose", "Poses"), "edgekit.results.poses")


def __getattr__(name: str) -> Any:
    return load_export(__name__, _EXPORTS, globals(), name)

__all__ = ["PoseLayout", "Pose", "Poses", "COCO_KEYPOINTS", "COCO_SKELETON", "HAND_KEYPOINTS", "HAND_SKELETON",
           "pose_layout", "pose_layout_of", "decode_poses", "decode_single_pose", "decode_multi_pose",
           "decode_hand_landmarks"]

# MediaPipe's HandLandmark order and HAND_CONNECTIONS (mediapipe/python/solutions/hands_connections.py).
HAND_KEYPOINTS = ("wrist", "thumb_cmc", "thumb_mcp", "thumb_ip", "thumb_tip") + tuple(
    f"{finger}_{joint}" for finger in ("index_finger", "middle_finger", "ring_finger", "pinky")
    for joint in ("mcp", "pip", "dip", "tip"))
HAND_SKELETON = ((0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (5, 6), (6, 7), (7, 8), (5, 9), (9, 10), (10, 11), (11, 12),
                 (9, 13), (13, 14), (14, 15), (15, 16), (13, 17), (0, 17), (17, 18), (18, 19), (19, 20))
HAND_VALUES = len(HAND_KEYPOINTS) * 3  # 63: x, y, z per landmark
MULTI_KEYPOINTS = 17
MULTI_WIDTH = MULTI_KEYPOINTS * 3 + 5  # 56


class PoseLayout(Choice):
    SINGLE = "single"  # [1, 1, K, 3]
    MULTI = "multi"  # [1, P, 56]
    HAND = "hand"  # MediaPipe hand landmarks: [1, 63], [1, 1] presence, [1, 1] handedness, [1, 63]


def pose_layout(shape: Sequence[int]) -> PoseLayout | None:
    """Which pose layout an output of ``shape`` holds, or None."""
    s = tuple(int(d) for d in shape)
    if len(s) == 4 and s[:2] == (1, 1) and s[3] == 3 and s[2] >= 1:
        return PoseLayout.SINGLE
    if len(s) == 3 and s[0] == 1 and s[2] == MULTI_WIDTH and 1 <= s[1] <= 100:
        return PoseLayout.MULTI
    return None


def pose_layout_of(shapes: Sequence[Sequence[int]]) -> PoseLayout | None:
    """Which pose layout a model's outputs (their shapes, in output order) hold, or None."""
    s = [tuple(int(d) for d in shape) for shape in shapes]
    if len(s) == 4 and s[0] == (1, HAND_VALUES) and s[1] == s[2] == (1, 1) and s[3] == (1, HAND_VALUES):
        return PoseLayout.HAND
    return pose_layout(s[0]) if s else None


def _yx_to_frame(yx: np.ndarray, transform: PixelMapping) -> np.ndarray:
    return normalized_points_to_source(yx[..., ::-1], transform)


def decode_single_pose(output: np.ndarray, transform: PixelMapping, *, threshold: float = 0.0) -> Poses:
    """A [1, 1, K, 3] output -> one pose (none when its score, the mean keypoint score, is below ``threshold``).

    Raises:
        ModelError: the output is not [1, 1, K, 3].
    """
    from edgekit.results.poses import Poses

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
    from edgekit.results.poses import Poses

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


def decode_hand_landmarks(outputs: Sequence[np.ndarray], transform: PixelMapping, input_size: tuple[int, int], *,
                          threshold: float = 0.5, labels: Sequence[str] = ("Left", "Right")) -> Poses:
    """MediaPipe's hand landmark outputs (landmarks [1, 63] in input pixels, presence [1, 1],
    handedness [1, 1]) -> one hand (none when its presence is below ``threshold``), as MediaPipe's
    hand_landmark_cpu.pbtxt reads them: TensorsToLandmarksCalculator divides x, y by the input's
    width and height; the presence is thresholded as it is; handedness is a binary classification,
    ``labels[0]`` scoring the value, ``labels[1]`` one minus it. ``input_size`` is (width, height).

    Raises:
        ModelError: the outputs are not the four of a hand landmark model.
    """
    from edgekit.results.poses import Poses

    if pose_layout_of([np.shape(o) for o in outputs]) is not PoseLayout.HAND:
        raise ModelError(f"a hand landmark model has outputs [1, 63], [1, 1], [1, 1], [1, 63]; got "
                         f"{[list(np.shape(o)) for o in outputs]}")
    presence = float(np.asarray(outputs[1], np.float32).ravel()[0])
    k = len(HAND_KEYPOINTS)
    if presence < threshold:
        return Poses(np.zeros((0, k, 2)), np.zeros((0, k)), np.zeros(0), names=HAND_KEYPOINTS,
                     skeleton=HAND_SKELETON, handedness=())
    xyz = np.asarray(outputs[0], np.float32).reshape(k, 3)
    xy = xyz[:, :2] / np.asarray(input_size, np.float32)
    left = float(np.asarray(outputs[2], np.float32).ravel()[0])
    names = tuple(labels) if len(labels) == 2 else ("Left", "Right")
    return Poses(normalized_points_to_source(xy[None], transform), np.full((1, k), presence), np.array([presence]),
                 names=HAND_KEYPOINTS, skeleton=HAND_SKELETON, handedness=(names[0] if left >= 0.5 else names[1],))


def decode_poses(output: np.ndarray, transform: PixelMapping, *, layout: PoseLayout | None = None,
                 threshold: float = 0.2) -> Poses:
    """A pose model's output (dequantized) -> :class:`Poses` in source pixels; ``layout`` None reads the shape.
    (Hand landmarks have four outputs: :func:`decode_hand_landmarks`.)

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
