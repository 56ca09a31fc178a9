"""Connected regions of a segmentation, and drawing masks (OpenCV).

:mod:`edgekit.contract.segmentation` gives the class of every frame pixel; here that map is cut
into blobs (one :class:`Region` per connected group of pixels of one class, with its box and
area) so that rules can speak of them as of boxes ("FAIL if any scratch region > 40 px²")::

    seg = segmentation_of(mask)                  # mask: a SegmentationMask
    for r in seg.regions:                        # Region(class_id, label, area, box, centroid)
        print(r.label, r.area, r.box)
    annotated = draw_segmentation(frame, seg)    # colored classes over the frame
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, NamedTuple

import cv2
import numpy as np

from edgekit.contract.segmentation import SegmentationMask
from edgekit.errors import InputError
from edgekit.results import Detections, _color, _text

__all__ = ["Region", "Segmentation", "find_regions", "segmentation_of", "draw_segmentation", "BACKGROUND_LABELS"]

# Labels that name "nothing here"; class 0 is background when a model has no labels at all.
BACKGROUND_LABELS = frozenset({"background", "bg", "__background__", "none", "???"})
MAX_REGION_LABELS = 20  # draw_segmentation writes "label area" on the largest regions only


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


def find_regions(mask: SegmentationMask, *, background: int | None | str = "auto", min_area: int = 1,
                 classes: Iterable[int | str] | None = None, connectivity: int = 8) -> tuple[Region, ...]:
    """The connected regions of every class but the background, largest first.

    ``background`` "auto" uses :func:`background_id`; None counts every class. ``classes``
    keeps only these class ids or labels. ``connectivity`` 8 joins diagonal neighbours, 4 does not.

    Raises:
        InputError: ``connectivity`` is not 4 or 8, or ``min_area`` is negative.
    """
    if connectivity not in (4, 8) or min_area < 0:
        raise InputError(f"connectivity must be 4 or 8 and min_area >= 0, got {connectivity} and {min_area}")
    bg = background_id(mask) if background == "auto" else background
    wanted = None if classes is None else set(classes)
    counts = mask.areas()
    out: list[Region] = []
    for c in np.flatnonzero(counts):
        label = mask.label(int(c))
        if c == bg or (wanted is not None and int(c) not in wanted and label not in wanted):
            continue
        binary = (mask.class_map == c).view(np.uint8)
        # Labelling costs per pixel looked at: only the window the class occupies.
        x0, y0, bw, bh = cv2.boundingRect(binary)
        n, _, stats, centroids = cv2.connectedComponentsWithStats(binary[y0:y0 + bh, x0:x0 + bw],
                                                                  connectivity=connectivity)
        for i in range(1, n):  # 0 is everything not of this class
            x, y, w, h, area = (int(v) for v in stats[i])
            if area >= max(min_area, 1):
                x, y = x + x0, y + y0
                cx, cy = centroids[i]
                out.append(Region(int(c), label, area, (float(x), float(y), float(x + w), float(y + h)),
                                  (float(cx) + x0 + 0.5, float(cy) + y0 + 0.5)))
    out.sort(key=lambda r: -r.area)
    return tuple(out)


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


def segmentation_of(mask: SegmentationMask, *, min_area: int = 1, background: int | None | str = "auto",
                    classes: Iterable[int | str] | None = None) -> Segmentation:
    """``mask`` and its regions (see :func:`find_regions`)."""
    return Segmentation(mask, find_regions(mask, min_area=min_area, background=background, classes=classes))


def _palette(n: int, bgr: bool) -> np.ndarray:
    colors = np.array([_color(i) for i in range(n)], dtype=np.uint8).reshape(n, 3)
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
    if boxes and isinstance(seg, Segmentation):
        scale = max(0.4, min(out.shape[:2]) / 900)
        palette = _palette(max(r.class_id for r in seg.regions) + 1, bgr) if seg.regions else None
        for n, r in enumerate(seg.regions):  # largest first
            color = tuple(int(v) for v in palette[r.class_id])  # type: ignore[index]
            x1, y1, x2, y2 = (int(v) for v in r.box)
            cv2.rectangle(out, (x1, y1), (max(x1, x2 - 1), max(y1, y2 - 1)), color, 1)
            if n < MAX_REGION_LABELS:  # text is what costs (about 0.1 ms a label) and clutters
                _text(out, f"{r.label} {r.area}px", (x1, y1), color, scale)  # type: ignore[arg-type]
    return out
