"""Modes -> converter settings, and the one place that calls TFLiteConverter.

The quantizer is an engine behind a small protocol (:class:`QuantizerEngine`) so that
another one (ai-edge-quantizer, for instance) can replace TFLiteConverter's
post-training quantization without touching data loading, evaluation, the gate, the
fallback loop or the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np

from edgekit.converters._native import import_tensorflow, native_tail
from edgekit.converters.options import Mode
from edgekit.converters.source import SourceModel
from edgekit.errors import ConversionError
from edgekit.runtimes.tflite_file import parse_tflite

__all__ = [
    "ModeSettings",
    "MODE_SETTINGS",
    "Representative",
    "LayerError",
    "LayerDiagnosis",
    "QuantizerEngine",
    "TFLiteConverterEngine",
    "io_dtypes",
]

Representative = Callable[[], Iterator[list[np.ndarray]]]


@dataclass(frozen=True)
class ModeSettings:
    """What a mode asks of a post-training quantizer."""

    optimize: bool  # quantize at all
    float16_weights: bool
    ops: str  # "builtins" | "int8" (integer-only kernels) | "int16x8"
    io: str | None  # integer input/output type, None for float


MODE_SETTINGS: dict[Mode, ModeSettings] = {
    Mode.FLOAT32: ModeSettings(False, False, "builtins", None),
    Mode.FLOAT16: ModeSettings(True, True, "builtins", None),
    Mode.DYNAMIC: ModeSettings(True, False, "builtins", None),
    Mode.WEIGHT_ONLY: ModeSettings(True, False, "weight-only", None),  # ai-edge-quantizer's; TFLiteConverter has none
    Mode.INT8: ModeSettings(True, False, "int8", "int8"),
    Mode.UINT8: ModeSettings(True, False, "int8", "uint8"),
    Mode.INT8_FLOAT_IO: ModeSettings(True, False, "int8", None),
    Mode.INT16X8: ModeSettings(True, False, "int16x8", None),
    Mode.EDGETPU: ModeSettings(True, False, "int8", "uint8"),
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


class TFLiteConverterEngine:
    """TensorFlow's TFLiteConverter post-training quantization (and its QuantizationDebugger)."""

    name = "tflite-converter"

    def __init__(self) -> None:
        self._tf = import_tensorflow()
        self.version = f"tensorflow {self._tf.__version__}"

    def _converter(self, model: SourceModel) -> Any:
        lite = self._tf.lite
        if model.saved_model_dir is not None:
            return lite.TFLiteConverter.from_saved_model(str(model.saved_model_dir))
        return lite.TFLiteConverter.from_keras_model(model.keras_model)

    def _configure(self, conv: Any, mode: Mode, representative: Representative | None) -> Any:
        tf, s = self._tf, MODE_SETTINGS[mode]
        if not s.optimize:
            return conv
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        if s.float16_weights:
            conv.target_spec.supported_types = [tf.float16]
        if mode.needs_calibration:
            if representative is None:
                raise ConversionError(f"mode {mode.value!r} needs calibration data: pass --calibration "
                                      "(an image folder, .npy or .npz)")
            conv.representative_dataset = representative
        if s.ops == "int8":
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        elif s.ops == "int16x8":
            conv.target_spec.supported_ops = [
                tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        if s.io is not None:
            conv.inference_input_type = conv.inference_output_type = getattr(tf, s.io)
        return conv

    def convert(self, model: SourceModel, mode: Mode, representative: Representative | None) -> bytes:
        """Convert `model` in `mode`.

        Raises:
            ConversionError: the converter failed (unsupported op, bad calibration data, ...).
        """
        if MODE_SETTINGS[mode].ops == "weight-only":
            from edgekit.converters.aiq_engine import AiEdgeQuantizerEngine

            return AiEdgeQuantizerEngine().convert(model, mode, representative)
        conv = self._configure(self._converter(model), mode, representative)
        try:
            out = bytes(conv.convert())
        except ConversionError:
            raise
        except Exception as exc:  # noqa: BLE001 - TF raises ConverterError, ValueError, RuntimeError...
            raise _conversion_error(mode, exc) from None
        _check_io(out, mode)
        return out

    def diagnose(self, model: SourceModel, mode: Mode, representative: Representative,
                 debug_data: Representative) -> LayerDiagnosis:
        """Per-layer errors with tf.lite.experimental.QuantizationDebugger.

        Raises:
            ConversionError: the mode has no int8 layers, or the debugger failed.
        """
        from edgekit.converters.debug import DebuggerDiagnosis

        if not mode.int8_body:
            raise ConversionError(f"per-layer diagnosis applies to int8 modes, not {mode.value!r}")
        # The debugger calibrates with float I/O and quantizes itself; I/O types are set after.
        conv = self._configure(self._converter(model), Mode.INT8_FLOAT_IO, representative)
        return DebuggerDiagnosis(conv, debug_data, finalize=lambda b: self._finalize_io(b, mode))

    def _finalize_io(self, model: bytes, mode: Mode) -> bytes:
        from tensorflow.lite.python import util as lite_util  # the converter's own I/O rewrite

        io = MODE_SETTINGS[mode].io
        if io is None:
            return model
        dtype = getattr(self._tf, io)
        return bytes(lite_util.modify_model_io_type(model, dtype, dtype))


def _check_io(model: bytes, mode: Mode) -> None:
    ins, outs = io_dtypes(model)
    want = MODE_SETTINGS[mode].io
    if want is not None and any(t != want for t in ins):
        raise ConversionError(f"mode {mode.value!r} should give {want} inputs, the converter gave {ins}; "
                              "the model's first op may not be quantizable")


def _conversion_error(mode: Mode, exc: Exception) -> ConversionError:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if "error" in ln.lower()] or text.splitlines()[:1]
    logged = [ln.strip() for ln in native_tail().splitlines() if "error" in ln.lower()][-2:]
    detail = " | ".join(dict.fromkeys(lines + logged))[:600] or type(exc).__name__
    hint = ""
    if mode.int8_body and any(w in text.lower() for w in ("quantiz", "int8", "not supported")):
        hint = " An op may have no int8 kernel: try --mode dynamic or float16, or replace the op."
    return ConversionError(f"TFLiteConverter failed in mode {mode.value!r}: {detail}.{hint} "
                           "Run with --verbose to see the converter's log.")
