"""One place that tells a model's input kind and loads it: a SavedModel folder or a Keras file
(:mod:`edgekit.converters.source`), ONNX (:mod:`edgekit.converters.onnx_source`) or a float .tflite
(:mod:`edgekit.converters.tflite_source`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from edgekit.converters.onnx_source import load_onnx
from edgekit.converters.source import SourceModel, load_keras
from edgekit.converters.tflite_source import load_float_tflite
from edgekit.errors import InputError

__all__ = ["load_source"]


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
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.exists():
            raise InputError(f"model {str(path)!r} does not exist; pass a .keras or .h5 file or a SavedModel folder")
        if path.suffix.lower() == ".onnx" and not path.is_dir():
            return load_onnx(path, input_size, layout, split_head, verbose)
        if path.suffix.lower() == ".tflite" and not path.is_dir():  # a float .tflite, quantized by ai-edge-quantizer
            return load_float_tflite(path, input_size, split_head)
    return load_keras(model, input_size, split_head=split_head)
