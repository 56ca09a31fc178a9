"""Drawing results on frames (OpenCV): boxes, classes, segmentations and poses.

Drawing sits above :mod:`edgekit.results` (which import nothing of it)::

    annotated = draw(frame, detections)            # or Classes, a Segmentation, Poses
    annotated = draw_poses(frame, poses, threshold=0.3)
    annotated = draw_segmentation(frame, seg, alpha=0.5)
    draw_counting_line(annotated, (320, 0), (320, 480), "line", axis=(1, 0))   # in place
    draw_verdict(annotated, (40, 60, 200, 220), "#7 FAIL dent", passed=False)
"""

from __future__ import annotations

from typing import Sequence

import cv2
import numpy as np

from edgekit.errors import InputError
from edgekit.results import Classes, Detections, Poses, Result, Segmentation, SegmentationMask, background_id

__all__ = ["LINE_COLOR", "PASS_COLOR", "FAIL_COLOR", "class_color", "draw", "draw_counting_line", "draw_poses",
           "draw_segmentation", "draw_verdict", "label_box"]

MAX_REGION_LABELS = 20  # draw_segmentation writes "label area" on the largest regions only
LINE_COLOR = (255, 215, 0)  # RGB amber: a counting line
PASS_COLOR = (0, 200, 0)  # RGB: a part's PASS
FAIL_COLOR = (230, 0, 0)  # RGB: a part's FAIL


# One color per class id, stable across frames (RGB; golden-ratio hues are far apart).
def class_color(class_id: int) -> tuple[int, int, int]:
    """The RGB color of a class id (or a person's index), the same in every frame."""
    hue = int((class_id * 0.618034 % 1.0) * 180)
    hsv = np.array([[[hue, 200, 255]]], dtype=np.uint8)
    r, g, b = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0]
    return int(r), int(g), int(b)


def draw(frame: np.ndarray, result: Result | SegmentationMask, *, thickness: int = 2, copy: bool = True,
         bgr: bool = False) -> np.ndarray:
    """Draw any task's result on an RGB uint8 frame (with ``bgr=True``, on a frame in OpenCV's BGR
    order: the same colors come out): boxes with "label score" ("#7 label score" for tracked
    detections), a classifier's top classes, a segmentation's colored classes and regions, or
    poses' skeletons.

    Returns the annotated frame: a copy, or ``frame`` itself with ``copy=False``.

    Raises:
        InputError: the frame is not an (H, W, 3) uint8 array, or the result is of no task.
    """
    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
        raise InputError(f"draw expects an RGB uint8 frame of shape (H, W, 3), got "
                         f"{getattr(frame, 'dtype', type(frame).__name__)} {np.shape(frame)}")
    if isinstance(result, (Segmentation, SegmentationMask)):
        return draw_segmentation(frame, result, copy=copy, bgr=bgr)
    if isinstance(result, Poses):
        return draw_poses(frame, result, copy=copy, bgr=bgr)
    if not isinstance(result, (Detections, Classes)):
        raise InputError(f"edgekit draws Detections, Classes, Segmentation and Poses, not {type(result).__name__}")
    out = frame.copy() if copy else frame
    scale = max(0.4, min(out.shape[:2]) / 900)
    if isinstance(result, Classes):
        for row, c in enumerate(result):
            label_box(out, f"{c.label} {c.score:.2f}", (8, 8 + row * int(30 * scale)), (255, 255, 255), scale)
        return out
    track_ids = getattr(result, "track_ids", None)  # edgekit.track's TrackedDetections: "#7 part 0.91"
    for i, d in enumerate(result):
        color = class_color(d.id)[::-1] if bgr else class_color(d.id)
        x1, y1, x2, y2 = (int(round(v)) for v in d.box)
        cv2.rectangle(out, (x1, y1), (max(x1, x2 - 1), max(y1, y2 - 1)), color, thickness)
        tag = f"#{int(track_ids[i])} " if track_ids is not None and track_ids[i] >= 0 else ""
        label_box(out, f"{tag}{d.label} {d.score:.2f}", (x1, y1), color, scale)
    return out


def label_box(img: np.ndarray, text: str, org: tuple[int, int], color: tuple[int, int, int], scale: float) -> None:
    """``text`` on a filled box of ``color`` above ``org`` (inside the frame's top edge when there is no room)."""
    font = cv2.FONT_HERSHEY_SIMPLEX
    (tw, th), base = cv2.getTextSize(text, font, scale * 0.6, 1)
    x, y = org
    top = y - th - base - 2 if y - th - base - 2 >= 0 else y  # above the box, else inside it
    cv2.rectangle(img, (x, top), (x + tw + 4, top + th + base + 2), color, cv2.FILLED)
    dark = sum(color) > 380  # dark text on light boxes
    cv2.putText(img, text, (x + 2, top + th + 1), font, scale * 0.6, (0, 0, 0) if dark else (255, 255, 255), 1,
                cv2.LINE_AA)


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
        color = class_color(n)[::-1] if bgr else class_color(n)
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


def _palette(n: int, bgr: bool) -> np.ndarray:
    colors = np.array([class_color(i) for i in range(n)], dtype=np.uint8).reshape(n, 3)
    return colors[:, ::-1] if bgr else colors


def draw_segmentation(frame: np.ndarray, seg: Segmentation | SegmentationMask, *, alpha: float = 0.5,
                      boxes: bool = True, copy: bool = True, bgr: bool = False) -> np.ndarray:
    """Color every non-background class over an RGB uint8 frame (``bgr=True``: OpenCV's order),
    and outline each region with "label area" when ``boxes``.

    Raises:
        InputError: the frame is not (H, W, 3) uint8 of the mask's size, or alpha is outside [0, 1].
    """
    mask = seg.mask if isinstance(seg, Segmentation) else seg
    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8 \
            or (frame.shape[1], frame.shape[0]) != mask.size or not 0.0 <= alpha <= 1.0:
        raise InputError(f"draw_segmentation expects an (H, W, 3) uint8 frame of the mask's size {mask.size} and "
                         f"alpha in [0, 1]; got {getattr(frame, 'dtype', type(frame).__name__)} {np.shape(frame)}, "
                         f"alpha {alpha}")
    out = frame.copy() if copy else frame
    cm = mask.class_map
    bg = background_id(mask)
    paint = cm != bg if bg is not None else np.ones(cm.shape, bool)
    if paint.any():
        top = int(cm.max())
        if top < 256:  # one table lookup per channel (cv2.LUT) instead of indexing a palette per pixel
            ids = cm.astype(np.uint8)
            colors = cv2.LUT(cv2.merge([ids, ids, ids]), _palette(256, bgr).reshape(1, 256, 3))
        else:
            colors = _palette(top + 1, bgr)[cm]
        mixed = cv2.addWeighted(out, 1.0 - alpha, colors, alpha, 0.0)
        np.copyto(out, mixed, where=paint[:, :, None])
    if boxes and isinstance(seg, Segmentation) and seg.regions:
        scale = max(0.4, min(out.shape[:2]) / 900)
        palette = _palette(max(r.class_id for r in seg.regions) + 1, bgr)
        for n, r in enumerate(seg.regions):  # largest first
            c = palette[r.class_id]
            color = (int(c[0]), int(c[1]), int(c[2]))
            x1, y1, x2, y2 = (int(v) for v in r.box)
            cv2.rectangle(out, (x1, y1), (max(x1, x2 - 1), max(y1, y2 - 1)), color, 1)
            if n < MAX_REGION_LABELS:  # text is what costs (about 0.1 ms a label) and clutters
                label_box(out, f"{r.label} {r.area}px", (x1, y1), color, scale)
    return out


def _bgr(color: tuple[int, int, int], bgr: bool) -> tuple[int, int, int]:
    return (color[2], color[1], color[0]) if bgr else color


def draw_counting_line(frame: np.ndarray, start: Sequence[float], end: Sequence[float], name: str = "", *,
                       axis: Sequence[float] = (0.0, 0.0), thickness: int = 2, color: tuple[int, int, int] = LINE_COLOR,
                       bgr: bool = False) -> np.ndarray:
    """Draw a counting line from ``start`` to ``end`` (frame pixels) in place, with its ``name`` and, when
    ``axis`` is not (0, 0), an arrow from its middle the way that counts. ``color`` is RGB (``bgr=True``:
    the frame is in OpenCV's order and the same color comes out). Returns ``frame``."""
    c = _bgr(color, bgr)
    a, b = np.asarray(start, np.float64), np.asarray(end, np.float64)
    cv2.line(frame, tuple(int(v) for v in np.round(a)), tuple(int(v) for v in np.round(b)), c, thickness, cv2.LINE_AA)
    direction = np.asarray(axis, np.float64)
    if direction.any():
        mid = (a + b) / 2
        tip = mid + direction * max(20.0, 0.08 * frame.shape[1])
        cv2.arrowedLine(frame, tuple(int(v) for v in mid), tuple(int(v) for v in tip), c, thickness, cv2.LINE_AA,
                        tipLength=0.35)
    if name:
        cv2.putText(frame, name, (int(a[0]) + 4, int(a[1]) + 16), cv2.FONT_HERSHEY_SIMPLEX, 0.5, c, 1, cv2.LINE_AA)
    return frame


def draw_verdict(frame: np.ndarray, box: tuple[float, float, float, float] | np.ndarray, text: str, *, passed: bool,
                 thickness: int = 2, bgr: bool = False) -> np.ndarray:
    """Draw a part's verdict in place: its box outlined and ``text`` ("#7 FAIL dent") on a green (PASS)
    or red (FAIL) label above it. Returns ``frame``."""
    c = _bgr(PASS_COLOR if passed else FAIL_COLOR, bgr)
    x1, y1, x2, y2 = (int(round(float(v))) for v in box)
    cv2.rectangle(frame, (x1, y1), (max(x1, x2 - 1), max(y1, y2 - 1)), c, thickness + 1)
    label_box(frame, text, (max(0, x1), max(0, y1)), c, max(0.4, min(frame.shape[:2]) / 900) * 1.5)
    return frame
