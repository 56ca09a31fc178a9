"""ai-edge-quantizer as a :class:`~edgekit.converters.engines.tflite_converter.QuantizerEngine`: it quantizes a float .tflite.

Google's successor to the converter's post-training quantization works on the flatbuffer
itself, so it takes the float .tflite files people already hold (Ultralytics' and
litert-torch's exports, MediaPipe's float models, a vendor's file) and the per-layer
recipes TFLiteConverter has no switch for: keep named ops or op types in float, int16
activations for named layers. Per-layer errors come from the quantizer's own validation
(every intermediate tensor of the float and the quantized model compared on real inputs),
so auto-fallback needs no TensorFlow debugger.
"""

from __future__ import annotations

import importlib
import os
import re
import warnings
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from edgekit.converters._native import INSTALL_HINT
from edgekit.converters.engines.aiq_ranges import min_max_calibrate, share_ranges
from edgekit.converters.engines.tflite_converter import TFLiteConverterEngine
from edgekit.converters.options import ConvertOptions, Mode
from edgekit.converters.engines.base import LayerError, QuantizerEngine, Representative
from edgekit.converters.sources.base import SourceModel
from edgekit.errors import ConversionError, InputError
from edgekit.runtimes.tflite_file import TFLiteFile, parse_tflite

__all__ = ["AiEdgeQuantizerEngine", "LayerRecipe", "AiqDiagnosis", "default_engine", "op_scopes"]

# Calibrated modes: (activation bits, float input/output).
_STATIC = {Mode.INT8: (8, False), Mode.UINT8: (8, True), Mode.EDGETPU: (8, True), Mode.INT8_FLOAT_IO: (8, True),
           Mode.INT16X8: (16, True)}


@dataclass(frozen=True)
class LayerRecipe:
    """Per-layer choices on top of the mode: ops kept in float, layers with int16 activations.

    Each entry is a TFLite op type (``CONCATENATION``, ``LOGISTIC``: every op of that type)
    or a piece of an op's output tensor name (``model/head/concat``: every op whose name
    contains it).
    """

    keep_float: tuple[str, ...] = ()
    int16: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.keep_float or self.int16)


def _aiq() -> tuple[Any, Any, Any, Any]:
    """(quantizer, recipe, qtyping, AlgorithmName), or one sentence saying how to install them."""
    try:
        quantizer = importlib.import_module("ai_edge_quantizer.quantizer")
        recipe = importlib.import_module("ai_edge_quantizer.recipe")
        qtyping = importlib.import_module("ai_edge_quantizer.qtyping")
        algos = importlib.import_module("ai_edge_quantizer.algorithm_manager")
    except ImportError as exc:
        raise ConversionError(f"quantizing a .tflite needs ai-edge-quantizer, which is not installed or does not "
                              f"import here ({exc}); run: {INSTALL_HINT}") from None
    return quantizer, recipe, qtyping, algos.AlgorithmName


def op_scopes(model: TFLiteFile) -> list[tuple[str, str, tuple[str, ...]]]:
    """(op type, scope, output tensor names) of each op in the main subgraph, in graph order.

    The scope is what the quantizer matches recipe regexes against: the op's output
    tensor names, each followed by ';'.
    """
    sg = model.subgraphs[0]
    out = []
    for op in sg.operators:
        names = tuple(sg.tensors[i].name for i in op.outputs if i >= 0 and sg.tensors[i].name)
        out.append((op.opcode, "".join(f"{n};" for n in names), names))
    return out


def default_engine(src: SourceModel, opts: ConvertOptions) -> QuantizerEngine:
    """The engine for a conversion: ai-edge-quantizer for a float .tflite source or a per-layer
    recipe (``opts.keep_float``/``opts.int16``), TFLiteConverter otherwise.

    Raises:
        ConversionError: ai-edge-quantizer is needed and not installed (the sentence names the pip command).
    """
    recipe = LayerRecipe(tuple(opts.keep_float), tuple(opts.int16))
    if src.float_tflite is not None or recipe:
        return AiEdgeQuantizerEngine(recipe)
    return TFLiteConverterEngine(weight_only=AiEdgeQuantizerEngine)


class AiEdgeQuantizerEngine:
    """Quantize a float .tflite with ai-edge-quantizer in an edgekit mode, with per-layer recipes.

    The source gives the float model: ``source.float_tflite`` (a float .tflite source), or
    TFLiteConverter's float32 conversion of a Keras/SavedModel source.
    """

    name = "ai-edge-quantizer"

    def __init__(self, recipe: LayerRecipe | None = None, threads: int | None = None) -> None:
        _aiq()
        from importlib.metadata import PackageNotFoundError, version

        try:
            self.version = f"ai-edge-quantizer {version('ai-edge-quantizer')}"
        except PackageNotFoundError:
            self.version = "ai-edge-quantizer"
        self.recipe = recipe or LayerRecipe()
        self.threads = threads or max(1, os.cpu_count() or 1)
        self._converted: tuple[Any, bytes] | None = None  # a Keras/SavedModel source's float .tflite, made once

    def float_model(self, model: SourceModel) -> bytes:
        """The float .tflite the quantizer starts from.

        Raises:
            ConversionError: TFLiteConverter could not make one from a Keras/SavedModel source.
        """
        data = model.float_tflite
        if data is not None:
            return bytes(data)
        if self._converted is None or self._converted[0] is not model:
            self._converted = (model, TFLiteConverterEngine().convert(model, Mode.FLOAT32, None))
        return self._converted[1]

    def convert(self, model: Any, mode: Mode, representative: Representative | None) -> bytes:
        """The float model quantized in `mode` (calibrated on `representative` for static modes).

        Raises:
            InputError: a recipe entry matches no op, or the mode needs calibration data.
            ConversionError: the mode is not one the quantizer gives, or the quantizer failed.
        """
        float_bytes = self.float_model(model)
        if mode is Mode.FLOAT32:  # the reference every mode is measured against
            return float_bytes
        session = _Session(float_bytes, mode, self.recipe, self.threads)
        return session.quantize(session.calibrate(representative))

    def diagnose(self, model: Any, mode: Mode, representative: Representative,
                 debug_data: Representative) -> AiqDiagnosis:
        """Calibrate once, quantize, and compare every intermediate tensor with the float model's.

        Raises:
            ConversionError: the mode has no int8 layers, or the quantizer failed.
        """
        if not mode.int8_body:
            raise ConversionError(f"per-layer diagnosis applies to int8 modes, not {mode.value!r}")
        session = _Session(self.float_model(model), mode, self.recipe, self.threads)
        return AiqDiagnosis(session, session.calibrate(representative), debug_data)


class _Session:
    """One float model, one mode: the recipe, calibration and quantization."""

    def __init__(self, float_bytes: bytes, mode: Mode, recipe: LayerRecipe, threads: int) -> None:
        self.quantizer_mod, self.recipes, self.qtyping, self.algo = _aiq()
        self.float_bytes, self.mode, self.recipe, self.threads = float_bytes, mode, recipe, threads
        self.parsed = parse_tflite(float_bytes, label="the float model")
        self.scopes = op_scopes(self.parsed)
        self.signature, self.input_name = _signature(float_bytes)

    def _quantizer(self, extra_float_scopes: Sequence[str] = ()) -> Any:
        q = self.quantizer_mod.Quantizer(bytearray(self.float_bytes))
        ops, none = self.qtyping.TFLOperationName, self.algo.NO_QUANTIZE
        mode = self.mode
        if mode in _STATIC:
            bits, float_io = _STATIC[mode]
            q.load_quantization_recipe(self.recipes.static_wi8_ai16() if bits == 16 else self.recipes.static_wi8_ai8())
            if float_io:  # the quantizer's own I/O is integer; float I/O puts QUANTIZE/DEQUANTIZE at the edges
                q.update_quantization_recipe(".*", ops.INPUT, algorithm_key=none)
                q.update_quantization_recipe(".*", ops.OUTPUT, algorithm_key=none)
        elif mode is Mode.DYNAMIC:
            q.load_quantization_recipe(self.recipes.dynamic_wi8_afp32())
        elif mode is Mode.WEIGHT_ONLY:
            q.load_quantization_recipe(self.recipes.weight_only_wi8_afp32())
        elif mode is Mode.FLOAT16:  # float16 weights cast back to float32 before each op
            qt = self.qtyping
            half = qt.OpQuantizationConfig(
                weight_tensor_config=qt.TensorQuantizationConfig(num_bits=16, dtype=qt.TensorDataType.FLOAT),
                compute_precision=qt.ComputePrecision.FLOAT, explicit_dequantize=True)
            q.update_quantization_recipe(".*", ops.ALL_SUPPORTED, half, algorithm_key=self.algo.FLOAT_CASTING)
        else:
            raise ConversionError(f"ai-edge-quantizer gives modes float16, dynamic, weight-only, int8, uint8, "
                                  f"int8-float-io and int16x8, not {mode.value!r}")
        if self.recipe.int16:
            if mode is Mode.EDGETPU:
                raise InputError("the Edge TPU does not run int16 activations: drop --int16, or use --mode int8")
            if mode not in _STATIC:
                raise InputError(f"--int16 gives layers int16 activations in a calibrated mode; mode {mode.value!r} "
                                 "has float activations. Use --mode int8")
            for entry in self.recipe.int16:
                regex, op = self._rule(entry, "--int16")
                q.add_static_config(regex, op, 16, 8)
        for entry in self.recipe.keep_float:
            regex, op = self._rule(entry, "--keep-float")
            q.update_quantization_recipe(regex, op, algorithm_key=none)
        for scope in extra_float_scopes:
            q.update_quantization_recipe(f"^{re.escape(scope)}$", ops.ALL_SUPPORTED, algorithm_key=none)
        return q

    def _rule(self, entry: str, flag: str) -> tuple[str, Any]:
        """(scope regex, op type) for a recipe entry: an op type, or a piece of op output names."""
        ops = self.qtyping.TFLOperationName
        types = {op for op, _, _ in self.scopes}
        if entry.upper() == entry and entry in types:
            try:
                return ".*", ops(entry)
            except ValueError:
                raise InputError(f"{flag} {entry}: ai-edge-quantizer does not quantize {entry} ops, so they stay "
                                 "float anyway") from None
        if any(entry in scope for _, scope, _ in self.scopes):
            return re.escape(entry), ops.ALL_SUPPORTED
        names = sorted(types) + [n for _, _, ns in self.scopes for n in ns][:8]
        raise InputError(f"{flag} {entry!r} matches no op of the model; give an op type or a piece of an op's "
                         f"output name, e.g. {', '.join(names[:10])} (`edgekit info --ops` lists them)")

    def calibrate(self, representative: Representative | None) -> dict[str, Any] | None:
        q = self._quantizer()
        if not q.need_calibration:
            return None
        if representative is None:
            raise InputError(f"mode {self.mode.value!r} calibrates activation ranges on real inputs: pass "
                             "--calibration (an image folder, .npy or .npz)")
        data = {self.signature: list(self._feed(representative))}
        try:  # min/max over all samples and shared ranges, as TFLiteConverter calibrates (see aiq_ranges)
            return share_ranges(self.parsed, min_max_calibrate(q, self.float_bytes, data, self.threads))
        except Exception as exc:  # noqa: BLE001 - the quantizer raises ValueError, RuntimeError, KeyError...
            raise _failed("calibration", exc) from None

    def _feed(self, representative: Representative) -> Iterator[dict[str, np.ndarray]]:
        for sample in representative():
            yield {self.input_name: np.asarray(sample[0], np.float32)}

    def quantize(self, calibration: dict[str, Any] | None, extra_float_scopes: Sequence[str] = ()) -> bytes:
        q = self._quantizer(extra_float_scopes)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                result = q.quantize(calibration, enable_progress_report=False)
        except Exception as exc:  # noqa: BLE001
            raise _failed("quantization", exc) from None
        model = inline_buffers(bytes(result.quantized_model))
        if self.mode in (Mode.UINT8, Mode.EDGETPU):
            model = _uint8_io(model)
        return model


class AiqDiagnosis:
    """Per-layer errors (every intermediate tensor of the float and quantized model compared on the
    debug data, :mod:`edgekit.converters.layer_errors`); re-quantization with layers kept in float."""

    def __init__(self, session: _Session, calibration: dict[str, Any] | None, debug_data: Representative) -> None:
        from edgekit.converters.layer_errors import layer_errors

        self._session, self._calibration = session, calibration
        # The int8 body with float I/O: the same layers, compared without the I/O rewrite of uint8 modes.
        quantized = _Session(session.float_bytes, Mode.INT8_FLOAT_IO, session.recipe, session.threads).quantize(
            calibration)
        inputs = (np.asarray(sample[0], np.float32) for sample in debug_data())
        self.layers: list[LayerError] = layer_errors(session.float_bytes, quantized, inputs)

    def quantize_keeping_float(self, tensor_names: Sequence[str]) -> bytes:
        """The model with the ops writing these tensors left in float (the mode's I/O kept).

        Raises:
            ConversionError: the quantizer refused.
        """
        wanted = set(tensor_names)
        scopes = [scope for _, scope, names in self._session.scopes if wanted & set(names)]
        return self._session.quantize(self._calibration, scopes)


def _signature(model: bytes) -> tuple[str, str]:
    """The model's signature key and its single input's name (the quantizer feeds by signature)."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=model)
    sigs = interp.get_signature_list()
    if not sigs:
        raise ConversionError("the float model has no signature; load it with edgekit's .tflite source, which "
                              "adds one")
    key = next(iter(sigs))
    inputs = sigs[key]["inputs"]
    if len(inputs) != 1:
        raise ConversionError(f"signature {key!r} has {len(inputs)} inputs; edgekit converts single-input models")
    return key, inputs[0]


def inline_buffers(model: bytes) -> bytes:
    """The model with every tensor's data inside the flatbuffer.

    ai-edge-quantizer writes models over 256 KB of weights with the data after the flatbuffer
    (buffers by offset, the format meant for models over 2 GB); interpreters read both, but
    metadata can only be added to a self-contained flatbuffer, and older runtimes (tflite-runtime
    2.14 on a Pi) do not read offsets.
    """
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    obj = schema.ModelT.InitFromPackedBuf(bytearray(model), 0)
    moved = False
    for buf in obj.buffers or []:
        if buf.offset and buf.offset > 1 and buf.size:
            buf.data = np.frombuffer(model, np.uint8, count=int(buf.size), offset=int(buf.offset)).copy()
            buf.offset, buf.size = 0, 0
            moved = True
    if not moved:
        return model
    builder = flatbuffers.Builder(len(model) + 4096)
    builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _uint8_io(model: bytes) -> bytes:
    """Float-I/O quantized model -> uint8 input and output (what the Edge TPU takes), by the converter's own rewrite."""
    from edgekit.converters._native import import_tensorflow

    tf = import_tensorflow()
    from tensorflow.lite.python import util as lite_util

    try:
        return bytes(lite_util.modify_model_io_type(model, tf.uint8, tf.uint8))
    except Exception as exc:  # noqa: BLE001
        raise _failed("the uint8 input/output rewrite", exc) from None


def _failed(step: str, exc: Exception) -> ConversionError:
    text = str(exc).strip().splitlines()
    detail = text[0][:400] if text else type(exc).__name__
    return ConversionError(f"ai-edge-quantizer failed in {step}: {detail}. An op may have no quantized kernel: "
                           "keep it in float with --keep-float OP, or try --mode dynamic or weight-only")
