"""What the accuracy gate aims at: its measures and their limits, decided here once.

No import of the measuring side: :class:`edgekit.converters.options.ConvertOptions` builds its
:class:`GateTargets` from these, :mod:`edgekit.converters.gate` checks them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from edgekit.errors import InputError

__all__ = ["GateMeasure", "GateTargets"]


class GateMeasure(enum.Enum):
    """What one check of the gate measures (the flag that sets its limit)."""

    DROP = "drop"  # --max-drop: points lost (mAP@0.5, accuracy or agreement)
    BOX_IOU = "box-iou"  # --min-box-iou: mean IoU of the matched boxes with the float model's
    SCORE_ERROR = "score-error"  # --max-score-error: mean |score - float score| of the matched boxes
    EXTRA_BOXES = "extra-boxes"  # --max-extra-boxes: boxes at the threshold the float model does not show

    @property
    def flag(self) -> str:
        return {GateMeasure.DROP: "--max-drop", GateMeasure.BOX_IOU: "--min-box-iou",
                GateMeasure.SCORE_ERROR: "--max-score-error", GateMeasure.EXTRA_BOXES: "--max-extra-boxes"}[self]


@dataclass(frozen=True)
class GateTargets:
    """The limits the gate checks; None: not checked. All None: no gate (status NOT SET)."""

    max_drop: float | None = None  # points, 0..100
    min_box_iou: float | None = None  # 0..1
    max_score_error: float | None = None  # 0..1
    max_extra_boxes: int | None = None

    def __post_init__(self) -> None:
        if self.min_box_iou is not None and not 0.0 < self.min_box_iou <= 1.0:
            raise InputError(f"min_box_iou (--min-box-iou) is an IoU in (0, 1], e.g. 0.95; got {self.min_box_iou}")
        if self.max_score_error is not None and not 0.0 <= self.max_score_error <= 1.0:
            raise InputError(f"max_score_error (--max-score-error) is a score difference in [0, 1], e.g. 0.02; "
                             f"got {self.max_score_error}")
        if self.max_extra_boxes is not None and self.max_extra_boxes < 0:
            raise InputError(f"max_extra_boxes (--max-extra-boxes) is a count, 0 or more; got {self.max_extra_boxes}")

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.max_drop, self.min_box_iou, self.max_score_error,
                                           self.max_extra_boxes))
