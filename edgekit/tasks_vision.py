"""Segmenter and PoseEstimator: the same shape as Detector (options, ``create_from_*``, ``stream``).

::

    from edgekit import Segmenter, PoseEstimator

    with Segmenter.create_from_model_path("deeplab.tflite", min_area=20) as segmenter:
        seg = segmenter.segment(frame)                   # Segmentation: class map, areas, regions
        print(seg.mask.to_list(), [(r.label, r.area, r.box) for r in seg.regions])

    with PoseEstimator.create_from_model_path("movenet.tflite") as poses:
        for pose in poses.estimate(frame):               # Pose(score, keypoints (K, 2), keypoint_scores, box)
            print(pose.score, pose.keypoints[0])         # the nose, in frame pixels

The output format is read with :func:`edgekit.contract.readings.read_outputs`: a model whose
outputs read as another task's is refused, naming the command to use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from edgekit.contract import OutputFormat, ResizeMode, Task, Transform
from edgekit.contract.preprocessing import PreprocessingSpec, preprocessing_for
from edgekit.contract.keypoints import PoseLayout, Poses, decode_hand_landmarks, decode_poses, pose_layout_of
from edgekit.contract.spec import image_input
from edgekit.contract.readings import read_outputs
from edgekit.contract.segmentation import SegmentationLayout, decode_segmentation, segmentation_layout
from edgekit.errors import InputError, ModelError
from edgekit.runtimes.model import Model
from edgekit.segment import Segmentation, segmentation_of
from edgekit.tasks import ModelEngine, TaskOptions, _labels, _Task

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


def _preprocessing(option: ResizeMode | str | None, model: Model, task: Task) -> PreprocessingSpec:
    return preprocessing_for(model, resize=option, task=task)


def _segmenter(model: Model, options: SegmenterOptions) -> ModelEngine:
    _check_fraction("threshold", options.threshold)
    if options.min_area < 0:
        raise InputError(f"min_area must be 0 or more pixels, got {options.min_area}")
    labels = _labels(options.labels, model)
    read_outputs(model.outputs, model.metadata, inputs=model.inputs, labels=len(labels) if labels else None,
                 task=Task.SEGMENT)
    out = model.outputs[0]
    layout = _segmentation_layout(model)
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
    return ModelEngine(model, _preprocessing(options.resize, model, Task.SEGMENT), decode, labels, note)


def _segmentation_layout(model: Model) -> SegmentationLayout:
    seg = (model.metadata or {}).get("segmentation")
    named = seg.get("layout") if isinstance(seg, dict) else None
    if named:
        return SegmentationLayout.from_metadata(named, "segmentation.layout")
    out = model.outputs[0]
    layout = segmentation_layout(out.shape, out.dtype, out.quantized)
    if layout is None:
        raise ModelError(f"a segmenter's output is [1, H, W] class ids or [1, H, W, C] scores; {model.path!r} "
                         f"has {out}")
    return layout


def _pose(model: Model, options: PoseEstimatorOptions) -> ModelEngine:
    _check_fraction("threshold", options.threshold)
    read_outputs(model.outputs, model.metadata, inputs=model.inputs, task=Task.POSE)
    layout: PoseLayout | None = pose_layout_of([o.shape for o in model.outputs])
    if layout is PoseLayout.HAND:
        size = image_input(model.inputs[0], model.metadata).size
        support = model.support
        names = tuple(support.labels) if support is not None and support.labels else ("Left", "Right")

        def hand(outputs: list[np.ndarray], transform: Transform) -> Poses:
            return decode_hand_landmarks(outputs, transform, size, threshold=options.threshold, labels=names)

        return ModelEngine(model, _preprocessing(options.resize, model, Task.POSE), hand, None)  # type: ignore[arg-type]

    def decode(outputs: list[np.ndarray], transform: Transform) -> Poses:
        return decode_poses(outputs[0], transform, layout=layout, threshold=options.threshold)

    return ModelEngine(model, _preprocessing(options.resize, model, Task.POSE), decode, None)


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
    _format: OutputFormat

    def _output_format(self) -> OutputFormat:
        return self._format

    def _build_engine(self, model: Model) -> ModelEngine:
        return make_vision_engine(model, self.options)  # type: ignore[arg-type]


class Segmenter(_VisionTask):
    """The class of every pixel, per-class areas and connected regions, from a segmentation model.

    Raises (on creation):
        ModelError: the model is missing, malformed, or not a segmenter (by its outputs' shapes,
            types or values).
        InputError: an option is out of range.
    """

    options: SegmenterOptions
    _options_type = SegmenterOptions
    _format = OutputFormat.SEGMENTATION


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
    _format = OutputFormat.KEYPOINTS


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
        fmt = read_outputs(info.outputs, info.metadata, inputs=info.inputs).format
    except ModelError:
        return None  # the detector says why
    if fmt is not OutputFormat.SEGMENTATION:
        return None
    return Segmenter(SegmenterOptions(model=options.model, labels=options.labels, resize=options.resize,
                                      delegate=options.delegate, num_threads=options.num_threads,
                                      warmup=options.warmup, isolate=options.isolate))
