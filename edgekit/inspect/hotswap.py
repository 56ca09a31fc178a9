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

import os
import threading
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import numpy as np

from edgekit.inspect.modelwatch import ModelWatcher
from edgekit.preprocess import Transform
from edgekit.results import Result
from edgekit.runtimes import Model
from edgekit.tasks import DetectorOptions

if TYPE_CHECKING:
    from edgekit.loop import Stream
    from edgekit.sources import VideoSource

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


class _Outputs(list[np.ndarray]):
    """A frame's outputs, remembering which engine produced them (and, for a frame staged
    for the version before a switch, the transform of its preprocessing for the new one)."""

    engine: Any = None
    transform: Transform | None = None


class _StagedBy(NamedTuple):
    """Who preprocessed the frame in a staging buffer, from what, and into which array."""

    engine: Any
    image: np.ndarray
    bgr: bool
    buffer: np.ndarray


class HotSwapEngine:
    """The loop's engine for the model a :class:`ModelWatcher` serves.

    A new version may take another input than the old one (another size, float32 instead of
    int8): its preprocessing is built with it, in the watcher's background thread when the
    watcher was made with ``prepare`` (see :meth:`open`), and a frame already preprocessed
    for the old version is preprocessed again for the new one.

    Args:
        watcher: a started watcher; the engine owns it from now on (:meth:`close` closes it).
        options: detector options (``model`` is ignored: the watcher picks the file).
        build: makes the engine for a model (default: :func:`detector_engine`); used for a
            version the watcher has not prepared.
        on_switch: called with the new model after a switch, in the inference thread.
    """

    def __init__(self, watcher: ModelWatcher, options: DetectorOptions,
                 build: Callable[[Model, DetectorOptions], Any] = detector_engine,
                 on_switch: Callable[[Model], None] | None = None) -> None:
        self.lock = threading.Lock()
        self._watcher, self._options, self._build, self._on_switch = watcher, options, build, on_switch
        self._model = watcher.acquire()
        self._engine = self._engine_for(self._model)
        self._closed = False
        self._staged: dict[int, _StagedBy] = {}  # id(staging buffer) -> how it was filled
        self._own: tuple[Any, dict[int, np.ndarray]] = (None, {})  # buffers for a new version's input
        self._rewritten: Transform | None = None

    @classmethod
    def open(cls, root: str | os.PathLike[str], options: DetectorOptions, *, poll_seconds: float = 2.0,
             on_event: Callable[[Any, dict[str, Any]], None] | None = None,
             build: Callable[[Model, DetectorOptions], Any] = detector_engine,
             vet: Callable[[Any], str | None] | None = None) -> HotSwapEngine:
        """Watch the versioned folder ``root`` and serve its best version; each new version's
        engine (preprocessing and decoder) is built while it loads, in the background.

        ``vet`` checks a version's folder before its model is read (see :class:`ModelWatcher`).

        Raises:
            ModelError: no version in the folder can serve.
        """
        watcher = ModelWatcher(root, delegate=options.delegate, num_threads=options.num_threads,
                               poll_seconds=poll_seconds, on_event=on_event,
                               prepare=lambda model: build(model, options), vet=vet)
        watcher.start()
        try:
            return cls(watcher, options, build)
        except BaseException:
            watcher.close()
            raise

    def _engine_for(self, model: Model) -> Any:
        prepared = self._watcher.prepared
        if prepared is not None and getattr(prepared, "model", None) is model:
            return prepared
        return self._build(model, self._options)

    @property
    def labels(self) -> list[str] | None:
        return getattr(self._engine, "labels", None)

    @property
    def model(self) -> Model:
        return self._model

    def _current(self) -> Any:
        model = self._watcher.acquire()
        if model is not self._model:
            self._engine = self._engine_for(model)
            self._model = model
            if self._on_switch is not None:
                self._on_switch(model)
        return self._engine

    def staging(self) -> np.ndarray:
        return self._engine.staging()

    def write(self, image: np.ndarray, dest: np.ndarray | None = None, *, bgr: bool = False) -> Transform:
        if dest is None:  # a live source: straight into the input of the model about to run
            self._rewritten = None
            return self._current().write(image, bgr=bgr)
        # Staged ahead for a file (the preprocessing thread), while the inference thread may
        # switch versions: remember who filled the buffer, so that load() can tell.
        engine = self._engine
        buffer = dest if _fits(dest, engine) else self._own_buffer(engine, dest)
        transform = engine.write(image, buffer, bgr=bgr)
        self._staged[id(dest)] = _StagedBy(engine, image, bgr, buffer)
        return transform

    def _own_buffer(self, engine: Any, dest: np.ndarray) -> np.ndarray:
        """A buffer for `engine`'s input in place of `dest`, made for an earlier version's input."""
        owner, buffers = self._own
        if owner is not engine:
            buffers = {}
            self._own = (engine, buffers)
        if id(dest) not in buffers:
            buffers[id(dest)] = engine.staging()
        return buffers[id(dest)]

    def load(self, staged: np.ndarray) -> None:
        engine = self._current()
        by = self._staged.pop(id(staged), None)
        self._rewritten = None
        if by is None:
            engine.load(staged)
        elif by.engine is engine:
            engine.load(by.buffer)
        else:
            # Preprocessed for the version that served before this frame: do it again for this
            # one (its input size or type may differ); decode() maps the boxes with this transform.
            self._rewritten = engine.write(by.image, bgr=by.bgr)

    def infer(self) -> list[np.ndarray]:
        out = _Outputs(self._engine.infer())
        out.engine = self._engine
        out.transform = self._rewritten
        return out

    def decode(self, outputs: list[np.ndarray], transform: Transform) -> Result:
        engine = getattr(outputs, "engine", None) or self._engine
        return engine.decode(outputs, getattr(outputs, "transform", None) or transform)

    def stream(self, source: VideoSource, *, max_frames: int | None = None,
               duration: float | None = None) -> Stream:
        """Run the loop on ``source`` with whatever version serves (one interpreter: a swap
        replaces it between two frames)."""
        from edgekit.loop import LoopOptions, Stream

        return Stream(self, source, LoopOptions(max_frames=max_frames, duration=duration))

    def close(self) -> None:
        """Stop watching the folder and release the models (safe twice)."""
        self._staged.clear()
        if not self._closed:
            self._closed = True
            self._watcher.close()

    def __enter__(self) -> HotSwapEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fits(buffer: np.ndarray, engine: Any) -> bool:
    spec = getattr(engine, "spec", None)
    return spec is None or (tuple(buffer.shape) == tuple(spec.shape) and buffer.dtype == np.dtype(spec.dtype))
