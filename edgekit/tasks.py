"""Detector and Classifier: a model, its preprocessing and its decoder, ready for frames.

Frames are RGB uint8 (H, W, 3) throughout edgekit; sources read with OpenCV are
converted once when captured (``cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)`` for your own)::

    from edgekit import Detector, draw

    with Detector.create_from_model_path("ssd.tflite", threshold=0.5) as detector:
        dets = detector.detect(frame)                    # one frame -> Detections
        for result in detector.stream("rtsp://cam/1"):   # a source -> FrameResult per frame
            print(result.index, result.latency_ms, [d.label for d in result.detections])
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence, TypeVar, Union, overload

import numpy as np

from edgekit.contract import Decoder, OutputFormat, ResizeMode, Transform
from edgekit.contract.decode import decoder_for
from edgekit.contract.modelreading import ModelReading
from edgekit.contract.preprocessing import PreprocessingSpec
from edgekit.engine import ModelEngine
from edgekit.errors import InputError, ModelError
from edgekit.labels import align_labels, detector_labels_note, load_labels
from edgekit.results import Classes, Detections
from edgekit.runtimes.delegates import Delegate, DelegateSpec
from edgekit.runtimes.loader import load_model
from edgekit.runtimes.model import Model

if TYPE_CHECKING:  # the loop and the sources load when a task streams (classify never does: start-up)
    from edgekit.loop import LoopSummary, Performance, Stream
    from edgekit.results import FrameResult, Result
    from edgekit.sources import Reconnect, SourceSpec, VideoSource

__all__ = ["TaskOptions", "DetectorOptions", "ClassifierOptions", "Detector", "Classifier", "ModelEngine",
           "make_engine"]

SourceLike = Union["VideoSource", "SourceSpec", str, int, "os.PathLike[str]"]

@dataclass(frozen=True)
class TaskOptions:
    """What every task needs. ``labels``/``resize`` of None come from the model's metadata."""

    model: str | os.PathLike[str]
    labels: str | os.PathLike[str] | Sequence[str] | None = None
    resize: ResizeMode | str | None = None
    delegate: Delegate | DelegateSpec | str = Delegate.AUTO  # a name, "edgetpu:usb:1", or either parsed
    num_threads: int | None = None
    warmup: int = 2  # inferences before the first frame (the Edge TPU's first one is slow)
    # Try the file in a child process before loading it (see edgekit.runtimes.isolation);
    # None: the EDGEKIT_ISOLATE variable, else off. The CLI passes True for files users copy in.
    isolate: bool | None = None


@dataclass(frozen=True)
class DetectorOptions(TaskOptions):
    """A Detector's options: TaskOptions, and which detections to keep."""

    # None: the model's metadata (detection.score_threshold / iou_threshold / max_det), else 0.5, 0.45, 100
    threshold: float | None = None
    classes: Sequence[str | int] | None = None  # keep only these labels or class ids
    iou_threshold: float | None = None  # YOLO NMS
    max_detections: int | None = None


@dataclass(frozen=True)
class ClassifierOptions(TaskOptions):
    """A Classifier's options: TaskOptions, and how many classes to report."""

    top_k: int = 5
    threshold: float = 0.0


def _labels(option: Any, reading: ModelReading) -> list[str] | None:
    """The labels a task uses: the option's (a file or a list), else the model reading's."""
    if option is None:
        return list(reading.labels) or None
    if isinstance(option, (str, os.PathLike)):
        return load_labels(option)
    return [str(x) for x in option]


def _option_labels(labels: list[str] | None, reading: ModelReading) -> list[str] | None:
    """``labels`` when they are not the reading's own (so the reading marks them as the caller's)."""
    return None if labels is None or tuple(labels) == reading.labels else labels


def make_engine(model: Model, options: DetectorOptions | ClassifierOptions) -> ModelEngine:
    """The loop engine for an already loaded ``model``, configured by ``options`` (its ``model``,
    ``delegate``, ``num_threads`` and ``warmup`` fields are not used here). The model's reading
    (:meth:`~edgekit.runtimes.model.Model.reading`) decides the format, layout, preprocessing and
    labels; the options override what they set.

    Raises:
        ModelError: the model is not the kind of model the options are for.
        InputError: an option is out of range, or ``classes`` names a label the model lacks.
    """
    reading = model.reading()
    labels = _labels(options.labels, reading)
    detector = isinstance(options, DetectorOptions)
    if (reading.format is OutputFormat.CLASSES) == detector:
        raise ModelError(_wrong_task(model, reading.format, "detector" if detector else "classifier"))
    note = None
    if isinstance(options, DetectorOptions):
        reading = reading.with_options(labels=_option_labels(labels, reading), resize=options.resize,
                                       threshold=options.threshold, iou_threshold=options.iou_threshold,
                                       max_detections=options.max_detections)
        decoder = decoder_for(reading)
        decode = _keep_classes(decoder, _check_classes(options.classes, labels))
        threshold: float | None = reading.decoder.threshold
        if labels is not None:  # the SSD op's num_classes, else the YOLO head's rows
            yolo = decoder.class_count(model.outputs) if isinstance(decoder, Decoder) else None
            note = detector_labels_note(labels, model.info.num_classes if yolo is None else yolo,
                                        background=yolo is None)
    else:
        threshold = options.threshold
        if labels is not None:
            labels, note = align_labels(labels, int(np.prod(model.outputs[0].shape)))
        reading = reading.with_options(labels=_option_labels(labels, reading), resize=options.resize,
                                       threshold=options.threshold, top_k=options.top_k)
        decode = decoder_for(reading)
    engine = ModelEngine(model, reading.preprocessing, decode, labels, note, reading=reading)
    engine.threshold = threshold  # the score threshold in effect (the options', else the model's)
    return engine


def _wrong_task(model: Model, fmt: OutputFormat, kind: str) -> str:
    shapes = [list(o.shape) for o in model.outputs]
    other = {OutputFormat.CLASSES: "Classifier (`edgekit classify`)", OutputFormat.SEGMENTATION:
             "Segmenter (`edgekit segment`)", OutputFormat.KEYPOINTS: "PoseEstimator (`edgekit pose`)"
             }.get(fmt, "Detector (`edgekit detect`)")
    return f"model {model.path!r} is not a {kind} (its outputs {shapes} read as {fmt.value}); use {other}"


def _keep_classes(decoder: Callable[[list[np.ndarray], Transform], Result],
                  wanted: set[str | int] | None) -> Callable[[list[np.ndarray], Transform], Result]:
    if wanted is None:
        return decoder

    def keep(outputs: list[np.ndarray], transform: Transform) -> Result:
        found = decoder(outputs, transform)
        return found.filter(classes=wanted) if isinstance(found, Detections) else found

    return keep


def _check_classes(classes: Sequence[str | int] | None, labels: Sequence[str] | None) -> set[str | int] | None:
    if not classes:
        return None
    known = set(labels or ())
    for c in classes:
        if isinstance(c, str) and not c.isdigit() and c not in known:
            import difflib  # only for an unknown class (start-up time)

            close = difflib.get_close_matches(c, sorted(known), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else \
                (" The model has no labels: give class ids, or --labels." if not known else "")
            raise InputError(f"unknown class {c!r}: not one of the model's labels.{hint}")
    return {int(c) if isinstance(c, str) and c.isdigit() else c for c in classes}


_T = TypeVar("_T", bound="_Task")


def _options_kind(task: _Task) -> str:
    kind, wanted = type(task).__name__, type(task)._options_type.__name__
    return f"a {kind} is made with {wanted}, got {type(task.options).__name__}: {kind}({wanted}(model=...))"


class _Task:
    """What Detector and Classifier share: loading, the engine, streams, closing."""

    _options_type: ClassVar[type[TaskOptions]]

    @classmethod
    def create_from_options(cls: type[_T], options: Any) -> _T:
        """The task for ``options``, an instance of its options class (:class:`DetectorOptions` for a
        :class:`Detector`, ...)."""
        return cls(options)

    @classmethod
    def create_from_model_path(cls: type[_T], path: str | os.PathLike[str], **options: Any) -> _T:
        """The task for the model at ``path``; keyword arguments are its options class's fields."""
        return cls(cls._options_type(model=path, **options))

    def __init__(self, options: TaskOptions, model: Model | None = None) -> None:
        """``model``: the options' model, loaded already (the task owns it from here and closes it)."""
        self.options = options
        self.model = model if model is not None else \
            load_model(options.model, options.delegate, options.num_threads, isolate=options.isolate)
        try:
            self._engine = self._build_engine(self.model)
            self.warmup_ms = self._engine.warm_up(options.warmup)
            self._check_values()
        except BaseException:
            self.model.close()
            raise
        self._streams: list[Stream] = []
        self._workers: list[ModelEngine] | None = None  # for Performance.THROUGHPUT, made when first needed
        self._workers_lock = threading.Lock()

    def _build_engine(self, model: Model) -> ModelEngine:
        """The engine for ``model`` (a task of another kind, e.g. edgekit.tasks_vision's, builds its own)."""
        if not isinstance(self.options, (DetectorOptions, ClassifierOptions)):
            raise InputError(_options_kind(self))
        return make_engine(model, self.options)

    def _check_values(self) -> None:
        """Shapes can agree by chance, values seldom do: run a gray frame and look at the outputs.

        The verdict is remembered beside the file's isolation pass (edgekit.runtimes.passed): the
        same bytes, format, interpreter, delegate and preprocessing give the same outputs, so a
        file that passed here before costs no inference.

        Raises:
            ModelError: they cannot be the format's (see edgekit.contract.readings.implausible).
        """
        from edgekit.contract.readings import implausible
        from edgekit.runtimes.passed import check_passed, remember_check

        fmt = self.reading.format
        check = (f"values|{fmt.value}|{self.model.backend}|{self.model.delegate.value}|"
                 f"{self._engine.pre.describe()}")
        if check_passed(self.model.path, check):
            return
        w, h = self._engine.size
        with self._engine.lock:
            self._engine.write(np.full((h, w, 3), 128, np.uint8))
            why = implausible(fmt, self._engine.infer(), quantized=any(o.quantized for o in self.model.outputs))
        if why:
            raise ModelError(f"model {self.model.path!r} has the outputs of a {fmt.value} model, but {why}; if it "
                             "is another kind of model, say which with `edgekit meta MODEL --output-format FORMAT`")
        remember_check(self.model.path, check)

    @property
    def reading(self) -> ModelReading:
        """What edgekit made of the model at load, with this task's options (see edgekit.contract.modelreading)."""
        reading = self._engine.reading
        if reading is None:
            raise ModelError(f"model {self.model.path!r}: its engine was built without a reading")
        return reading

    @property
    def labels(self) -> list[str] | None:
        """The labels in use (by class id), or None when the model has none."""
        return self._engine.labels

    @property
    def labels_note(self) -> str | None:
        """Set when the labels do not line up with the model's outputs."""
        return self._engine.note

    @property
    def input_size(self) -> tuple[int, int]:
        """The model input's (width, height)."""
        return self._engine.size

    @property
    def resize(self) -> ResizeMode:
        return self._engine.resize

    @property
    def preprocessing(self) -> PreprocessingSpec:
        """How frames are fed to the model, and where each setting came from."""
        return self._engine.pre

    @property
    def threshold(self) -> float | None:
        """The score threshold in effect: the options', else the model's metadata's, else the default."""
        return getattr(self._engine, "threshold", None)

    def _tracking(self) -> Callable[[Result], Result]:
        """The step ``stream(track=True)`` runs on each result, in frame order."""
        if not isinstance(self, Detector):
            raise InputError(f"track=True follows boxes from frame to frame; a {type(self).__name__} gives none "
                             "(track with a Detector)")
        from edgekit.track import ByteTracker

        tracker = ByteTracker.at_threshold(self.threshold or 0.5)
        return lambda r: tracker.follow(r) if isinstance(r, Detections) else r

    @overload
    def stream(self, source: SourceLike, *, callback: None = None, realtime: bool = False,
               max_frames: int | None = None, duration: float | None = None,
               reconnect: Reconnect | None = None, performance: Performance | str = "auto",
               track: bool = False) -> Stream: ...

    @overload
    def stream(self, source: SourceLike, *, callback: Callable[[FrameResult], Any], realtime: bool = False,
               max_frames: int | None = None, duration: float | None = None,
               reconnect: Reconnect | None = None, performance: Performance | str = "auto",
               track: bool = False) -> LoopSummary: ...

    def stream(self, source: SourceLike, *, callback: Callable[[FrameResult], Any] | None = None,
               realtime: bool = False, max_frames: int | None = None, duration: float | None = None,
               reconnect: Reconnect | None = None, performance: Performance | str = "auto",
               track: bool = False) -> Stream | LoopSummary:
        """Run the pipelined loop on ``source`` (see :mod:`edgekit.loop`).

        Without ``callback``: returns a :class:`~edgekit.loop.Stream` to iterate for one
        :class:`FrameResult` per frame (its ``.summary`` holds the figures). With it: calls
        ``callback(result)`` for each frame until the source ends and returns the
        :class:`~edgekit.loop.LoopSummary`. ``performance`` (see
        :class:`~edgekit.loop.Performance`): AUTO runs a file or folder on two single-threaded
        interpreters for throughput, and everything live on one for latency. ``track`` (detectors):
        ByteTrack in frame order (:meth:`edgekit.track.ByteTracker.follow`): each result is the
        :class:`~edgekit.track.TrackedDetections` on a confirmed track, each with its track id.

        Raises:
            SourceError: the source cannot be opened (now) or fails for good (while iterating).
            InputError: ``performance`` is not one of auto, latency, throughput; ``track`` on a task
                that gives no boxes.
        """
        from edgekit.loop import LoopOptions, Stream, performance_of
        from edgekit.sources import Reconnect, SourceSpec, VideoSource, parse_source

        perf = performance_of(performance)
        then = self._tracking() if track else None
        src = source if isinstance(source, VideoSource) else VideoSource(
            source if isinstance(source, SourceSpec) else parse_source(source, realtime=realtime),
            reconnect=reconnect if reconnect is not None else Reconnect())
        workers = self._throughput_workers(src.spec, perf)
        s = Stream(self._engine, src, LoopOptions(max_frames=max_frames, duration=duration, performance=perf),
                   workers=workers, then=then)
        self._streams = [t for t in self._streams if not t.closed] + [s]
        if callback is None:
            return s
        with s:
            for result in s:
                callback(result)
        return s.summary

    def _throughput_workers(self, spec: SourceSpec, perf: Performance) -> list[ModelEngine]:
        """The engines a file or folder runs on for THROUGHPUT (see Performance); [] for LATENCY.

        The task's own engine is one of them when its interpreter has a worker's thread count
        (`edgekit detect` loads it so for a file: see :func:`throughput_threads`), so the model is
        in memory only as often as there are workers."""
        from edgekit.loop import THROUGHPUT_WORKERS, throughput_threads

        threads = throughput_threads(spec, perf, self.options.num_threads)
        if threads is None or self.model.delegate is Delegate.EDGETPU:
            return []  # one Edge TPU is one device: a second interpreter would only queue on it
        with self._workers_lock:
            if self._workers is None:
                own = [self._engine] if self.model.num_threads == threads else []
                engines: list[ModelEngine] = []
                try:
                    for _ in range(THROUGHPUT_WORKERS - len(own)):
                        # The file was checked (and tried in a child process, if asked) when the task loaded it.
                        model = load_model(self.model.path, self.model.delegate, threads, isolate=False)
                        engines.append(self._build_engine(model))
                        engines[-1].warm_up(min(self.options.warmup, 2))
                except BaseException:
                    for e in engines:
                        e.model.close()
                    raise
                self._workers = own + engines
            return self._workers

    def close(self) -> None:
        """Stop running streams and release the model. Safe to call more than once."""
        for s in self._streams:
            s.close()
        self._streams.clear()
        for e in self._workers or []:
            if e is not self._engine:
                e.model.close()
        self._workers = None
        self.model.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Detector(_Task):
    """Objects in frames, from an SSD or raw YOLO ``.tflite`` model.

    Raises (on creation):
        ModelError: the model is missing, malformed, or not a detector.
        InputError: an option is out of range, or ``classes`` names a label the model lacks.
    """

    options: DetectorOptions
    _options_type = DetectorOptions


    def detect(self, frame: np.ndarray) -> Detections:
        """Objects in one RGB uint8 (H, W, 3) frame, boxes in its pixels.

        Raises:
            InputError: the frame is not RGB uint8 (H, W, 3).
        """
        return self._engine.run(frame)  # type: ignore[return-value]


class Classifier(_Task):
    """The top classes of frames, from a classification ``.tflite`` model.

    Raises (on creation):
        ModelError: the model is missing, malformed, or not a classifier.
    """

    options: ClassifierOptions
    _options_type = ClassifierOptions


    def classify(self, frame: np.ndarray) -> Classes:
        """The top classes of one RGB uint8 (H, W, 3) frame.

        Raises:
            InputError: the frame is not RGB uint8 (H, W, 3).
        """
        return self._engine.run(frame)  # type: ignore[return-value]
