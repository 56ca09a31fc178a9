"""What every post-training quantizer engine is and gives (TFLiteConverter's in
:mod:`edgekit.converters.engines.tflite_converter`, ai-edge-quantizer's in :mod:`edgekit.converters.engines.aiq`):
the modes' settings, a layer's quantization error, and the engine protocol."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np

from edgekit.converters.options import Mode
from edgekit.converters.sources.base import SourceModel
from edgekit.runtimes.tflite_file import parse_tflite

__all__ = ["Kernels", "ModeSettings", "MODE_SETTINGS", "Representative", "LayerError", "LayerDiagnosis", "QuantizerEngine",
           "io_dtypes"]

Representative = Callable[[], Iterator[list[np.ndarray]]]


class Kernels(Enum):
    """Which kernels a mode's model may use."""

    BUILTINS = "builtins"  # float kernels (float16 weights, dynamic range too)
    INT8 = "int8"  # integer-only kernels
    INT16X8 = "int16x8"  # int16 activations, int8 weights
    WEIGHT_ONLY = "weight-only"  # int8 weights dequantized at load (ai-edge-quantizer's; TFLiteConverter has none)


@dataclass(frozen=True)
class ModeSettings:
    """What a mode asks of a post-training quantizer."""

    optimize: bool  # quantize at all
    float16_weights: bool
    ops: Kernels
    io: str | None  # integer input/output type, None for float


MODE_SETTINGS: dict[Mode, ModeSettings] = {
    Mode.FLOAT32: ModeSettings(False, False, Kernels.BUILTINS, None),
    Mode.FLOAT16: ModeSettings(True, True, Kernels.BUILTINS, None),
    Mode.DYNAMIC: ModeSettings(True, False, Kernels.BUILTINS, None),
    Mode.WEIGHT_ONLY: ModeSettings(True, False, Kernels.WEIGHT_ONLY, None),  # ai-edge-quantizer's; TFLiteConverter has none
    Mode.INT8: ModeSettings(True, False, Kernels.INT8, "int8"),
    Mode.UINT8: ModeSettings(True, False, Kernels.INT8, "uint8"),
    Mode.INT8_FLOAT_IO: ModeSettings(True, False, Kernels.INT8, None),
    Mode.INT16X8: ModeSettings(True, False, Kernels.INT16X8, None),
    Mode.EDGETPU: ModeSettings(True, False, Kernels.INT8, "uint8"),
}


@dataclass(frozen=True)
class LayerError:
    """How far one quantized layer's output is from its float value (on the debug data)."""

    name: str  # short, for people
    tensor_name: str  # what the quantizer calls it (the node to keep in float)
    op: str
    rmse: float
    scale: float
    max_abs_error: float
    elements: int

    @property
    def rmse_over_scale(self) -> float:
        """RMSE in quantization steps: about 0.29 (1/sqrt(12)) is pure rounding; above ~0.7 is suspect."""
        return self.rmse / self.scale if self.scale > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        ratio = self.rmse_over_scale
        return {"name": self.name, "tensor": self.tensor_name, "op": self.op, "rmse": self.rmse,
                "scale": self.scale, "rmse_over_scale": ratio if np.isfinite(ratio) else None,
                "max_abs_error": self.max_abs_error, "elements": self.elements}


class LayerDiagnosis(Protocol):
    """Per-layer errors of a calibrated model, and re-quantization with some layers in float."""

    layers: list[LayerError]

    def quantize_keeping_float(self, tensor_names: Sequence[str]) -> bytes: ...


class QuantizerEngine(Protocol):
    """A post-training quantizer edgekit can drive."""

    name: str
    version: str

    def convert(self, model: SourceModel, mode: Mode, representative: Representative | None) -> bytes:
        """The .tflite bytes of `model` in `mode` (calibrated on `representative` when the mode needs it)."""
        ...

    def diagnose(self, model: SourceModel, mode: Mode, representative: Representative,
                 debug_data: Representative) -> LayerDiagnosis:
        """Calibrate once and measure each layer's quantization error on `debug_data`."""
        ...


def io_dtypes(model: bytes) -> tuple[list[str], list[str]]:
    """The element types of a .tflite model's inputs and outputs."""
    parsed = parse_tflite(model, label="the converted model")
    sg = parsed.subgraphs[0]
    return [sg.tensors[i].type for i in sg.inputs], [sg.tensors[i].type for i in sg.outputs]
