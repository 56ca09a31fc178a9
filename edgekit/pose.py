"""Drawing poses (OpenCV): keypoints and the bones between them.

    poses = decode_poses(output, transform)        # edgekit.contract.keypoints
    annotated = draw_poses(frame, poses, threshold=0.3)
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from edgekit.contract.keypoints import Poses
from edgekit.contract.segmentation import SegmentationMask
from edgekit.errors import InputError
from edgekit.results import _color

__all__ = ["draw_poses", "draw_result"]


def draw_poses(frame: np.ndarray, poses: Poses, *, threshold: float = 0.3, radius: int = 3, thickness: int = 2,
               copy: bool = True, bgr: bool = False) -> np.ndarray:
    """Draw each person's keypoints scoring at least ``threshold`` and the bones joining two such
    keypoints on an RGB uint8 frame (``bgr=True``: OpenCV's order), one color per person.

    Raises:
        InputError: the frame is not an (H, W, 3) uint8 array.
    """
    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
        raise InputError(f"draw_poses expects an (H, W, 3) uint8 frame, got "
                         f"{getattr(frame, 'dtype', type(frame).__name__)} {np.shape(frame)}")
    out = frame.copy() if copy else frame
    for n, pose in enumerate(poses):
        color = _color(n)[::-1] if bgr else _color(n)
        pts = np.rint(pose.keypoints).astype(np.int32)
        seen = pose.keypoint_scores >= threshold
        for a, b in poses.skeleton:
            if seen[a] and seen[b]:
                cv2.line(out, tuple(int(v) for v in pts[a]), tuple(int(v) for v in pts[b]), color, thickness,
                         cv2.LINE_AA)
        for (x, y), ok in zip(pts, seen):
            if ok:
                cv2.circle(out, (int(x), int(y)), radius, (255, 255, 255), cv2.FILLED, cv2.LINE_AA)
                cv2.circle(out, (int(x), int(y)), radius, color, 1, cv2.LINE_AA)
        if pose.box is not None:
            x1, y1, x2, y2 = (int(round(v)) for v in pose.box)
            cv2.rectangle(out, (x1, y1), (max(x1, x2 - 1), max(y1, y2 - 1)), color, 1)
    return out


def draw_result(frame: np.ndarray, result: Any, *, copy: bool = True, bgr: bool = False) -> np.ndarray:
    """Draw a segmentation (colored classes, regions) or poses (skeletons) on a frame; what
    :func:`edgekit.draw` does for results that are not boxes or classes.

    Raises:
        InputError: the frame is not (H, W, 3) uint8, or edgekit cannot draw this result.
    """
    from edgekit.segment import Segmentation, draw_segmentation

    if isinstance(result, (Segmentation, SegmentationMask)):
        return draw_segmentation(frame, result, copy=copy, bgr=bgr)
    if isinstance(result, Poses):
        return draw_poses(frame, result, copy=copy, bgr=bgr)
    raise InputError(f"edgekit draws Detections, Classes, Segmentation and Poses, not {type(result).__name__}")
