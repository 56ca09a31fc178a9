"""Moved to the model contract: mAP is :func:`edgekit.contract.map50`, decoding is the device's
(:mod:`edgekit.contract.decode`, used by :mod:`edgekit.converters.evaluate`). This name stays for
old imports of ``ImageDetections`` and ``map50``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from edgekit.contract.metrics import box_iou, map50

__all__ = ["ImageDetections", "map50", "box_iou"]


class ImageDetections(NamedTuple):
    """Detections in one image: boxes (K, 4) as x1, y1, x2, y2; scores (K,); classes (K,).
    (:class:`edgekit.results.Detections` is the type to use; :func:`map50` takes either.)"""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray

    def above(self, score: float) -> ImageDetections:
        keep = self.scores >= score
        return ImageDetections(self.boxes[keep], self.scores[keep], self.classes[keep])

    def __len__(self) -> int:  # type: ignore[override]
        return int(self.scores.shape[0])
