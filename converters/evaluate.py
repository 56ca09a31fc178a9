"""Quantized against float, measured by the interpreter that runs on the device.

Both the float32 .tflite and the quantized one are loaded with
:func:`edgekit.runtimes.load_model` and fed the same model inputs; the quantized model
quantizes them with its own input parameters, exactly as on the device. Detectors are
decoded by the device's own decoders (:mod:`edgekit.contract`), with the metadata the
converter writes into the file and each image's transform, so the gate's mAP is what
``edgekit.Detector`` yields on the same images.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from edgekit.contract import (
    DEFAULT_IOU,
    OutputFormat,
    Task,
    Transform,
    YoloLayout,
    image_input,
    map50,
    yolo_outputs,
)
from edgekit.contract import BoxMapping
from edgekit.contract import task_of as _format_task
from edgekit.contract.decode import decoder_for
from edgekit.contract.enums import BoxFormat
from edgekit.contract.metadata import DetectionMetadata, ModelMetadata
from edgekit.contract.modelreading import read_tensors
from edgekit.contract.recognize import YoloOutputs
from edgekit.contract.ultralytics import PREDICT_DEFAULTS
from edgekit.converters._native import progress
from edgekit.converters.preprocessing import Preprocessing
from edgekit.converters.fidelity import DetectionFidelity, detection_fidelity
from edgekit.errors import ConversionError, ModelError
from edgekit.results import Detections
from edgekit.runtimes import TensorSpec, load_model
from edgekit.runtimes.tflite_file import parse_tflite
from edgekit.runtimes.timing import interleaved_invoke_ms

__all__ = [
    "ModelOutputs",
    "OutputMetrics",
    "Metrics",
    "TRUTH_SCORE",
    "PREDICTION_SCORE",
    "predict",
    "compare",
    "measure_latency",
    "infer_output_format",
    "detection_metadata",
    "detections",
    "yolo_boxes",
    "chance_warning",
    "few_objects_warning",
]

TRUTH_SCORE = 0.25  # float detections at least this confident count as objects
FEW_OBJECTS = 50  # fewer float-model objects than this: mAP against float says little
PREDICTION_SCORE = 0.05  # quantized detections down to this score are ranked (AP needs the tail)


@dataclass(frozen=True)
class ModelOutputs:
    """Every output of a model over N samples: arrays shaped (N, *output shape without batch).

    ``inputs``: the model's input specs (where boxes are measured when no transform is given).
    """

    specs: tuple[TensorSpec, ...]
    arrays: tuple[np.ndarray, ...]
    inputs: tuple[TensorSpec, ...] = ()


def predict(path: str | os.PathLike[str], x: np.ndarray, desc: str = "evaluating") -> ModelOutputs:
    """Run the .tflite model on each sample of `x` (float model inputs), dequantizing the outputs.

    Raises:
        ModelError: the model cannot be loaded here.
    """
    outs: list[list[np.ndarray]] = []
    with load_model(path) as model:
        for i in progress(range(len(x)), total=len(x), desc=desc):
            outs.append([o[0] if o.shape[:1] == (1,) else o for o in model.run(x[i:i + 1])])
        specs, inputs = model.outputs, model.inputs
    return ModelOutputs(tuple(specs), tuple(np.stack([o[k] for o in outs]) for k in range(len(specs))),
                        tuple(inputs))
def measure_latency(paths: Sequence[str | os.PathLike[str]], x0: np.ndarray, blocks: int = 6,
                    per_block: int = 5, warmup: int = 3) -> list[float]:
    """Median milliseconds of one invoke of each model on this machine (the interpreter and
    delegate predict uses), timed in interleaved blocks so that load changes hit all alike.

    Raises:
        ModelError: a model cannot be loaded here.
    """
    return [float(np.median(t)) for t in interleaved_invoke_ms(paths, x0, blocks=blocks, per_block=per_block,
                                                                 warmup=warmup)]


@dataclass(frozen=True)
class OutputMetrics:
    """Quantized against float for one output tensor, over all samples."""

    name: str
    mean_abs_error: float
    max_abs_error: float
    cosine: float  # mean over samples of the cosine similarity of the flattened outputs
    cosine_min: float
    snr_db: float | None  # None when the outputs are identical (infinite SNR)


@dataclass(frozen=True)
class Metrics:
    """What the accuracy check measured. Fractions in 0..1; None where it does not apply."""

    samples: int
    outputs: tuple[OutputMetrics, ...]
    top1_agreement: float | None = None
    float_accuracy: float | None = None
    accuracy: float | None = None
    map50: float | None = None
    float_latency_ms: float | None = None
    # detectors on labelled data (YOLO, COCO, labels.json): mAP@0.5 against the labelled objects
    float_map50_truth: float | None = None
    map50_truth: float | None = None
    latency_ms: float | None = None
    # detectors: the objects the float model found on the validation data (score >= TRUTH_SCORE),
    # what "mAP@0.5 vs float" is measured on
    float_objects: int | None = None
    # detectors: found, missing and extra boxes at TRUTH_SCORE, box IoU and score error against float
    detection: DetectionFidelity | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["outputs"] = [asdict(o) for o in self.outputs]
        d["detection"] = self.detection.to_dict() if self.detection is not None else None
        return d

    def with_latency(self, float_ms: float | None, quant_ms: float | None) -> Metrics:
        return replace(self, float_latency_ms=float_ms, latency_ms=quant_ms)


def _output_metrics(name: str, f: np.ndarray, q: np.ndarray) -> OutputMetrics:
    f64 = f.reshape(len(f), -1).astype(np.float64)
    q64 = q.reshape(len(q), -1).astype(np.float64)
    diff = q64 - f64
    nf, nq = np.linalg.norm(f64, axis=1), np.linalg.norm(q64, axis=1)
    both_zero = (nf == 0) & (nq == 0)
    denom = np.where(nf * nq > 0, nf * nq, 1.0)
    cos = np.where(both_zero, 1.0, np.sum(f64 * q64, axis=1) / denom)
    noise = float(np.sum(diff ** 2))
    signal = float(np.sum(f64 ** 2))
    snr = None if noise == 0 else (10 * np.log10(signal / noise) if signal > 0 else -np.inf)
    return OutputMetrics(name=name, mean_abs_error=float(np.mean(np.abs(diff))) if diff.size else 0.0,
                         max_abs_error=float(np.max(np.abs(diff))) if diff.size else 0.0,
                         cosine=float(np.mean(cos)), cosine_min=float(np.min(cos)),
                         snr_db=None if snr is None or not np.isfinite(snr) else float(snr))


def _top1(scores: np.ndarray) -> np.ndarray:
    s = scores.reshape(len(scores), -1)
    if s.shape[1] == 1:  # one sigmoid or logit: the class is which side of the middle it falls
        mid = 0.5 if (s.min() >= 0 and s.max() <= 1) else 0.0
        return (s[:, 0] > mid).astype(np.int64)
    return s.argmax(axis=1)


def compare(ref: ModelOutputs, quant: ModelOutputs, labels: np.ndarray | None,
            output_format: OutputFormat | None, transforms: Sequence[Transform] | None = None,
            pre: Preprocessing | None = None, roles: Sequence[str] | None = None) -> Metrics:
    """Agreement, accuracy and error metrics of `quant` against `ref` (the float model).

    For detectors: mAP@0.5 of the quantized model's detections (score >= PREDICTION_SCORE)
    against the float model's (score >= TRUTH_SCORE), both decoded by the device's decoder
    and mapped onto the images through `transforms` (one per sample; None: model-input pixels).
    `roles`: which of two YOLO outputs is "boxes" and which "scores" (None: the shapes decide).

    Raises:
        ConversionError: the two models' outputs do not correspond.
    """
    if len(ref.arrays) != len(quant.arrays) or any(a.shape != b.shape for a, b in zip(ref.arrays, quant.arrays)):
        raise ConversionError(f"the quantized model's outputs {[a.shape for a in quant.arrays]} do not match "
                              f"the float model's {[a.shape for a in ref.arrays]}")
    n = len(ref.arrays[0]) if ref.arrays else 0
    per_output = tuple(_output_metrics(s.name, f, q) for s, f, q in zip(ref.specs, ref.arrays, quant.arrays))
    if output_format in (OutputFormat.SSD, OutputFormat.YOLO):
        meta = ModelMetadata(output_format=output_format,
                             detection=detection_metadata(output_format, ref, pre, roles) or DetectionMetadata())
        truth = detections(ref, meta, TRUTH_SCORE, transforms)
        found = detections(quant, meta, PREDICTION_SCORE, transforms)
        return Metrics(n, per_output, map50=map50(truth, found), float_objects=sum(len(t) for t in truth),
                       detection=detection_fidelity(truth, found, TRUTH_SCORE, PREDICTION_SCORE))
    if output_format is not OutputFormat.CLASSES:
        return Metrics(n, per_output)
    fp, qp = _top1(ref.arrays[0]), _top1(quant.arrays[0])
    metrics = Metrics(n, per_output, top1_agreement=float(np.mean(fp == qp)))
    if labels is not None:
        metrics = replace(metrics, float_accuracy=float(np.mean(fp == labels)), accuracy=float(np.mean(qp == labels)))
    return metrics


def detections(outputs: ModelOutputs, metadata: ModelMetadata | Mapping[str, Any] | OutputFormat,
               threshold: float = PREDICTION_SCORE,
               transforms: Sequence[Transform] | None = None) -> list[Detections]:
    """Per-sample detections, decoded as the device decodes them (the model reading of these tensors
    with this edgekit `metadata`, or just an output format, and its decoder), boxes through each sample's transform.

    Raises:
        ConversionError: the outputs do not fit the format, or the transforms do not fit the samples.
    """
    meta = ModelMetadata(output_format=metadata) if isinstance(metadata, OutputFormat) else metadata
    n = len(outputs.arrays[0]) if outputs.arrays else 0
    if transforms is not None and len(transforms) != n:
        raise ConversionError(f"{len(transforms)} image transforms for {n} samples")
    try:
        # The device's reading of the same tensors and metadata (its input size weighs in, as on the device).
        decoder = decoder_for(read_tensors(outputs.specs, meta, inputs=outputs.inputs).with_options(threshold=threshold))
        steps = transforms if transforms is not None else (Transform.identity(_input_size(outputs)),) * n
    except ModelError as exc:
        raise ConversionError(f"cannot decode the detector's outputs: {exc}") from None
    found = [decoder([a[i] for a in outputs.arrays], steps[i]) for i in range(n)]
    boxes = [d for d in found if isinstance(d, Detections)]
    if len(boxes) != n:
        raise ConversionError(f"the outputs read as {decoder.format.value}, not as detections")
    return boxes


def _input_size(outputs: ModelOutputs) -> tuple[int, int]:
    if not outputs.inputs:
        return (1, 1)  # boxes stay normalized: unknown input, and the mAP does not care
    return image_input(outputs.inputs[0]).size


def detection_metadata(fmt: OutputFormat | None, reference: ModelOutputs | None,
                       pre: Preprocessing | None = None,
                       roles: Sequence[str] | None = None) -> DetectionMetadata | None:
    """The ``detection`` part of the edgekit metadata for a detector (the converter writes it; the
    gate decodes with it). YOLO boxes are judged normalized when 99% of their coordinates stay in 1.5;
    a model read as Ultralytics' (``pre.box_mapping``) gets its predict's conf, iou and max_det.
    `roles` name a two-output head's outputs ("boxes"/"scores" in order; kept in the document):
    with as many classes as box coordinates their shapes cannot tell them apart.
    """
    if fmt is OutputFormat.SSD:
        return DetectionMetadata(box_format=BoxFormat.YXYX, normalized=True)
    if fmt is OutputFormat.YOLO:
        doc = DetectionMetadata(iou_threshold=DEFAULT_IOU, box_format=BoxFormat.CXCYWH,
                                outputs=None if roles is None else tuple(roles))
        if reference is not None:  # boxes of a few input pixels or more are not in 0..1
            boxes = yolo_boxes(reference, roles)
            # Judged on the rows the device would keep, as its decoder does: an Ultralytics TFLite
            # export's boxes are fractions, but its empty anchors carry boxes wider than the input.
            confident = yolo_confidence(reference, roles) >= TRUTH_SCORE
            if confident.shape == boxes.shape[:1] and confident.any():
                boxes = boxes[confident]
            doc = replace(doc, normalized=bool(boxes.size and np.percentile(np.abs(boxes), 99) <= 1.5))
            where = yolo_outputs(reference.specs, _roles_doc(roles))
            if not where.split and where.layout is YoloLayout.V5:
                doc = replace(doc, objectness=True)  # so a head split after its boxes is read as YOLOv5 on the device
        if pre is not None and pre.box_mapping is BoxMapping.ULTRALYTICS:
            doc = replace(doc, score_threshold=float(PREDICT_DEFAULTS["score_threshold"]),
                          iou_threshold=float(PREDICT_DEFAULTS["iou_threshold"]),
                          max_det=int(PREDICT_DEFAULTS["max_det"]))
        return doc
    return None


def _roles_doc(roles: Sequence[str] | None) -> dict[str, Any] | None:
    return None if roles is None else ModelMetadata(detection=DetectionMetadata(outputs=tuple(roles))).to_document()


def yolo_confidence(outputs: ModelOutputs, roles: Sequence[str] | None = None) -> np.ndarray:
    """The best class score (with objectness, for YOLOv5 heads, its largest column) of each row of
    a YOLO model's outputs over all samples, shape (K,), in the order of :func:`yolo_boxes`."""
    where = yolo_outputs(outputs.specs, _roles_doc(roles))
    if where.split:
        raw = outputs.arrays[where.scores]
        rows = raw if where.transposed else np.swapaxes(raw, -1, -2)
        return rows.reshape(-1, rows.shape[-1]).max(axis=-1)
    raw = outputs.arrays[where.boxes]
    rows = _head_rows(raw, where)
    return rows[..., 4:].reshape(-1, rows.shape[-1] - 4).max(axis=-1)


def _head_rows(raw: np.ndarray, where: YoloOutputs) -> np.ndarray:
    """A raw head's rows (one per box), oriented by the contract's layout (yolo_layout), as the device decodes."""
    return raw if where.layout is YoloLayout.V5 else np.swapaxes(raw, -1, -2)


def yolo_boxes(outputs: ModelOutputs, roles: Sequence[str] | None = None) -> np.ndarray:
    """The raw box columns of a YOLO model's outputs over all samples, shape (K, 4) (`roles`: as
    in :func:`detection_metadata`).

    Raises:
        ModelError: the outputs are not a YOLO head.
    """
    where = yolo_outputs(outputs.specs, _roles_doc(roles))
    raw = outputs.arrays[where.boxes]
    if where.split:
        rows = raw if where.transposed else np.swapaxes(raw, -1, -2)
    else:
        rows = _head_rows(raw, where)
    return rows[..., :4].reshape(-1, 4)


def infer_output_format(model: bytes, task: Task | None, given: OutputFormat | None) -> OutputFormat | None:
    """classes / ssd / yolo from the float .tflite's ops and output shapes, by the device's
    recognizer (None: no known format).

    Raises:
        ConversionError: `task` is detect but the outputs look like neither SSD nor YOLO.
    """
    if given is not None:
        return given
    parsed = parse_tflite(model, label="the float model")
    sg = parsed.subgraphs[0]
    outputs = [sg.tensors[i] for i in sg.outputs]
    try:
        fmt: OutputFormat | None = read_tensors(outputs, None, ops=parsed.opcodes).format
    except ModelError:
        fmt = None
    if task is Task.DETECT and fmt not in (OutputFormat.SSD, OutputFormat.YOLO):
        raise ConversionError(f"--task detect, but outputs {[list(t.shape) for t in outputs]} are neither SSD "
                              "post-processed (TFLite_Detection_PostProcess) nor raw YOLO [1, 4+C, N] / [1, N, 5+C] "
                              "(or boxes [1, 4, N] and scores [1, C, N])")
    return fmt


def task_of(output_format: OutputFormat | None, task: Task | None) -> Task | None:
    """The task asked for, else the one the output format serves."""
    return task if task is not None else _format_task(output_format)


def label_summary(labels: Sequence[str] | None, classes: int | None) -> str | None:
    """A warning when the number of labels does not fit the classifier's outputs."""
    if labels is None or classes is None or len(labels) == classes:
        return None
    return (f"{len(labels)} labels but the model has {classes} outputs: check the labels "
            "(their order must be the training order)")


def chance_warning(reference: ModelOutputs, labels: np.ndarray | None, classes: int) -> str | None:
    """A warning when the float model itself is near chance against the labels: the labels'
    order (sorted folder names, or the labels file) is then likely not the training order."""
    if labels is None or classes < 2 or len(labels) < 2 * classes:
        return None
    acc = float(np.mean(_top1(reference.arrays[0]) == labels))
    if acc > 1.5 / classes:
        return None
    return (f"the float model itself scores {100 * acc:.1f}% against these labels (chance is {100 / classes:.1f}%): "
            "are the classes in training order? Class folders are numbered in sorted order; give --labels "
            "with the training order to map folder names")


def few_objects_warning(metrics: Metrics | None) -> str | None:
    """A warning when a detector's mAP against the float model rests on too few objects to judge."""
    if metrics is None or metrics.float_objects is None or metrics.float_objects >= FEW_OBJECTS:
        return None
    return (f"the float model found only {metrics.float_objects} object(s) (score >= {TRUTH_SCORE:g}) in the "
            f"{metrics.samples} validation image(s): too few to judge the quantized model by (at least "
            f"{FEW_OBJECTS} wanted); give --validation images that show the objects the model detects")
