"""The models edgekit converts, one source per input kind, and the one place that tells the kind.

* :mod:`~edgekit.converters.sources.keras`: a Keras file or model, or a SavedModel folder;
* :mod:`~edgekit.converters.sources.onnx`: ONNX, through onnx2tf, with onnxruntime as its float reference;
* :mod:`~edgekit.converters.sources.tflite`: a float .tflite, quantized by ai-edge-quantizer.

Each gives a :class:`~edgekit.converters.sources.base.SourceModel`, which says itself how it becomes
what the engines (:mod:`edgekit.converters.engines`) read; nothing else switches on the kind.
"""

from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import Any

from edgekit.converters.sources.base import INPUT_KINDS, FloatReference, PreprocessingHint, SourceModel
from edgekit.errors import InputError

__all__ = ["ModelKind", "model_kind", "load_source", "SourceModel", "FloatReference", "PreprocessingHint",
           "INPUT_KINDS"]


class ModelKind(enum.Enum):
    """What a model given to the converter is, and what it needs installed."""

    KERAS = "keras"  # a .keras/.h5 file, a SavedModel folder or a keras.Model
    ONNX = "onnx"  # onnx, onnxruntime and onnx2tf
    FLOAT_TFLITE = "tflite"  # ai-edge-quantizer


def model_kind(model: Any) -> ModelKind:
    """The kind of `model` (a path or a keras.Model), by its name alone: nothing is read or imported."""
    if isinstance(model, (str, os.PathLike)):
        suffix = Path(model).suffix.lower()
        if suffix == ".onnx" and not Path(model).is_dir():
            return ModelKind.ONNX
        if suffix == ".tflite" and not Path(model).is_dir():
            return ModelKind.FLOAT_TFLITE
    return ModelKind.KERAS


def load_source(model: Any, input_size: tuple[int, int] | None = None, *, layout: str | None = None,
                split_head: bool = True, verbose: bool = False) -> SourceModel:
    """Load `model` (.keras/.h5 path, SavedModel folder, .onnx, float .tflite, or keras.Model) with a batch of 1.

    Args:
        input_size: (width, height) for models whose spatial size is not fixed.
        layout: "nchw"/"nhwc" for an ONNX input whose shape reads both ways.
        split_head: split a YOLO head whose one output mixes boxes and scores (ONNX and Keras).

    Raises:
        InputError: the path does not exist or is not a model edgekit converts.
        ConversionError: the model cannot be loaded, has several inputs, or an unknown size.
    """
    if isinstance(model, (str, os.PathLike)) and not Path(model).exists():
        raise InputError(f"model {str(model)!r} does not exist; pass a .keras or .h5 file or a SavedModel folder")
    kind = model_kind(model)
    if kind is ModelKind.ONNX:
        from edgekit.converters.sources.onnx import load_onnx

        return load_onnx(Path(model), input_size, layout, split_head, verbose)
    if kind is ModelKind.FLOAT_TFLITE:
        from edgekit.converters.sources.tflite import load_float_tflite

        return load_float_tflite(Path(model), input_size, split_head)
    from edgekit.converters.sources.keras import load_keras

    return load_keras(model, input_size, split_head=split_head)
