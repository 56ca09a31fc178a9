"""Boxes and classes of one frame: a detector's and a classifier's results, as parallel arrays.

Boxes are ``x1, y1, x2, y2`` in the ORIGINAL frame's pixels (continuous coordinates:
a box covering a whole W x H frame is ``(0, 0, W, H)``)::

    dets = detector.detect(frame)
    for d in dets.filter(threshold=0.6, classes=["person"]):
        print(d.label, d.score, d.box)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, NamedTuple, Sequence, overload

import numpy as np

from edgekit.errors import InputError

__all__ = ["Detection", "Detections", "Classification", "Classes"]


class Detection(NamedTuple):
    """One detected object. ``id`` is the class id, ``box`` is (x1, y1, x2, y2) in frame pixels."""

    id: int
    label: str
    score: float
    box: tuple[float, float, float, float]


def _select(n: int, key: Any) -> np.ndarray:
    idx = np.arange(n)[key]
    return np.atleast_1d(idx)


@dataclass(frozen=True)
class Detections:
    """The detections of one frame as parallel arrays (one row per object).

    Attributes:
        xyxy: float32 (N, 4) boxes, x1, y1, x2, y2 in original frame pixels.
        scores: float32 (N,).
        class_ids: int32 (N,).
        labels: N label strings (the id as text where the model has no label).

    Raises:
        InputError: the arrays do not line up (the message gives their shapes).
    """

    xyxy: np.ndarray
    scores: np.ndarray
    class_ids: np.ndarray
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        xyxy = np.asarray(self.xyxy, dtype=np.float32)
        if xyxy.size == 0:
            xyxy = xyxy.reshape(0, 4)
        scores = np.asarray(self.scores, dtype=np.float32).reshape(-1)
        ids = np.asarray(self.class_ids).reshape(-1)
        if xyxy.ndim != 2 or xyxy.shape[1] != 4 or len(scores) != len(xyxy) or len(ids) != len(xyxy) \
                or (self.labels and len(self.labels) != len(xyxy)):
            raise InputError(f"Detections expects xyxy (N, 4), scores (N,), class_ids (N,) and N labels; got "
                             f"xyxy {np.shape(self.xyxy)}, scores {np.shape(self.scores)}, class_ids "
                             f"{np.shape(self.class_ids)}, {len(self.labels)} labels")
        object.__setattr__(self, "xyxy", xyxy)
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "class_ids", ids.astype(np.int32))
        object.__setattr__(self, "labels", tuple(self.labels) if self.labels else tuple(str(i) for i in ids))

    @classmethod
    def empty(cls) -> Detections:
        return cls(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32))

    @property
    def boxes(self) -> np.ndarray:
        """The same as :attr:`xyxy`."""
        return self.xyxy

    def __len__(self) -> int:
        return len(self.scores)

    def __iter__(self) -> Iterator[Detection]:
        for i in range(len(self)):
            yield self._one(i)

    def _one(self, i: int) -> Detection:
        x1, y1, x2, y2 = (float(v) for v in self.xyxy[i])
        return Detection(int(self.class_ids[i]), self.labels[i], float(self.scores[i]), (x1, y1, x2, y2))

    @overload
    def __getitem__(self, key: int | np.integer) -> Detection: ...

    @overload
    def __getitem__(self, key: slice | np.ndarray | Sequence[int]) -> Detections: ...

    def __getitem__(self, key: int | np.integer | slice | np.ndarray | Sequence[int]) -> Detection | Detections:
        """An int gives one :class:`Detection`; a slice, index array or boolean mask gives Detections
        of the same kind (a subclass's extra columns, such as track ids, come along)."""
        if isinstance(key, (int, np.integer)):
            return self._one(int(_select(len(self), key)[0]))
        return self._rows(_select(len(self), key))

    def _rows(self, idx: np.ndarray) -> Detections:
        """These rows, as a new Detections; a subclass with more per-row arrays overrides it."""
        return Detections(self.xyxy[idx], self.scores[idx], self.class_ids[idx],
                          tuple(self.labels[i] for i in idx))

    def filter(self, threshold: float | None = None, classes: Iterable[str | int] | None = None) -> Detections:
        """Keep detections scoring at least ``threshold`` whose label or class id is in ``classes``."""
        keep = np.ones(len(self), dtype=bool)
        if threshold is not None:
            keep &= self.scores >= threshold
        if classes is not None:
            wanted = set(classes)
            keep &= np.array([lab in wanted or int(c) in wanted for lab, c in zip(self.labels, self.class_ids)],
                             dtype=bool).reshape(-1)
        return self if keep.all() else self[keep]

    def to_list(self, ndigits: int = 2) -> list[dict[str, Any]]:
        """JSON-ready: ``[{"id", "label", "score", "box": [x1, y1, x2, y2]}, ...]``."""
        return [{"id": d.id, "label": d.label, "score": round(d.score, 4),
                 "box": [round(v, ndigits) for v in d.box]} for d in self]


class Classification(NamedTuple):
    """One class of a classifier's answer."""

    id: int
    label: str
    score: float


@dataclass(frozen=True)
class Classes:
    """A classifier's top classes, best first, as parallel arrays.

    Raises:
        InputError: the arrays do not line up.
    """

    class_ids: np.ndarray
    scores: np.ndarray
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        ids = np.asarray(self.class_ids).reshape(-1).astype(np.int32)
        scores = np.asarray(self.scores, dtype=np.float32).reshape(-1)
        if len(ids) != len(scores) or (self.labels and len(self.labels) != len(ids)):
            raise InputError(f"Classes expects class_ids (N,), scores (N,) and N labels; got "
                             f"{np.shape(self.class_ids)}, {np.shape(self.scores)}, {len(self.labels)} labels")
        object.__setattr__(self, "class_ids", ids)
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "labels", tuple(self.labels) if self.labels else tuple(str(i) for i in ids))

    def __len__(self) -> int:
        return len(self.scores)

    def __iter__(self) -> Iterator[Classification]:
        for i, s, lab in zip(self.class_ids, self.scores, self.labels):
            yield Classification(int(i), lab, float(s))

    def __getitem__(self, i: int) -> Classification:
        return Classification(int(self.class_ids[i]), self.labels[i], float(self.scores[i]))

    @property
    def top(self) -> Classification | None:
        return self[0] if len(self) else None

    def to_list(self) -> list[dict[str, Any]]:
        return [{"id": c.id, "label": c.label, "score": round(c.score, 4)} for c in self]
