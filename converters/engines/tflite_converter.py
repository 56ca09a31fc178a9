"""Modes -> converter settings, and the one place that calls TFLiteConverter.

The quantizer is an engine behind a small protocol (:class:`QuantizerEngine`) so that
another one (ai-edge-quantizer, for instance) can replace TFLiteConverter's
post-training quantization without touching data loading, evaluation, the gate, the
fallback loop or the report.
"""

from __future__ import annotations

from typing import Any, Callable

from edgekit.converters._native import import_tensorflow, native_tail
from edgekit.converters.options import Mode
from edgekit.converters.engines.base import (
    MODE_SETTINGS,
    Kernels,
    LayerDiagnosis,
    LayerError,
    ModeSettings,
    QuantizerEngine,
    Representative,
    io_dtypes,
)
from edgekit.converters.sources.base import SourceModel
from edgekit.errors import ConversionError

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

class TFLiteConverterEngine:
    """TensorFlow's TFLiteConverter post-training quantization (and its QuantizationDebugger)."""

    name = "tflite-converter"

    def __init__(self, weight_only: Callable[[], QuantizerEngine] | None = None) -> None:
        """``weight_only`` makes the engine for the one mode TFLiteConverter lacks (``default_engine``
        passes ai-edge-quantizer's)."""
        self._tf = import_tensorflow()
        self.version = f"tensorflow {self._tf.__version__}"
        self.weight_only = weight_only

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
        if s.ops is Kernels.INT8:
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        elif s.ops is Kernels.INT16X8:
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
        if MODE_SETTINGS[mode].ops is Kernels.WEIGHT_ONLY:  # TFLiteConverter has none: the engine given for it
            if self.weight_only is None:
                raise ConversionError(f"TFLiteConverter has no {mode.value!r} mode; convert with "
                                      "edgekit.converters.engines.aiq.AiEdgeQuantizerEngine (default_engine picks it)")
            return self.weight_only().convert(model, mode, representative)
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
