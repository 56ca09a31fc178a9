"""What every model source gives the converter (:mod:`edgekit.converters.sources`).

One :class:`SourceModel` per input kind (Keras/SavedModel, ONNX, float .tflite): each says how it
becomes a SavedModel or a float .tflite and what runs as its float reference, so that the pipeline
never asks which kind it holds.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from edgekit.contract.enums import BoxMapping, Interpolation, ResizeMode

if TYPE_CHECKING:
    from edgekit.converters.yolo_head import HeadSplit

__all__ = ["SourceModel", "NormalizationLayer", "FloatReference", "PreprocessingHint", "INPUT_KINDS"]

SplitT = TypeVar("SplitT")  # edgekit.converters.data.DataSplit (which imports this module)

# What `edgekit convert` takes, for --help and error messages.
INPUT_KINDS = ("Keras (.keras/.h5)", "SavedModel folder", "ONNX (.onnx, via onnx2tf)", "float .tflite")


class FloatReference(Protocol):
    """The float model the accuracy check measures against, when it is not the float .tflite
    (an ONNX model run by onnxruntime, a Keras model whose head was split for conversion)."""

    name: str

    def run(self, x: np.ndarray) -> list[np.ndarray]:
        """The model's outputs (with their batch axis of 1) for one sample of model inputs (batch 1)."""
        ...


@dataclass(frozen=True)
class PreprocessingHint:
    """Preprocessing a source states (e.g. an exporter's metadata): real input = (pixel - mean) / std."""

    mean: tuple[float, ...]
    std: tuple[float, ...]
    resize: ResizeMode  # (or its name: "stretch" | "letterbox"; parsed here, once)
    description: str
    # how the device shrinks frames and maps letterboxed boxes back: Ultralytics' models are read as
    # its predict does, LINEAR and ULTRALYTICS
    interpolation: Interpolation = Interpolation.AUTO
    box_mapping: BoxMapping = BoxMapping.EXACT
    pad_value: int | None = None  # the letterbox border (None: edgekit's gray 114)

    def __post_init__(self) -> None:
        object.__setattr__(self, "resize", ResizeMode.parse(self.resize))
        object.__setattr__(self, "interpolation", Interpolation.parse(self.interpolation))
        object.__setattr__(self, "box_mapping", BoxMapping.parse(self.box_mapping))


@dataclass(frozen=True)
class NormalizationLayer:
    """A first layer that normalizes pixels inside the model (so the device feeds raw pixels)."""

    kind: str  # "Rescaling" | "Normalization"
    description: str


@dataclass
class SourceModel:
    """A model ready for the converter, with what we learned about its input.

    Use as a context manager: a re-exported SavedModel lives in a temporary folder.
    """

    name: str
    sha256: str
    input_shape: tuple[int, ...]  # with the batch of 1
    input_dtype: str
    keras_model: Any | None = None  # kept for inspecting its layers
    saved_model_dir: Path | None = None  # what the converter reads: a batch-1 SavedModel
    model_name: str = ""  # Keras' own name ('mobilenetv2_1.00_224'), for preprocessing hints
    normalization: NormalizationLayer | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)
    reference: FloatReference | None = None  # None: the float32 .tflite is the reference
    head_split: HeadSplit | None = None  # a YOLO head split into boxes and scores for conversion
    labels: tuple[str, ...] | None = None  # class names the model itself carries
    preprocessing_hint: PreprocessingHint | None = None
    # a head already split into two outputs ("boxes"/"scores" in output order), as the file's edgekit
    # metadata states: with C == 4 classes both are [1, 4, N] and only these roles tell them apart
    output_roles: tuple[str, ...] | None = None

    @property
    def is_image(self) -> bool:
        return len(self.input_shape) == 4 and self.input_shape[-1] in (1, 3)

    @property
    def model_input_shape(self) -> tuple[int, ...]:
        """The shape the model's input tensor takes (channel-first for an NCHW .tflite)."""
        return self.input_shape

    @property
    def float_tflite(self) -> bytes | None:
        """The float .tflite this source already is, or None: TFLiteConverter makes it from the SavedModel."""
        return None

    def build(self, x: np.ndarray | None, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        """Make what the converter reads, once calibration inputs `x` and their normalization are known
        (ONNX runs onnx2tf here). The other kinds are ready from the start."""

    def to_model_layout(self, data: SplitT) -> SplitT:
        """The calibration/validation split with its samples in the model's own layout (images are
        prepared as (N, H, W, C) everywhere in edgekit)."""
        return data

    def close(self) -> None:
        """Remove the temporary SavedModel, if any. Safe to call twice."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> SourceModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


