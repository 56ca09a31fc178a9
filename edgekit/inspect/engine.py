"""What an inspection cell needs from its detector: the seam between the cell and a model.

Two engines fit it: :class:`edgekit.Detector` (one model file) and
:class:`edgekit.inspect.hotswap.HotSwapEngine` (the best version of a model folder, swapped
while running). An embedding app may pass its own to :class:`edgekit.inspect.Cell`::

    with Detector.create_from_model_path("model.tflite", threshold=0.3) as detector, \\
            Cell(config, detector=detector) as cell:
        for decision in cell.run():
            ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Protocol

if TYPE_CHECKING:  # the cell's module imports no OpenCV or loop until a cell opens
    from edgekit.loop import LoopSummary
    from edgekit.results import FrameResult
    from edgekit.runtimes import Model
    from edgekit.sources import VideoSource

__all__ = ["CellDetector", "ResultStream"]


class ResultStream(Protocol):
    """A running loop (:class:`edgekit.loop.Stream`): one FrameResult per processed frame."""

    def __iter__(self) -> Iterator[FrameResult]: ...

    def stop(self, reason: str = ...) -> None: ...

    @property
    def summary(self) -> LoopSummary: ...

    def close(self) -> None: ...


class CellDetector(Protocol):
    """A detector engine as the cell uses it.

    ``labels`` (by class id) are checked against the rules when the cell opens; ``model`` is
    the model serving now (its path, backend and delegate go to the metrics); ``stream``
    runs the loop on a source; ``close`` releases the model(s) and is safe twice.
    """

    @property
    def labels(self) -> list[str] | None: ...

    @property
    def model(self) -> Model: ...

    def stream(self, source: VideoSource, *, max_frames: int | None = None,
               duration: float | None = None) -> ResultStream: ...

    def close(self) -> None: ...
