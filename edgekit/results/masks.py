"""A segmenter's answer for one frame: the class of every pixel, and its connected regions.

:mod:`edgekit.contract.segmentation` decodes the class map; :mod:`edgekit.segment` cuts it into
regions (OpenCV)::

    mask.class_map          # (H, W) int32 class ids, in the frame's pixels
    mask.classes()          # [ClassArea(id, label, area, fraction), ...] for the classes present
    for r in seg.regions:   # Region(class_id, label, area, box, centroid)
        print(r.label, r.area, r.box)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from edgekit.errors import InputError
from edgekit.results.detections import Detections

__all__ = ["ClassArea", "SegmentationMask", "Region", "Segmentation", "background_id", "BACKGROUND_LABELS"]

# Labels that name "nothing here"; class 0 is background when a model has no labels at all.
BACKGROUND_LABELS = frozenset({"background", "bg", "__background__", "none", "???"})


class ClassArea(NamedTuple):
    """How much of the frame one class covers."""

    id: int
    label: str
    area: int  # pixels
    fraction: float  # of the frame


@dataclass(frozen=True)
class SegmentationMask:
    """The class of every frame pixel.

    Attributes:
        class_map: int32 (H, W) class ids in the source frame's pixels.
        labels: the model's labels by class id (empty when it has none).

    Raises:
        InputError: ``class_map`` is not a 2-D integer array.
    """

    class_map: np.ndarray
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        m = np.asarray(self.class_map)
        if m.ndim != 2 or not np.issubdtype(m.dtype, np.integer):
            raise InputError(f"SegmentationMask expects a 2-D integer class map, got {m.dtype.name} {m.shape}")
        object.__setattr__(self, "class_map", m.astype(np.int32, copy=False))
        object.__setattr__(self, "labels", tuple(self.labels))

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the frame."""
        return int(self.class_map.shape[1]), int(self.class_map.shape[0])

    def label(self, class_id: int) -> str:
        return self.labels[class_id] if 0 <= class_id < len(self.labels) and self.labels[class_id] else str(class_id)

    def areas(self) -> np.ndarray:
        """Pixel count per class id: int64 (max(id) + 1,) or longer, one entry per label."""
        return np.bincount(self.class_map.ravel(), minlength=len(self.labels))

    def classes(self) -> list[ClassArea]:
        """The classes present, largest area first."""
        counts = self.areas()
        total = max(1, self.class_map.size)
        ids = np.flatnonzero(counts)
        ids = ids[np.argsort(-counts[ids], kind="stable")]
        return [ClassArea(int(i), self.label(int(i)), int(counts[i]), float(counts[i]) / total) for i in ids]

    def mask(self, class_id: int) -> np.ndarray:
        """bool (H, W): the pixels of one class."""
        return self.class_map == class_id

    def to_list(self) -> list[dict[str, Any]]:
        """JSON-ready per-class areas: ``[{"id", "label", "area", "fraction"}, ...]``."""
        return [{"id": c.id, "label": c.label, "area": c.area, "fraction": round(c.fraction, 5)}
                for c in self.classes()]


class Region(NamedTuple):
    """One connected blob of one class. ``box`` is x1, y1, x2, y2 in frame pixels (continuous:
    a one-pixel region at (3, 4) is (3, 4, 4, 5)); ``area`` counts its pixels."""

    class_id: int
    label: str
    area: int
    box: tuple[float, float, float, float]
    centroid: tuple[float, float]


def background_id(mask: SegmentationMask) -> int | None:
    """The class id that means background: the first label named so, else 0 for a model
    without labels, else None (every class is something)."""
    for i, lab in enumerate(mask.labels):
        if lab.strip().lower() in BACKGROUND_LABELS:
            return i
    return None if mask.labels else 0


@dataclass(frozen=True)
class Segmentation:
    """A segmenter's answer for one frame: the class map and its regions."""

    mask: SegmentationMask
    regions: tuple[Region, ...] = ()

    def __len__(self) -> int:
        return len(self.regions)

    def as_detections(self) -> Detections:
        """The regions as boxes (score 1.0), for rules and zones written for a detector."""
        if not self.regions:
            return Detections.empty()
        return Detections(np.array([r.box for r in self.regions], np.float32), np.ones(len(self.regions), np.float32),
                          np.array([r.class_id for r in self.regions], np.int32),
                          tuple(r.label for r in self.regions))

    def to_list(self, ndigits: int = 2) -> list[dict[str, Any]]:
        """JSON-ready regions: ``[{"id", "label", "area", "box", "centroid"}, ...]``."""
        return [{"id": r.class_id, "label": r.label, "area": r.area, "box": [round(v, ndigits) for v in r.box],
                 "centroid": [round(v, ndigits) for v in r.centroid]} for r in self.regions]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"classes": per-class areas, "regions": [...]}``."""
        return {"classes": self.mask.to_list(), "regions": self.to_list()}
