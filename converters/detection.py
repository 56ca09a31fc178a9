"""Detections from raw detector outputs, and mAP@0.5 of one model's detections against another's.

Used to compare a quantized detector with its float original: the float model's
confident detections are the truth, the quantized model's detections are ranked by
score against them (VOC all-point average precision per class, then the mean).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from edgekit.errors import InputError

__all__ = [
    "ImageDetections",
    "ssd_detections",
    "yolo_detections",
    "nms",
    "box_iou",
    "map50",
    "TRUTH_SCORE",
    "PREDICTION_SCORE",
    "NMS_IOU",
]

TRUTH_SCORE = 0.25  # float detections at least this confident count as objects
PREDICTION_SCORE = 0.05  # quantized detections down to this score are ranked (AP needs the tail)
NMS_IOU = 0.45
MAX_DETECTIONS = 100


class ImageDetections(NamedTuple):
    """Detections in one image: boxes (K, 4) as x1, y1, x2, y2; scores (K,); classes (K,)."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray

    def above(self, score: float) -> ImageDetections:
        keep = self.scores >= score
        return ImageDetections(self.boxes[keep], self.scores[keep], self.classes[keep])

    def __len__(self) -> int:  # type: ignore[override]
        return int(self.scores.shape[0])


def ssd_detections(boxes: np.ndarray, classes: np.ndarray, scores: np.ndarray,
                   count: np.ndarray | None = None) -> ImageDetections:
    """From TFLite_Detection_PostProcess outputs of one image: boxes [N, 4] as ymin, xmin, ymax, xmax."""
    n = int(np.asarray(count).reshape(-1)[0]) if count is not None else len(scores)
    n = max(0, min(n, len(scores)))
    b = np.asarray(boxes, np.float32).reshape(-1, 4)[:n]
    return ImageDetections(b[:, [1, 0, 3, 2]], np.asarray(scores, np.float32).reshape(-1)[:n],
                           np.asarray(classes).reshape(-1)[:n].astype(np.int64))


def yolo_detections(raw: np.ndarray, score: float = PREDICTION_SCORE) -> ImageDetections:
    """Decode one image's raw YOLO output and apply NMS.

    [4+C, N] (fewer rows than columns, YOLOv8 style: cx, cy, w, h, class scores) or
    [N, 5+C] (YOLOv5 style: cx, cy, w, h, objectness, class scores).
    """
    a = np.asarray(raw, np.float32)
    a = a.reshape(a.shape[-2], a.shape[-1])
    if a.shape[0] < a.shape[1]:
        rows = a.T
        cls_scores = rows[:, 4:]
    else:
        rows = a
        cls_scores = rows[:, 5:] * rows[:, 4:5]
    if cls_scores.shape[1] == 0:
        return ImageDetections(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64))
    classes = cls_scores.argmax(axis=1)
    scores = cls_scores[np.arange(len(rows)), classes]
    keep = scores >= score
    cx, cy, w, h = (rows[keep, i] for i in range(4))
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
    return nms(ImageDetections(boxes, scores[keep], classes[keep].astype(np.int64)))


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one x1y1x2y2 box with each of `boxes` (0 where the union is empty)."""
    x1 = np.maximum(box[0], boxes[:, 0])
    y1 = np.maximum(box[1], boxes[:, 1])
    x2 = np.minimum(box[2], boxes[:, 2])
    y2 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda b: np.clip(b[..., 2] - b[..., 0], 0, None) * np.clip(b[..., 3] - b[..., 1], 0, None)  # noqa: E731
    union = area(box) + area(boxes) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def nms(dets: ImageDetections, iou: float = NMS_IOU, max_det: int = MAX_DETECTIONS) -> ImageDetections:
    """Greedy per-class non-maximum suppression."""
    order = np.argsort(-dets.scores, kind="stable")
    keep: list[int] = []
    for i in order:
        if len(keep) >= max_det:
            break
        same = [k for k in keep if dets.classes[k] == dets.classes[i]]
        if same and box_iou(dets.boxes[i], dets.boxes[same]).max() > iou:
            continue
        keep.append(int(i))
    idx = np.array(keep, np.int64)
    return ImageDetections(dets.boxes[idx].reshape(-1, 4), dets.scores[idx], dets.classes[idx])


def map50(truth: Sequence[ImageDetections], predicted: Sequence[ImageDetections], iou: float = 0.5) -> float | None:
    """Mean over classes of the average precision of `predicted` against `truth` at IoU `iou`.

    Returns None when `truth` holds no object (nothing to measure).
    """
    if len(truth) != len(predicted):
        raise InputError(f"map50 needs one detection set per image on both sides, got {len(truth)} truth "
                         f"and {len(predicted)} predicted")
    classes = sorted({int(c) for t in truth for c in t.classes})
    if not classes:
        return None
    return float(np.mean([_average_precision(truth, predicted, c, iou) for c in classes]))


def _average_precision(truth: Sequence[ImageDetections], predicted: Sequence[ImageDetections],
                       cls: int, iou: float) -> float:
    gts = [t.boxes[t.classes == cls] for t in truth]
    n_gt = sum(len(g) for g in gts)
    found = [np.zeros(len(g), bool) for g in gts]
    dets = [(float(s), i, b) for i, p in enumerate(predicted)
            for s, b, c in zip(p.scores, p.boxes, p.classes) if int(c) == cls]
    dets.sort(key=lambda d: -d[0])
    tp = np.zeros(len(dets))
    for k, (_, img, box) in enumerate(dets):
        if len(gts[img]) == 0:
            continue
        ious = box_iou(box, gts[img])
        j = int(ious.argmax())
        if ious[j] >= iou and not found[img][j]:
            found[img][j] = True
            tp[k] = 1
    if not dets:
        return 0.0
    ctp = np.cumsum(tp)
    recall = ctp / n_gt
    precision = ctp / np.arange(1, len(dets) + 1)
    # all-point interpolation: precision made monotone from the right, integrated over recall
    r = np.concatenate([[0.0], recall, [1.0]])
    p = np.concatenate([[1.0], precision, [0.0]])
    p = np.maximum.accumulate(p[::-1])[::-1]
    steps = np.where(r[1:] != r[:-1])[0]
    return float(np.sum((r[steps + 1] - r[steps]) * p[steps + 1]))
