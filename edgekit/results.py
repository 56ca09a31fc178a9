"""Typed results of one frame: detections, classes, timings, and drawing them.

Boxes are ``x1, y1, x2, y2`` in the ORIGINAL frame's pixels (continuous coordinates:
a box covering a whole W x H frame is ``(0, 0, W, H)``). Frames are RGB throughout::

    dets = detector.detect(frame)
    for d in dets.filter(threshold=0.6, classes=["person"]):
        print(d.label, d.score, d.box)
    annotated = draw(frame, dets)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, NamedTuple, Sequence, Union

import numpy as np

from edgekit.errors import InputError

__all__ = ["Detection", "Detections", "Classification", "Classes", "StageTimes", "FrameResult", "draw"]


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

    def __getitem__(self, key: int | slice | np.ndarray | Sequence[int]) -> Any:
        """An int gives one :class:`Detection`; a slice, index array or boolean mask gives Detections."""
        if isinstance(key, (int, np.integer)):
            return self._one(int(_select(len(self), key)[0]))
        idx = _select(len(self), key)
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


class StageTimes(NamedTuple):
    """Milliseconds one frame spent in each stage of the loop."""

    capture: float = 0.0  # read and decode (in the capture thread)
    preprocess: float = 0.0  # resize/letterbox into the input tensor
    inference: float = 0.0  # invoke and copy the outputs
    postprocess: float = 0.0  # decode outputs into Detections/Classes


Result = Union[Detections, Classes]


@dataclass(frozen=True)
class FrameResult:
    """What the loop produced for one frame.

    ``index`` counts frames captured from the source (gaps are dropped frames);
    ``timestamp`` is wall-clock seconds (Unix epoch) at capture; ``capture_ts`` the
    monotonic ``time.perf_counter()`` at capture; ``latency_ms`` capture -> result.
    ``frame`` is the RGB frame (None when the result was made without one); ``frame_bgr``
    the same pixels in OpenCV's order. Frames OpenCV decoded are converted to RGB only when
    ``frame`` is first read, so a loop that only writes results never pays for it.
    """

    index: int
    timestamp: float
    capture_ts: float
    latency_ms: float
    result: Result
    stages: StageTimes = field(default_factory=StageTimes)
    captured: Any = field(default=None, repr=False, compare=False)  # the edgekit.sources.Frame

    @property
    def frame(self) -> np.ndarray | None:
        """The RGB frame, or None."""
        return None if self.captured is None else self.captured.image

    @property
    def frame_bgr(self) -> np.ndarray | None:
        """The frame in OpenCV's BGR order, or None."""
        return None if self.captured is None else self.captured.bgr

    @property
    def detections(self) -> Detections:
        """The detections of a detector's frame.

        Raises:
            AttributeError: the frame holds a classifier's :class:`Classes`; use :attr:`classes`.
        """
        if not isinstance(self.result, Detections):
            raise AttributeError("this FrameResult holds a classifier's Classes; use .classes or .result")
        return self.result

    @property
    def classes(self) -> Classes:
        """The classes of a classifier's frame.

        Raises:
            AttributeError: the frame holds a detector's :class:`Detections`; use :attr:`detections`.
        """
        if not isinstance(self.result, Classes):
            raise AttributeError("this FrameResult holds a detector's Detections; use .detections or .result")
        return self.result

    def to_dict(self) -> dict[str, Any]:
        head = {"frame": self.index, "timestamp": round(self.timestamp, 6), "latency_ms": round(self.latency_ms, 3)}
        if not isinstance(self.result, (Detections, Classes)):  # a segmentation or poses: their own keys
            return {**head, **self.result.to_dict()}
        key = "detections" if isinstance(self.result, Detections) else "classes"
        return {**head, key: self.result.to_list()}


# One color per class id, stable across frames (RGB; golden-ratio hues are far apart).
def _color(class_id: int) -> tuple[int, int, int]:
    import cv2  # drawing only: the results themselves are numpy (edgekit.contract returns them)

    hue = int((class_id * 0.618034 % 1.0) * 180)
    hsv = np.uint8([[[hue, 200, 255]]])
    r, g, b = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0]
    return int(r), int(g), int(b)


def draw(frame: np.ndarray, result: Result, *, thickness: int = 2, copy: bool = True,
         bgr: bool = False) -> np.ndarray:
    """Draw boxes with "label score" (or a classifier's top classes) on an RGB uint8 frame
    (with ``bgr=True``, on a frame in OpenCV's BGR order: the same colors come out).

    Returns the annotated frame: a copy, or ``frame`` itself with ``copy=False``.

    Raises:
        InputError: the frame is not an (H, W, 3) uint8 array.
    """
    if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
        raise InputError(f"draw expects an RGB uint8 frame of shape (H, W, 3), got "
                         f"{getattr(frame, 'dtype', type(frame).__name__)} {np.shape(frame)}")
    import cv2

    if not isinstance(result, (Detections, Classes)):  # masks and skeletons (edgekit.tasks_vision's results)
        from edgekit.pose import draw_result

        return draw_result(frame, result, copy=copy, bgr=bgr)
    out = frame.copy() if copy else frame
    scale = max(0.4, min(out.shape[:2]) / 900)
    if isinstance(result, Classes):
        for row, c in enumerate(result):
            _text(out, f"{c.label} {c.score:.2f}", (8, 8 + row * int(30 * scale)), (255, 255, 255), scale)
        return out
    track_ids = getattr(result, "track_ids", None)  # edgekit.track's TrackedDetections: "#7 part 0.91"
    for i, d in enumerate(result):
        color = _color(d.id)[::-1] if bgr else _color(d.id)
        x1, y1, x2, y2 = (int(round(v)) for v in d.box)
        cv2.rectangle(out, (x1, y1), (max(x1, x2 - 1), max(y1, y2 - 1)), color, thickness)
        tag = f"#{int(track_ids[i])} " if track_ids is not None and track_ids[i] >= 0 else ""
        _text(out, f"{tag}{d.label} {d.score:.2f}", (x1, y1), color, scale)
    return out


def _text(img: np.ndarray, text: str, org: tuple[int, int], color: tuple[int, int, int], scale: float) -> None:
    import cv2

    font = cv2.FONT_HERSHEY_SIMPLEX
    (tw, th), base = cv2.getTextSize(text, font, scale * 0.6, 1)
    x, y = org
    top = y - th - base - 2 if y - th - base - 2 >= 0 else y  # above the box, else inside it
    cv2.rectangle(img, (x, top), (x + tw + 4, top + th + base + 2), color, cv2.FILLED)
    dark = sum(color) > 380  # dark text on light boxes
    cv2.putText(img, text, (x + 2, top + th + 1), font, scale * 0.6, (0, 0, 0) if dark else (255, 255, 255), 1,
                cv2.LINE_AA)
