"""Detection accuracy against ground truth: mAP@0.5 overall and per class.

The AP arithmetic is the contract's (:func:`edgekit.contract.map50`, the accuracy gate's too: VOC all-point
interpolation, greedy matching by score); this module feeds it real ground truth instead of a float
model's detections and breaks the result down by class. It takes anything with ``boxes``
(or ``xyxy``), ``scores`` and ``class_ids`` per image: :class:`edgekit.results.Detections`,
:class:`~edgekit.demo.dataset.Sample` truths. A class without ground truth has no AP (NaN) and is
left out of the mean. No TensorFlow here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from edgekit.contract import map50
from edgekit.errors import InputError
from edgekit.results import Detections

__all__ = ["APResult", "mean_average_precision"]


@dataclass(frozen=True)
class APResult:
    """mAP over the classes that have ground truth, the AP of each (NaN: none), and truth counts."""

    map: float
    per_class: dict[str, float]
    iou_threshold: float
    num_images: int
    num_truths: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"map": self.map, "iou_threshold": self.iou_threshold, "num_images": self.num_images,
                "per_class": {k: (None if math.isnan(v) else v) for k, v in self.per_class.items()},
                "num_truths": dict(self.num_truths)}

    def __str__(self) -> str:
        per = ", ".join(f"{k} {v:.3f}" for k, v in self.per_class.items() if not math.isnan(v))
        return f"mAP@{self.iou_threshold:g} {self.map:.3f} ({per}; {self.num_images} images)"


def _as_dets(item: Any, with_scores: bool) -> Detections:
    boxes = getattr(item, "xyxy", None)
    boxes = np.asarray(item.boxes if boxes is None else boxes, np.float32).reshape(-1, 4)
    ids = np.asarray(item.class_ids, np.int64).reshape(-1)
    scores = np.asarray(item.scores, np.float32).reshape(-1) if with_scores else np.ones(len(ids), np.float32)
    return Detections(boxes, scores, ids)


def _only(dets: Detections, cls: int) -> Detections:
    keep = dets.class_ids == cls
    return Detections(dets.xyxy[keep], dets.scores[keep], dets.class_ids[keep])


def mean_average_precision(detections: Sequence[Any], truths: Sequence[Any], class_names: Sequence[str],
                           iou_threshold: float = 0.5) -> APResult:
    """mAP@``iou_threshold`` of per-image detections against per-image truths (same order, same pixels).

    Raises:
        InputError: the two sequences differ in length or the threshold is not in (0, 1].
    """
    if len(detections) != len(truths):
        raise InputError(f"need one detection result per image: got {len(detections)} results "
                         f"for {len(truths)} images")
    if not 0 < iou_threshold <= 1:
        raise InputError(f"iou_threshold must be in (0, 1], got {iou_threshold}")
    pred = [_as_dets(d, True) for d in detections]
    true = [_as_dets(t, False) for t in truths]
    per_class, counts = {}, {}
    for cls, name in enumerate(class_names):
        t_cls = [_only(t, cls) for t in true]
        counts[name] = sum(len(t) for t in t_cls)
        ap = map50(t_cls, [_only(p, cls) for p in pred], iou=iou_threshold)
        per_class[name] = math.nan if ap is None else ap
    valid = [v for v in per_class.values() if not math.isnan(v)]
    return APResult(map=float(np.mean(valid)) if valid else math.nan, per_class=per_class,
                    iou_threshold=iou_threshold, num_images=len(truths), num_truths=counts)
