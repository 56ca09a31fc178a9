"""What a detector's user loses in quantization, beside mAP@0.5: boxes found, box precision, scores.

mAP at IoU 0.5 does not see a box that drifts by a tenth of its size, nor a score that moves by
0.1; an inspection line thresholds on scores and measures with boxes. Each float detection at
the user's score threshold is matched with the quantized detection of the same class that
overlaps it most (IoU >= MATCH_IOU, each quantized detection used once, the float model's most
confident first), on each image:

- found / missing: float detections with (without) a quantized match at the threshold too;
- extra: quantized detections at the threshold with no float match at it (boxes the user sees
  that the float model does not show);
- box IoU and score error: over the float detections matched by a quantized one at any score
  the gate ranks (a score that falls under the threshold is an error, not a silence).

The converter evaluates classifiers and detectors only (``CONVERTED_TASKS``): a segmentation
model's mask IoU or a pose model's keypoint error has no converter path to be measured on yet.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from edgekit.contract.metrics import box_iou

__all__ = ["MATCH_IOU", "DetectionFidelity", "detection_fidelity", "match_detections"]

MATCH_IOU = 0.5  # a quantized box stands for a float box of the same class from this IoU on


@dataclass(frozen=True)
class DetectionFidelity:
    """The quantized detector against the float one at score `threshold` (None: nothing matched).

    ``float_objects`` float detections (score >= threshold) are what the others rest on:
    ``found + missing == float_objects``; ``matched`` of them have a quantized box at any ranked
    score, and the box IoU and score error are measured on those."""

    threshold: float
    float_objects: int
    found: int
    missing: int
    extra: int
    matched: int
    box_iou_mean: float | None
    box_iou_p5: float | None  # the 5th percentile: the worst boxes, without the single outlier
    box_iou_min: float | None
    score_error_mean: float | None  # |quantized score - float score|, 0..1
    score_error_max: float | None

    @property
    def found_share(self) -> float | None:
        return self.found / self.float_objects if self.float_objects else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "found_share": self.found_share}


def _sets(d: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (np.asarray(d.xyxy, np.float64).reshape(-1, 4), np.asarray(d.scores, np.float64).reshape(-1),
            np.asarray(d.class_ids).reshape(-1).astype(np.int64))


def match_detections(ref: Any, quant: Any, *, ref_min: float, quant_min: float,
                     iou: float = MATCH_IOU) -> list[tuple[int, int, float]]:
    """(float index, quantized index, IoU) pairs on one image: float detections scoring at least
    `ref_min`, most confident first, each take the unused same-class quantized detection scoring at
    least `quant_min` that overlaps it most, when that IoU is at least `iou`."""
    rb, rs, rc = _sets(ref)
    qb, qs, qc = _sets(quant)
    used = np.zeros(len(qb), bool)
    pairs: list[tuple[int, int, float]] = []
    for i in np.argsort(-rs, kind="stable"):
        if rs[i] < ref_min:
            continue
        ok = (qc == rc[i]) & (qs >= quant_min) & ~used
        if not ok.any():
            continue
        ious = np.where(ok, box_iou(rb[i], qb), -1.0)
        j = int(ious.argmax())
        if ious[j] >= iou:
            used[j] = True
            pairs.append((int(i), j, float(ious[j])))
    return pairs


def detection_fidelity(ref: Sequence[Any], quant: Sequence[Any], threshold: float,
                       ranked: float) -> DetectionFidelity:
    """Found, missing and extra boxes at `threshold`, box IoU and score error of the float detections
    matched at any quantized score from `ranked` on; one detection set per image on each side."""
    if len(ref) != len(quant):
        raise ValueError(f"{len(ref)} float and {len(quant)} quantized detection sets")
    objects = found = extra = 0
    ious: list[float] = []
    errors: list[float] = []
    for r, q in zip(ref, quant):
        rs, qs = _sets(r)[1], _sets(q)[1]
        at = match_detections(r, q, ref_min=threshold, quant_min=threshold)
        objects += int(np.sum(rs >= threshold))
        found += len(at)
        extra += int(np.sum(qs >= threshold)) - len(at)
        for i, j, v in match_detections(r, q, ref_min=threshold, quant_min=ranked):
            ious.append(v)
            errors.append(abs(float(qs[j]) - float(rs[i])))
    iou, err = np.asarray(ious), np.asarray(errors)
    some = bool(len(iou))
    return DetectionFidelity(
        threshold=threshold, float_objects=objects, found=found, missing=objects - found, extra=extra,
        matched=len(iou), box_iou_mean=float(iou.mean()) if some else None,
        box_iou_p5=float(np.percentile(iou, 5)) if some else None, box_iou_min=float(iou.min()) if some else None,
        score_error_mean=float(err.mean()) if some else None, score_error_max=float(err.max()) if some else None)
