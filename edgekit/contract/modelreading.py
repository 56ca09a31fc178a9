"""What edgekit makes of a model, decided once when it loads: one typed value that every
decoder, task, self-test, ``edgekit info``/``meta``, the inspection cell and the converter's gate read.

Task, output format, the layout of its outputs, the preprocessing, the labels and the decoder's
options are each decided here, from the model's edgekit metadata (:class:`ModelMetadata`, parsed
once), its TFLite metadata, the family preset its signature matches and its tensors, and each
says where it came from (:class:`Provenance`)::

    reading = read_model(model)                  # a loaded Model or a ModelInfo; model.reading() caches it
    reading.task, reading.format, reading.why    # Task.DETECT, OutputFormat.YOLO, "YOLO layout [1, 84, 8400] ..."
    reading.sources["labels"]                    # Provenance.EDGEKIT
    reading.with_options(resize="letterbox", threshold=0.3)   # a caller's options, marked as such

This module is the one caller of :func:`edgekit.contract.readings.read_outputs` (what
``detect_format`` and ``recognize_format`` wrap for users): a second call with other evidence
would be a second opinion.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from edgekit.contract.enums import BoxFormat, OutputFormat, ResizeMode, Task
from edgekit.contract.keypoints import PoseLayout, pose_layout_of
from edgekit.contract.metadata import ModelMetadata
from edgekit.contract.preprocessing import PreprocessingSpec, Provenance, preprocessing_of
from edgekit.contract.readings import Reading, read_outputs
from edgekit.contract.recognize import YoloOutputs, ssd_order, task_of, yolo_outputs
from edgekit.contract.segmentation import SegmentationLayout, segmentation_layout
from edgekit.contract.spec import ImageInput, TensorLike, image_input
from edgekit.errors import InputError, ModelError

__all__ = ["DEFAULT_IOU", "DEFAULT_THRESHOLD", "DEFAULT_MAX_DETECTIONS", "DecoderOptions", "ModelReading",
           "read_model", "read_tensors"]

DEFAULT_IOU = 0.45
DEFAULT_THRESHOLD = 0.5  # when neither the caller nor the metadata (detection.score_threshold) says
DEFAULT_MAX_DETECTIONS = 100  # likewise (detection.max_det; Ultralytics' predict keeps 300)


@dataclass(frozen=True)
class DecoderOptions:
    """How a detector's or classifier's outputs are decoded (each from the caller, the metadata, or the default)."""

    threshold: float = DEFAULT_THRESHOLD
    iou_threshold: float = DEFAULT_IOU
    max_detections: int = DEFAULT_MAX_DETECTIONS
    box_format: BoxFormat = BoxFormat.CXCYWH
    normalized: bool | None = None  # None: judged from the boxes' values (see decode_yolo)
    top_k: int = 5

    def __post_init__(self) -> None:
        for name in ("threshold", "iou_threshold"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InputError(f"{name} must be between 0 and 1, got {value}")
        if self.max_detections < 1:
            raise InputError(f"max_detections must be at least 1, got {self.max_detections}")


@dataclass(frozen=True)
class ModelReading:
    """Everything edgekit decided about one model, and where each came from (``sources``, by field name).

    ``yolo``, ``ssd_order``, ``segmentation`` and ``pose`` hold the layout of the format's outputs
    (the one that applies, the others None); ``preprocessing`` and ``input`` are None when the model
    has not one RGB image input.
    """

    task: Task
    format: OutputFormat
    why: str
    metadata: ModelMetadata
    outputs: tuple[TensorLike, ...]
    labels: tuple[str, ...] = ()
    decoder: DecoderOptions = field(default_factory=DecoderOptions)
    preprocessing: PreprocessingSpec | None = None
    input: ImageInput | None = None
    yolo: YoloOutputs | None = None
    ssd_order: tuple[int, int, int, int] | None = None
    segmentation: SegmentationLayout | None = None
    pose: PoseLayout | None = None
    preset: str | None = None  # the anchor preset a raw anchor model matched
    sources: Mapping[str, Provenance] = field(default_factory=dict)

    def with_options(self, *, labels: Sequence[str] | None = None, resize: ResizeMode | str | None = None,
                     threshold: float | None = None, iou_threshold: float | None = None,
                     max_detections: int | None = None, top_k: int | None = None) -> ModelReading:
        """This reading with a caller's options (None: keep the model's), each marked :attr:`Provenance.OPTION`.

        Raises:
            InputError: an option is out of range or names no resize mode.
        """
        sources = dict(self.sources)
        changes: dict[str, Any] = {}
        asked: dict[str, Any] = {"threshold": threshold, "iou_threshold": iou_threshold,
                                 "max_detections": max_detections, "top_k": top_k}
        given = {k: v for k, v in asked.items() if v is not None}
        if given:
            changes["decoder"] = replace(self.decoder, **given)
            sources.update({k: Provenance.OPTION for k in given})
        if labels is not None:
            changes["labels"] = tuple(str(x) for x in labels)
            sources["labels"] = Provenance.OPTION
            if self.yolo is not None:  # the label count can settle which raw layout the head has
                changes["yolo"] = yolo_outputs(self.outputs, self.metadata.raw, len(labels) or None)
        if resize is not None and self.preprocessing is not None:
            pre = self.preprocessing
            changes["preprocessing"] = replace(pre, resize=ResizeMode.parse(resize),
                                               sources={**pre.sources, "resize": Provenance.OPTION})
        return replace(self, **changes, sources=sources) if changes else self

    def describe(self) -> str:
        """One line: task, format and why."""
        return f"{self.task.value}, {self.format.value} ({self.why})"

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task.value, "output_format": self.format.value, "why": self.why,
                "labels": len(self.labels), "sources": {k: v.value for k, v in self.sources.items()}}


def read_model(model: Any, *, task: Task | None = None, metadata: Mapping[str, Any] | None = None) -> ModelReading:
    """The reading of ``model``: a loaded :class:`~edgekit.runtimes.model.Model` (its tensors as the
    interpreter allocated them) or a :class:`~edgekit.runtimes.tensors.ModelInfo` (the file's). ``task``
    picks among readings that serve it; ``metadata`` reads the model as if it carried this document
    (what ``edgekit meta`` checks before writing one).

    Raises:
        ModelError: the metadata holds a value that makes no sense, or the outputs read as no format
            (or as none serving ``task``); AmbiguousOutputsError when they read two ways.
    """
    info = getattr(model, "info", model)
    return read_tensors(model.outputs, info.metadata if metadata is None else metadata, inputs=model.inputs,
                        ops=tuple(info.ops or ()), support=getattr(info, "support", None), task=task)


def read_tensors(outputs: Sequence[TensorLike], metadata: Mapping[str, Any] | ModelMetadata | None = None, *,
                 inputs: Sequence[TensorLike] = (), ops: Iterable[str] = (), support: Any = None,
                 task: Task | None = None) -> ModelReading:
    """:func:`read_model` from the pieces: output and input tensors (anything with ``name`` and
    ``shape``, and ``dtype`` where known), the edgekit metadata document, the graph's op names and
    the file's TFLite Support metadata (a :class:`ModelMetadata` built in Python reads as the
    document it writes).

    Raises:
        ModelError: as :func:`read_model`.
    """
    meta = ModelMetadata.parse(metadata.to_document() if isinstance(metadata, ModelMetadata) else metadata)
    outs, ops = tuple(outputs), tuple(ops)
    evidence: Reading = read_outputs(outs, meta.raw, inputs=inputs, ops=ops, task=task)
    fmt = evidence.format
    own = Provenance.ULTRALYTICS if meta.ultralytics else Provenance.EDGEKIT
    sources = {"format": own if meta.output_format is not None else Provenance.OUTPUTS,
               "task": own if meta.task is not None or meta.output_format is not None else Provenance.OUTPUTS}
    labels, sources["labels"] = _labels(meta, support)
    the_task = task_of(fmt) or Task.DETECT
    decoder = _decoder_options(meta, sources)
    layout: dict[str, Any] = {}
    if fmt is OutputFormat.YOLO:
        layout["yolo"] = yolo_outputs(outs, meta.raw, len(labels) or None)
    elif fmt is OutputFormat.SSD and all(len(o.shape) for o in outs):  # a file may not record the op's shapes
        layout["ssd_order"] = ssd_order(outs)
    elif fmt is OutputFormat.SEGMENTATION:
        layout["segmentation"] = _segmentation(meta, outs, sources, own)
    elif fmt is OutputFormat.KEYPOINTS:
        layout["pose"] = pose_layout_of([o.shape for o in outs])
    pre, image = _image(meta, support, inputs, outs, ops, the_task)
    return ModelReading(the_task, fmt, evidence.why, meta, outs, labels, decoder, pre, image,
                        preset=evidence.preset, sources=sources, **layout)


def _labels(meta: ModelMetadata, support: Any) -> tuple[tuple[str, ...], Provenance]:
    """The edgekit metadata's labels, else the file's TFLite metadata's (its associated label file)."""
    if meta.labels:
        return meta.labels, Provenance.ULTRALYTICS if meta.ultralytics else Provenance.EDGEKIT
    named = tuple(getattr(support, "labels", None) or ())
    return (tuple(str(x) for x in named), Provenance.TFLITE) if named else ((), Provenance.CONVENTION)


def _decoder_options(meta: ModelMetadata, sources: dict[str, Provenance]) -> DecoderOptions:
    det = meta.detection
    own = Provenance.ULTRALYTICS if meta.ultralytics else Provenance.EDGEKIT

    def pick(key: str, value: Any, default: Any) -> Any:
        sources[key] = own if value is not None else Provenance.CONVENTION
        return default if value is None else value

    try:
        return DecoderOptions(pick("threshold", det.score_threshold, DEFAULT_THRESHOLD),
                              pick("iou_threshold", det.iou_threshold, DEFAULT_IOU),
                              pick("max_detections", det.max_det, DEFAULT_MAX_DETECTIONS),
                              pick("box_format", det.box_format, BoxFormat.CXCYWH),
                              pick("normalized", det.normalized, None))
    except InputError as exc:
        raise ModelError(f"the model's detection metadata is out of range: {exc}") from None


def _segmentation(meta: ModelMetadata, outputs: Sequence[TensorLike], sources: dict[str, Provenance],
                  own: Provenance) -> SegmentationLayout:
    if meta.segmentation_layout is not None:
        sources["layout"] = own
        return meta.segmentation_layout
    out = outputs[0]
    dtype = getattr(out, "dtype", None)
    layout = segmentation_layout(out.shape, dtype if dtype is not None else np.float32,
                                 bool(getattr(out, "quantized", False)))
    if layout is None:
        raise ModelError(f"a segmenter's output is [1, H, W] class ids or [1, H, W, C] scores; this one is "
                         f"{list(out.shape)}")
    sources["layout"] = Provenance.OUTPUTS
    return layout


def _image(meta: ModelMetadata, support: Any, inputs: Sequence[TensorLike], outputs: Sequence[TensorLike],
           ops: tuple[str, ...], task: Task) -> tuple[PreprocessingSpec | None, ImageInput | None]:
    """How frames are fed (None, None: not one RGB image input)."""
    if len(inputs) != 1:
        return None, None
    try:
        image = image_input(inputs[0], meta.raw)
    except ModelError:
        return None, None
    return preprocessing_of(meta.raw, support, inputs, outputs, ops, task=task), image
