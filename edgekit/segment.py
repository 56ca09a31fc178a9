"""Connected regions of a segmentation (OpenCV).

:mod:`edgekit.contract.segmentation` gives the class of every frame pixel; here that map is cut
into blobs (one :class:`Region` per connected group of pixels of one class, with its box and
area) so that rules can speak of them as of boxes ("FAIL if any scratch region > 40 px²")::

    seg = segmentation_of(mask)                  # mask: a SegmentationMask
    for r in seg.regions:                        # Region(class_id, label, area, box, centroid)
        print(r.label, r.area, r.box)
    annotated = draw_segmentation(frame, seg)    # edgekit.drawing: colored classes over the frame

The values (:class:`Region`, :class:`Segmentation`) live in :mod:`edgekit.results`.
"""

from __future__ import annotations

from typing import Iterable

import cv2
import numpy as np

from edgekit.drawing import draw_segmentation
from edgekit.errors import InputError
from edgekit.results.masks import BACKGROUND_LABELS, Region, Segmentation, SegmentationMask, background_id

__all__ = ["Region", "Segmentation", "find_regions", "segmentation_of", "draw_segmentation", "BACKGROUND_LABELS",
           "background_id"]


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



def segmentation_of(mask: SegmentationMask, *, min_area: int = 1, background: int | None | str = "auto",
                    classes: Iterable[int | str] | None = None) -> Segmentation:
    """``mask`` and its regions (see :func:`find_regions`)."""
    return Segmentation(mask, find_regions(mask, min_area=min_area, background=background, classes=classes))
