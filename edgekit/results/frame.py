"""What the loop produced for one frame: its result (whichever task made it) and its timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, Union

import numpy as np

from edgekit.results.detections import Classes, Detections

if TYPE_CHECKING:
    from edgekit.results.masks import Segmentation
    from edgekit.results.poses import Poses

__all__ = ["StageTimes", "Result", "FrameResult"]


class StageTimes(NamedTuple):
    """Milliseconds one frame spent in each stage of the loop."""

    capture: float = 0.0  # read and decode (in the capture thread)
    preprocess: float = 0.0  # resize/letterbox into the input tensor
    inference: float = 0.0  # invoke and copy the outputs
    postprocess: float = 0.0  # decode outputs into Detections/Classes


# Every task's answer for one frame: a detector's, a classifier's, a segmenter's and a pose
# estimator's. Declared here once; decoders, tasks and the loop use it. At run time it is made when
# first asked for (__getattr__ below), with the masks and poses it names: a detector's or a
# classifier's run never loads them (start-up time).
if TYPE_CHECKING:
    Result = Union[Detections, Classes, Segmentation, Poses]
    _R = TypeVar("_R", Detections, Classes, Segmentation, Poses)


def __getattr__(name: str) -> Any:
    if name != "Result":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from edgekit.results.masks import Segmentation
    from edgekit.results.poses import Poses

    union = Union[Detections, Classes, Segmentation, Poses]
    globals()["Result"] = union
    return union


def _held() -> dict[type, tuple[str, str]]:
    """Each task's result type: what it is called, and the attribute that gives it."""
    from edgekit.results.masks import Segmentation
    from edgekit.results.poses import Poses

    return {Detections: ("a detector's Detections", "detections"), Classes: ("a classifier's Classes", "classes"),
            Segmentation: ("a segmenter's Segmentation", "segmentation"), Poses: ("a pose estimator's Poses", "poses")}


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
            AttributeError: the frame holds another task's result; use :attr:`result`.
        """
        return self._as(Detections, "a detector's Detections")

    @property
    def classes(self) -> Classes:
        """The classes of a classifier's frame.

        Raises:
            AttributeError: the frame holds another task's result; use :attr:`result`.
        """
        return self._as(Classes, "a classifier's Classes")

    @property
    def segmentation(self) -> Segmentation:
        """The segmentation of a segmenter's frame.

        Raises:
            AttributeError: the frame holds another task's result; use :attr:`result`.
        """
        from edgekit.results.masks import Segmentation

        return self._as(Segmentation, "a segmenter's Segmentation")

    @property
    def poses(self) -> Poses:
        """The poses of a pose estimator's frame.

        Raises:
            AttributeError: the frame holds another task's result; use :attr:`result`.
        """
        from edgekit.results.poses import Poses

        return self._as(Poses, "a pose estimator's Poses")

    def _as(self, kind: type[_R], what: str) -> _R:
        if not isinstance(self.result, kind):
            held = next(((w, a) for k, (w, a) in _held().items() if isinstance(self.result, k)),
                        (type(self.result).__name__, "result"))
            raise AttributeError(f"this FrameResult holds {held[0]}, not {what}; use .{held[1]} or .result")
        return self.result

    def to_dict(self) -> dict[str, Any]:
        head = {"frame": self.index, "timestamp": round(self.timestamp, 6), "latency_ms": round(self.latency_ms, 3)}
        if not isinstance(self.result, (Detections, Classes)):  # a segmentation or poses: their own keys
            return {**head, **self.result.to_dict()}
        key = "detections" if isinstance(self.result, Detections) else "classes"
        return {**head, key: self.result.to_list()}
