"""The float reference when it is not the float .tflite, and split YOLO heads seen as one output.

For an ONNX model the accuracy check measures against the ONNX model itself (onnxruntime),
for a Keras detector whose head was split for conversion against the Keras model as it was:
what the user started from. A converted model with a split head (boxes and scores outputs) is
compared with that reference through :func:`merged`, which puts its two outputs back into the
reference's one [N, 4+C, A] array.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

import numpy as np

from edgekit.converters._native import progress
from edgekit.converters.data import Samples
from edgekit.converters.evaluate import ModelOutputs
from edgekit.converters.options import OutputFormat
from edgekit.converters.sources.base import FloatReference, SourceModel
from edgekit.converters.yolo_head import collapse_warning, merge_split, mixed_head_levels, output_roles
from edgekit.errors import ConversionError
from edgekit.runtimes import TensorSpec, load_model

__all__ = ["reference_outputs", "split_roles", "merged", "head_finding", "truth_map50"]


def reference_outputs(ref: FloatReference, x: np.ndarray, desc: str = "float model") -> ModelOutputs:
    """Run the float reference on each sample of `x` (model inputs, NHWC).

    Raises:
        ConversionError: the reference failed, or its outputs change shape between samples.
    """
    outs: list[list[np.ndarray]] = []
    for i in progress(range(len(x)), total=len(x), desc=f"{desc} ({ref.name})"):
        outs.append([o[0] if o.shape[:1] == (1,) else o for o in ref.run(x[i:i + 1])])
    if not outs:
        raise ConversionError("no validation samples to run the float model on")
    specs = tuple(TensorSpec(f"output_{k}", k, (1, *a.shape), np.dtype(np.float32)) for k, a in enumerate(outs[0]))
    try:
        arrays = tuple(np.stack([o[k] for o in outs]).astype(np.float32) for k in range(len(specs)))
    except ValueError as exc:
        raise ConversionError(f"the float model's outputs change shape between samples: {exc}") from None
    return ModelOutputs(specs, arrays)


def split_roles(src: SourceModel, float_model: str | os.PathLike[str], x0: np.ndarray) -> tuple[str, ...]:
    """Which output of the converted float model is boxes and which scores, by running it and the
    reference on the sample `x0` (batch 1).

    Raises:
        ConversionError: the converted model does not have two outputs.
    """
    if src.reference is None or src.head_split is None:
        raise ConversionError("split_roles needs a source with a split head and its float reference")
    with load_model(float_model) as model:
        outs = model.run(x0)
    if len(outs) != 2:
        raise ConversionError(f"the split head should give two outputs (boxes, scores); the converted float model "
                              f"has {len(outs)}")
    ref = src.reference.run(x0)[0]
    return output_roles(outs, ref, src.head_split.axis)


def merged(outputs: ModelOutputs, roles: Sequence[str], axis: int, like: ModelOutputs) -> ModelOutputs:
    """`outputs` of a split-head model as one array shaped like `like`'s (the reference)."""
    joined = merge_split(outputs.arrays, roles, axis)
    return dataclasses.replace(like, arrays=(joined,)) if joined.shape == like.arrays[0].shape \
        else ModelOutputs(like.specs, (joined,))


def head_finding(reference: ModelOutputs, src: SourceModel, split_requested: bool,
                 samples: Samples | None = None, fmt: OutputFormat | None = None) -> str | None:
    """The audit finding for a YOLO head whose one output mixes boxes and scores, if it does; with
    labelled `samples`, what one shared scale does to mAP@0.5 (the float outputs rounded to it)."""
    if len(reference.arrays) != 1:
        return None
    raw = reference.arrays[0]
    message = collapse_warning(raw, fixed=src.head_split is not None)
    if message is None:
        return None
    found = mixed_head_levels(raw)
    if samples is not None and samples.truth is not None and fmt is not None and found is not None:
        lo = min(float(raw.min()), 0.0)
        rounded = np.round((raw - lo) / found[1]) * found[1] + lo
        before = truth_map50(ModelOutputs(reference.specs, (rounded.astype(np.float32),)), fmt, reference, samples)
        after = truth_map50(reference, fmt, reference, samples)
        if before is not None and after is not None:
            head, sep, tail = message.partition(")")
            message = (f"{head}{sep}: mAP@0.5 against the labels {after:.3f} falls to {before:.3f} with the float "
                       f"outputs rounded to that one scale{tail}")
    if src.head_split is not None or not split_requested:
        return message
    return (message.split(", so int8")[0] + ", so int8 detections collapse. edgekit could not split this head "
            "(its output is not a Concat of boxes and scores): export it with boxes and scores as two outputs")


TRUTH_SCORE_FLOOR = 0.01  # detections down to this score are ranked against labelled objects (AP needs the tail)


def truth_map50(outputs: ModelOutputs, fmt: OutputFormat, reference: ModelOutputs, samples: Samples,
                roles: Sequence[str] | None = None) -> float | None:
    """mAP@0.5 of a detector's outputs against the labelled objects of `samples` (None: no truth),
    decoded as the device decodes them (`roles`: a two-output head's, as the file states them) and
    mapped onto each image through its transform."""
    from edgekit.contract import map50
    from edgekit.contract.metadata import DetectionMetadata, ModelMetadata
    from edgekit.converters.evaluate import detection_metadata, detections

    if samples.truth is None:
        return None
    meta = ModelMetadata(output_format=fmt,
                         detection=detection_metadata(fmt, reference, roles=roles) or DetectionMetadata())
    return map50(samples.truth, detections(outputs, meta, TRUTH_SCORE_FLOOR, samples.transforms))
