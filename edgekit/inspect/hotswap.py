"""Hot model updates inside the running detection loop.

:class:`HotSwapEngine` is an :class:`edgekit.loop.Engine` that serves whatever version a
:class:`~edgekit.inspect.modelwatch.ModelWatcher` holds. The inference thread asks the watcher for
the model at the start of each frame (under the engine lock, between two inferences), so a
new version takes over from one frame to the next: nothing is dropped, no frame is half
run on one model and finished on another. Each frame's outputs are decoded by the engine
of the model that produced them, so a new version's labels apply from its first frame::

    watcher = ModelWatcher("models/inspection", on_event=events.emit).start()
    with HotSwapEngine(watcher, DetectorOptions(model="", threshold=0.5)) as engine:
        for result in engine.stream(VideoSource(spec)):
            ...

It is a :class:`edgekit.inspect.engine.CellDetector`, so an inspection cell runs on it as on a
:class:`edgekit.Detector`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from edgekit.inspect.modelwatch import ModelWatcher
from edgekit.preprocess import Transform
from edgekit.results import Result
from edgekit.runtimes import Model
from edgekit.tasks import DetectorOptions

if TYPE_CHECKING:
    from edgekit.loop import Stream
    from edgekit.video import VideoSource

__all__ = ["HotSwapEngine", "detector_engine"]


def detector_engine(model: Model, options: DetectorOptions) -> Any:
    """The loop engine of a detector for an already loaded (and self-tested) `model`.

    Raises:
        ModelError: the model is not a detector.
    """
    # The same engine Detector builds from a path, on the model the watcher has already
    # loaded, warmed up and self-tested.
    from edgekit.tasks import make_engine

    return make_engine(model, options)


class _Outputs(list):  # type: ignore[type-arg]
    """A frame's outputs, remembering which engine produced them."""

    engine: Any = None


class HotSwapEngine:
    """The loop's engine for the model a :class:`ModelWatcher` serves.

    Args:
        watcher: a started watcher; the engine owns it from now on (:meth:`close` closes it).
        options: detector options (``model`` is ignored: the watcher picks the file).
        build: makes the engine for a model (default: :func:`detector_engine`).
        on_switch: called with the new model after a switch, in the inference thread.
    """

    def __init__(self, watcher: ModelWatcher, options: DetectorOptions,
                 build: Callable[[Model, DetectorOptions], Any] = detector_engine,
                 on_switch: Callable[[Model], None] | None = None) -> None:
        self.lock = threading.Lock()
        self._watcher, self._options, self._build, self._on_switch = watcher, options, build, on_switch
        self._model = watcher.acquire()
        self._engine = build(self._model, options)
        self._closed = False

    @property
    def labels(self) -> list[str] | None:
        return getattr(self._engine, "labels", None)

    @property
    def model(self) -> Model:
        return self._model

    def _current(self) -> Any:
        model = self._watcher.acquire()
        if model is not self._model:
            self._engine = self._build(model, self._options)
            self._model = model
            if self._on_switch is not None:
                self._on_switch(model)
        return self._engine

    def staging(self) -> np.ndarray:
        return self._engine.staging()

    def write(self, image: np.ndarray, dest: np.ndarray | None = None, *, bgr: bool = False) -> Transform:
        if dest is None:  # a live source: straight into the input of the model about to run
            return self._current().write(image, bgr=bgr)
        # Staged ahead for a file. The watcher lets only versions with the same input shape
        # and type serve, so a buffer staged for the old version fits the new one.
        return self._engine.write(image, dest, bgr=bgr)

    def load(self, staged: np.ndarray) -> None:
        self._current().load(staged)

    def infer(self) -> list[np.ndarray]:
        out = _Outputs(self._engine.infer())
        out.engine = self._engine
        return out

    def decode(self, outputs: list[np.ndarray], transform: Transform) -> Result:
        engine = getattr(outputs, "engine", None) or self._engine
        return engine.decode(outputs, transform)

    def stream(self, source: VideoSource, *, max_frames: int | None = None,
               duration: float | None = None) -> Stream:
        """Run the loop on ``source`` with whatever version serves (one interpreter: a swap
        replaces it between two frames)."""
        from edgekit.loop import LoopOptions, Stream

        return Stream(self, source, LoopOptions(max_frames=max_frames, duration=duration))

    def close(self) -> None:
        """Stop watching the folder and release the models (safe twice)."""
        if not self._closed:
            self._closed = True
            self._watcher.close()

    def __enter__(self) -> HotSwapEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
