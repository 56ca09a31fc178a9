"""The people of one frame: keypoints in source-frame pixels, as parallel arrays (numpy only).

Decoded from MoveNet's outputs by :mod:`edgekit.contract.keypoints`::

    for pose in poses:                       # Pose(score, keypoints, keypoint_scores, box)
        print(pose.score, pose.keypoints[0])  # the nose, (x, y) in frame pixels
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

import numpy as np

from edgekit.errors import InputError

__all__ = ["Pose", "Poses", "COCO_KEYPOINTS", "COCO_SKELETON"]

COCO_KEYPOINTS = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
                  "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip", "left_knee",
                  "right_knee", "left_ankle", "right_ankle")
# Bones between COCO keypoints, by index (what MoveNet's documentation draws).
COCO_SKELETON = ((0, 1), (0, 2), (1, 3), (2, 4), (0, 5), (0, 6), (5, 7), (7, 9), (6, 8), (8, 10), (5, 6),
                 (5, 11), (6, 12), (11, 12), (11, 13), (13, 15), (12, 14), (14, 16))


class Pose(NamedTuple):
    """One person. ``keypoints`` (K, 2) x, y in frame pixels; ``box`` x1, y1, x2, y2 or None."""

    score: float
    keypoints: np.ndarray
    keypoint_scores: np.ndarray
    box: tuple[float, float, float, float] | None


@dataclass(frozen=True)
class Poses:
    """The people of one frame as parallel arrays.

    Attributes:
        keypoints: float32 (N, K, 2) x, y in source-frame pixels.
        keypoint_scores: float32 (N, K).
        scores: float32 (N,) one per person (single-pose models: the mean keypoint score).
        boxes: float32 (N, 4) x1, y1, x2, y2 in frame pixels, or None when the model gives none.
        names: K keypoint names.
        skeleton: pairs of keypoint indices to join when drawing.

    Raises:
        InputError: the arrays do not line up.
    """

    keypoints: np.ndarray
    keypoint_scores: np.ndarray
    scores: np.ndarray
    boxes: np.ndarray | None = None
    names: tuple[str, ...] = COCO_KEYPOINTS
    skeleton: tuple[tuple[int, int], ...] = COCO_SKELETON
    handedness: tuple[str, ...] | None = None  # hand models: "Left" or "Right", one a hand

    def __post_init__(self) -> None:
        kp = np.asarray(self.keypoints, dtype=np.float32)
        ks = np.asarray(self.keypoint_scores, dtype=np.float32)
        sc = np.asarray(self.scores, dtype=np.float32).reshape(-1)
        if kp.size == 0:
            kp = kp.reshape(0, len(self.names), 2)
            ks = ks.reshape(0, len(self.names))
        bx = None if self.boxes is None else np.asarray(self.boxes, dtype=np.float32).reshape(-1, 4)
        if kp.ndim != 3 or kp.shape[2] != 2 or ks.shape != kp.shape[:2] or len(sc) != len(kp) \
                or (bx is not None and len(bx) != len(kp)):
            raise InputError(f"Poses expects keypoints (N, K, 2), keypoint_scores (N, K), scores (N,) and boxes "
                             f"(N, 4) or None; got {kp.shape}, {ks.shape}, {sc.shape}, "
                             f"{None if bx is None else bx.shape}")
        for name, value in (("keypoints", kp), ("keypoint_scores", ks), ("scores", sc), ("boxes", bx)):
            object.__setattr__(self, name, value)
        if len(self.names) != kp.shape[1]:  # a model with other keypoints than COCO's: name them by index
            object.__setattr__(self, "names", tuple(str(i) for i in range(kp.shape[1])))
            object.__setattr__(self, "skeleton", ())

    def __len__(self) -> int:
        return len(self.scores)

    def __iter__(self) -> Iterator[Pose]:
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, i: int) -> Pose:
        b = None if self.boxes is None else [float(v) for v in self.boxes[i]]
        box = None if b is None else (b[0], b[1], b[2], b[3])
        return Pose(float(self.scores[i]), self.keypoints[i], self.keypoint_scores[i], box)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"poses": [...]}`` (see :meth:`to_list`)."""
        return {"poses": self.to_list()}

    def to_list(self, ndigits: int = 2) -> list[dict[str, Any]]:
        """JSON-ready: ``[{"score", "box", "keypoints": [{"name", "x", "y", "score"}, ...]}, ...]``."""
        out: list[dict[str, Any]] = []
        for p in self:
            kps = [{"name": n, "x": round(float(x), ndigits), "y": round(float(y), ndigits), "score": round(float(s), 4)}
                   for n, (x, y), s in zip(self.names, p.keypoints, p.keypoint_scores)]
            row: dict[str, Any] = {"score": round(p.score, 4), "keypoints": kps}
            if p.box is not None:
                row["box"] = [round(v, ndigits) for v in p.box]
            if self.handedness is not None:
                row["handedness"] = self.handedness[len(out)]
            out.append(row)
        return out
