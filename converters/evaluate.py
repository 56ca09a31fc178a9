"""Quantized against float, measured by the interpreter that runs on the device.

Both the float32 .tflite and the quantized one are loaded with
:func:`edgekit.runtimes.load_model` and fed the same model inputs; the quantized model
quantizes them with its own input parameters, exactly as on the device.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from edgekit.converters._native import progress
from edgekit.converters.detection import (
    PREDICTION_SCORE,
    TRUTH_SCORE,
    ImageDetections,
    map50,
    ssd_detections,
    yolo_detections,
)
from edgekit.converters.options import OutputFormat, Task
from edgekit.errors import ConversionError
from edgekit.runtimes import TensorSpec, load_model
from edgekit.runtimes.tflite_file import parse_tflite

__all__ = [
    "ModelOutputs",
    "OutputMetrics",
    "Metrics",
    "predict",
    "compare",
    "measure_latency",
    "infer_output_format",
    "detections",
    "yolo_boxes",
    "chance_warning",
]

SSD_OP = "TFLite_Detection_PostProcess"


@dataclass(frozen=True)
class ModelOutputs:
    """Every output of a model over N samples: arrays shaped (N, *output shape without batch)."""

    specs: tuple[TensorSpec, ...]
    arrays: tuple[np.ndarray, ...]


def predict(path: str | os.PathLike[str], x: np.ndarray, desc: str = "evaluating") -> ModelOutputs:
    """Run the .tflite model on each sample of `x` (float model inputs), dequantizing the outputs.

    Raises:
        ModelError: the model cannot be loaded here.
    """
    outs: list[list[np.ndarray]] = []
    with load_model(path) as model:
        for i in progress(range(len(x)), total=len(x), desc=desc):
            outs.append([o[0] if o.shape[:1] == (1,) else o for o in model.run(x[i:i + 1])])
        specs = model.outputs
    return ModelOutputs(specs, tuple(np.stack([o[k] for o in outs]) for k in range(len(specs))))


def measure_latency(paths: Sequence[str | os.PathLike[str]], x0: np.ndarray, blocks: int = 6,
                    per_block: int = 5, warmup: int = 3) -> list[float]:
    """Median milliseconds of one invoke of each model on this machine (the interpreter and
    delegate predict uses), timed in interleaved blocks so that load changes hit all alike.

    Raises:
        ModelError: a model cannot be loaded here.
    """
    models = [load_model(p) for p in paths]
    try:
        for m in models:
            m.input_view()[...] = m.prepare_input(m.inputs[0], x0)
            for _ in range(warmup):
                m.invoke()
        times: list[list[float]] = [[] for _ in models]
        for b in range(blocks):
            for i in [(b + k) % len(models) for k in range(len(models))]:
                for _ in range(per_block):
                    t0 = time.perf_counter()
                    models[i].invoke()
                    times[i].append(time.perf_counter() - t0)
    finally:
        for m in models:
            m.close()
    return [float(np.median(t) * 1e3) for t in times]


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
    latency_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["outputs"] = [asdict(o) for o in self.outputs]
        return d

    def with_latency(self, float_ms: float | None, quant_ms: float | None) -> Metrics:
        from dataclasses import replace

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
            output_format: OutputFormat | None) -> Metrics:
    """Agreement, accuracy and error metrics of `quant` against `ref` (the float model).

    Raises:
        ConversionError: the two models' outputs do not correspond.
    """
    if len(ref.arrays) != len(quant.arrays) or any(a.shape != b.shape for a, b in zip(ref.arrays, quant.arrays)):
        raise ConversionError(f"the quantized model's outputs {[a.shape for a in quant.arrays]} do not match "
                              f"the float model's {[a.shape for a in ref.arrays]}")
    n = len(ref.arrays[0]) if ref.arrays else 0
    per_output = tuple(_output_metrics(s.name, f, q) for s, f, q in zip(ref.specs, ref.arrays, quant.arrays))
    if output_format in (OutputFormat.SSD, OutputFormat.YOLO):
        truth = [d.above(TRUTH_SCORE) for d in detections(ref, output_format)]
        found = [d.above(PREDICTION_SCORE) for d in detections(quant, output_format)]
        return Metrics(n, per_output, map50=map50(truth, found))
    if output_format is not OutputFormat.CLASSES:
        return Metrics(n, per_output)
    fp, qp = _top1(ref.arrays[0]), _top1(quant.arrays[0])
    metrics = Metrics(n, per_output, top1_agreement=float(np.mean(fp == qp)))
    if labels is not None:
        from dataclasses import replace

        metrics = replace(metrics, float_accuracy=float(np.mean(fp == labels)), accuracy=float(np.mean(qp == labels)))
    return metrics


def detections(outputs: ModelOutputs, output_format: OutputFormat) -> list[ImageDetections]:
    """Per-image detections from a detector's outputs (SSD post-processed, or raw YOLO + NMS).

    Raises:
        ConversionError: the outputs are not the four SSD post-processing outputs.
    """
    if output_format is OutputFormat.YOLO:
        raw = max(outputs.arrays, key=lambda a: a[0].size)
        return [yolo_detections(r) for r in raw]
    boxes, classes, scores, count = _ssd_roles(outputs)
    return [ssd_detections(boxes[i], classes[i], scores[i], None if count is None else count[i])
            for i in range(len(boxes))]


def yolo_boxes(outputs: ModelOutputs) -> np.ndarray:
    """The raw cx, cy, w, h columns of a YOLO output over all samples, shape (K, 4)."""
    raw = max(outputs.arrays, key=lambda a: a[0].size)
    rows = raw if raw.shape[-2] >= raw.shape[-1] else np.swapaxes(raw, -1, -2)
    return rows[..., :4].reshape(-1, 4)


def _ssd_roles(outputs: ModelOutputs) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Which output is which: boxes end in 4; count has one value; the ':1'/':2' names (the TF1
    export order boxes, classes, scores, count) or integral values tell classes from scores."""
    arrays = list(outputs.arrays)
    boxes_i = next(i for i, a in enumerate(arrays) if a.ndim == 3 and a.shape[-1] == 4)
    count_i = next((i for i, a in enumerate(arrays) if a[0].size == 1), None)
    rest = [i for i in range(len(arrays)) if i not in (boxes_i, count_i)]
    if len(rest) != 2:
        raise ConversionError(f"expected SSD outputs boxes, classes, scores, count; got shapes "
                              f"{[a.shape for a in arrays]}")
    names = [outputs.specs[i].name for i in rest]
    if names[0].endswith(":2") and names[1].endswith(":1"):
        rest.reverse()
    elif not (names[0].endswith(":1") and names[1].endswith(":2")):
        integral = [bool(np.all(arrays[i] == np.round(arrays[i]))) for i in rest]
        if integral == [False, True]:
            rest.reverse()
    return arrays[boxes_i], arrays[rest[0]], arrays[rest[1]], (None if count_i is None else arrays[count_i])


def infer_output_format(model: bytes, task: Task | None, given: OutputFormat | None) -> OutputFormat | None:
    """classes / ssd / yolo from the float .tflite's ops and output shapes (None: no known format).

    Raises:
        ConversionError: `task` is detect but the outputs look like neither SSD nor YOLO.
    """
    if given is not None:
        return given
    parsed = parse_tflite(model, label="the float model")
    sg = parsed.subgraphs[0]
    shapes = [sg.tensors[i].shape for i in sg.outputs]
    if SSD_OP in parsed.opcodes:
        return OutputFormat.SSD
    if task is Task.DETECT:
        if any(len(s) == 3 and min(s[1:]) >= 5 for s in shapes):
            return OutputFormat.YOLO
        raise ConversionError(f"--task detect, but outputs {shapes} are neither SSD post-processed "
                              "(TFLite_Detection_PostProcess) nor raw YOLO [1, 4+C, N] / [1, N, 5+C]")
    if len(shapes) == 1 and len(shapes[0]) == 2:
        return OutputFormat.CLASSES
    return None


def task_of(output_format: OutputFormat | None, task: Task | None) -> Task | None:
    if task is not None:
        return task
    if output_format in (OutputFormat.SSD, OutputFormat.YOLO):
        return Task.DETECT
    return Task.CLASSIFY if output_format is OutputFormat.CLASSES else None


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
