"""Detection accuracy: mAP@0.5 of per-image detections against per-image truths.

The one AP computation of edgekit: the converter's accuracy gate ranks the quantized model's
detections against the float model's, the demo ranks a detector against its labels, and
anyone can rank :class:`edgekit.Detector` results the same way. VOC all-point interpolation,
greedy matching by score, mean over the classes present in the truth.

Detections are anything with boxes (``xyxy`` or ``boxes``, x1 y1 x2 y2), ``scores`` and class ids
(``class_ids`` or ``classes``) per image: :class:`edgekit.results.Detections` fits.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from edgekit.errors import InputError

__all__ = ["box_iou", "map50", "average_precision"]


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one x1y1x2y2 box with each of ``boxes`` (0 where the union is empty)."""
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    a = np.asarray(box, dtype=np.float64).reshape(4)
    w = np.clip(np.minimum(a[2], b[:, 2]) - np.maximum(a[0], b[:, 0]), 0, None)
    h = np.clip(np.minimum(a[3], b[:, 3]) - np.maximum(a[1], b[:, 1]), 0, None)
    inter = w * h

    def area(x: np.ndarray) -> np.ndarray:
        sides: np.ndarray = np.clip(x[..., 2] - x[..., 0], 0, None) * np.clip(x[..., 3] - x[..., 1], 0, None)
        return sides

    union = area(a) + area(b) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def _parts(d: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    boxes = getattr(d, "xyxy", None)
    boxes = np.asarray(d.boxes if boxes is None else boxes, dtype=np.float64).reshape(-1, 4)
    ids = getattr(d, "class_ids", None)
    ids = np.asarray(d.classes if ids is None else ids).reshape(-1).astype(np.int64)
    return boxes, np.asarray(d.scores, dtype=np.float64).reshape(-1), ids


def map50(truth: Sequence[Any], predicted: Sequence[Any], iou: float = 0.5) -> float | None:
    """Mean over the truth's classes of the average precision of ``predicted`` at IoU ``iou``.

    Returns None when ``truth`` holds no object (nothing to measure).

    Raises:
        InputError: the two sequences differ in length.
    """
    if len(truth) != len(predicted):
        raise InputError(f"map50 needs one detection set per image on both sides, got {len(truth)} truth "
                         f"and {len(predicted)} predicted")
    t = [_parts(x) for x in truth]
    p = [_parts(x) for x in predicted]
    classes = sorted({int(c) for _, _, ids in t for c in ids})
    if not classes:
        return None
    return float(np.mean([average_precision(t, p, c, iou) for c in classes]))


def average_precision(truth: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
                      predicted: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], cls: int,
                      iou: float = 0.5) -> float:
    """AP of class ``cls``: (boxes, scores, ids) per image on both sides."""
    gts = [b[ids == cls] for b, _, ids in truth]
    n_gt = sum(len(g) for g in gts)
    found = [np.zeros(len(g), bool) for g in gts]
    dets = [(float(s), i, box) for i, (boxes, scores, ids) in enumerate(predicted)
            for s, box, c in zip(scores, boxes, ids) if int(c) == cls]
    dets.sort(key=lambda d: -d[0])
    if not dets or not n_gt:
        return 0.0
    tp = np.zeros(len(dets))
    for k, (_, img, box) in enumerate(dets):
        if len(gts[img]) == 0:
            continue
        ious = box_iou(box, gts[img])
        j = int(ious.argmax())
        if ious[j] >= iou and not found[img][j]:
            found[img][j] = True
            tp[k] = 1
    ctp = np.cumsum(tp)
    recall = ctp / n_gt
    precision = ctp / np.arange(1, len(dets) + 1)
    # all-point interpolation: precision made monotone from the right, integrated over recall
    r = np.concatenate([[0.0], recall, [1.0]])
    q = np.concatenate([[1.0], precision, [0.0]])
    q = np.maximum.accumulate(q[::-1])[::-1]
    steps = np.where(r[1:] != r[:-1])[0]
    return float(np.sum((r[steps + 1] - r[steps]) * q[steps + 1]))
