"""Segmenter and PoseEstimator: the same shape as Detector (options, ``create_from_*``, ``stream``).

::

    from edgekit import Segmenter, PoseEstimator

    with Segmenter.create_from_model_path("deeplab.tflite", min_area=20) as segmenter:
        seg = segmenter.segment(frame)                   # Segmentation: class map, areas, regions
        print(seg.mask.to_list(), [(r.label, r.area, r.box) for r in seg.regions])

    with PoseEstimator.create_from_model_path("movenet.tflite") as poses:
        for pose in poses.estimate(frame):               # Pose(score, keypoints (K, 2), keypoint_scores, box)
            print(pose.score, pose.keypoints[0])         # the nose, in frame pixels

The model's reading (:meth:`edgekit.runtimes.model.Model.reading` for the task) decides the format,
layout, labels and preprocessing: a model whose outputs read as another task's is refused, naming
the command to use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from edgekit.contract import OutputFormat, Task, Transform
from edgekit.contract.keypoints import PoseLayout, Poses, decode_hand_landmarks, decode_poses
from edgekit.contract.modelreading import ModelReading, read_model
from edgekit.contract.segmentation import SegmentationLayout, decode_segmentation
from edgekit.errors import InputError, ModelError
from edgekit.results import Result
from edgekit.runtimes.model import Model
from edgekit.segment import Segmentation, segmentation_of
from edgekit.tasks import ModelEngine, TaskOptions, _labels, _options_kind, _Task

__all__ = ["SegmenterOptions", "PoseEstimatorOptions", "Segmenter", "PoseEstimator", "make_vision_engine",
           "segmenter_for"]


@dataclass(frozen=True)
class SegmenterOptions(TaskOptions):
    threshold: float = 0.5  # one-channel (foreground) models: the probability that makes a pixel class 1
    min_area: int = 1  # regions of fewer pixels are left out
    classes: Sequence[str | int] | None = None  # regions of these labels or class ids only
    regions: bool = True  # cut the mask into connected regions (boxes, areas)


@dataclass(frozen=True)
class PoseEstimatorOptions(TaskOptions):
    threshold: float = 0.2  # a person's score (single-pose models: the mean keypoint score)


def _check_fraction(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise InputError(f"{name} must be between 0 and 1, got {value}")


def _engine(model: Model, reading: ModelReading, options: TaskOptions,
            decode: Callable[[list[np.ndarray], Transform], Result], labels: list[str] | None,
            note: str | None = None) -> ModelEngine:
    reading = reading.with_options(resize=options.resize)
    return ModelEngine(model, reading.preprocessing, decode, labels, note, reading=reading)


def _segmenter(model: Model, options: SegmenterOptions) -> ModelEngine:
    _check_fraction("threshold", options.threshold)
    if options.min_area < 0:
        raise InputError(f"min_area must be 0 or more pixels, got {options.min_area}")
    reading = model.reading(Task.SEGMENT)
    labels = _labels(options.labels, reading)
    out = model.outputs[0]
    layout = reading.segmentation
    if layout is SegmentationLayout.FOREGROUND and labels and len(labels) == 1:
        labels = ["background", labels[0]]  # one label of a foreground score (MediaPipe's "selfie") names class 1
    names = tuple(labels or ())
    classes = list(options.classes) if options.classes else None

    def decode(outputs: list[np.ndarray], transform: Transform) -> Segmentation:
        mask = decode_segmentation(outputs[0], transform, layout=layout, labels=names, threshold=options.threshold)
        if not options.regions:
            return Segmentation(mask)
        return segmentation_of(mask, min_area=options.min_area, classes=classes)

    note = None
    if labels and layout is SegmentationLayout.SCORES and out.shape[-1] != len(labels):
        note = f"the model scores {out.shape[-1]} classes but has {len(labels)} labels"
    return _engine(model, reading, options, decode, labels, note)


def _pose(model: Model, options: PoseEstimatorOptions) -> ModelEngine:
    _check_fraction("threshold", options.threshold)
    reading = model.reading(Task.POSE)
    layout: PoseLayout | None = reading.pose
    if layout is PoseLayout.HAND:
        size = reading.input.size if reading.input is not None else (1, 1)  # (no image input: the engine refuses)
        names = reading.labels or ("Left", "Right")  # the handedness scores' two classes

        def hand(outputs: list[np.ndarray], transform: Transform) -> Poses:
            return decode_hand_landmarks(outputs, transform, size, threshold=options.threshold, labels=names)

        return _engine(model, reading, options, hand, None)

    def decode(outputs: list[np.ndarray], transform: Transform) -> Poses:
        return decode_poses(outputs[0], transform, layout=layout, threshold=options.threshold)

    return _engine(model, reading, options, decode, None)


def make_vision_engine(model: Model, options: SegmenterOptions | PoseEstimatorOptions) -> ModelEngine:
    """The loop engine of a segmenter or pose model (see :func:`edgekit.tasks.make_engine`).

    Raises:
        ModelError: the model's outputs read as another task's, or two ways.
        InputError: an option is out of range.
    """
    if isinstance(options, SegmenterOptions):
        return _segmenter(model, options)
    return _pose(model, options)


class _VisionTask(_Task):
    def _build_engine(self, model: Model) -> ModelEngine:
        if not isinstance(self.options, (SegmenterOptions, PoseEstimatorOptions)):
            raise InputError(_options_kind(self))
        return make_vision_engine(model, self.options)


class Segmenter(_VisionTask):
    """The class of every pixel, per-class areas and connected regions, from a segmentation model.

    Raises (on creation):
        ModelError: the model is missing, malformed, or not a segmenter (by its outputs' shapes,
            types or values).
        InputError: an option is out of range.
    """

    options: SegmenterOptions
    _options_type = SegmenterOptions


    def segment(self, frame: np.ndarray) -> Segmentation:
        """One RGB uint8 (H, W, 3) frame -> its :class:`~edgekit.segment.Segmentation` in its pixels.

        Raises:
            InputError: the frame is not RGB uint8 (H, W, 3).
        """
        return self._engine.run(frame)  # type: ignore[return-value]


class PoseEstimator(_VisionTask):
    """People's keypoints, from a MoveNet-style pose model (single or multi pose).

    Raises (on creation):
        ModelError: the model is missing, malformed, or not a pose model (by its outputs' shapes,
            types or values).
        InputError: an option is out of range.
    """

    options: PoseEstimatorOptions
    _options_type = PoseEstimatorOptions


    def estimate(self, frame: np.ndarray) -> Poses:
        """One RGB uint8 (H, W, 3) frame -> the :class:`~edgekit.contract.keypoints.Poses` in its pixels.

        Raises:
            InputError: the frame is not RGB uint8 (H, W, 3).
        """
        return self._engine.run(frame)  # type: ignore[return-value]


def segmenter_for(options: TaskOptions) -> Segmenter | None:
    """A Segmenter with ``options``' model, labels and runtime settings when the model reads as a
    segmenter (what an inspection cell runs for a segmentation model), else None.

    Raises:
        ModelError: the file is missing or malformed, or a segmenter that cannot load.
    """
    from edgekit.runtimes.tensors import inspect_model

    info = inspect_model(options.model)
    try:
        fmt = read_model(info).format
    except ModelError:
        return None  # the detector says why
    if fmt is not OutputFormat.SEGMENTATION:
        return None
    return Segmenter(SegmenterOptions(model=options.model, labels=options.labels, resize=options.resize,
                                      delegate=options.delegate, num_threads=options.num_threads,
                                      warmup=options.warmup, isolate=options.isolate))
