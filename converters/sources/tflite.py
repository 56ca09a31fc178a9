"""A float .tflite as the model to convert: checked, its layout read, itself the float reference.

Ultralytics' own TFLite export (through litert-torch), MediaPipe's float models and vendors'
files arrive as float32 flatbuffers. edgekit quantizes them with ai-edge-quantizer
(:mod:`edgekit.converters.engines.aiq`) and measures the result against the very file the
user started from, run by the device's interpreter.

Models whose input is channel-first, ``(1, 3, H, W)`` as litert-torch writes them, are
prepared like any image model (images resized and normalized as (H, W, 3)) and transposed
into the model's layout at the end, for calibration and for the accuracy check alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from edgekit.contract.enums import BoxMapping, Interpolation, Layout, ResizeMode
from edgekit.contract.metadata import ModelMetadata
from edgekit.converters.data import DataSplit, Samples
from edgekit.converters.sources.base import PreprocessingHint, SourceModel, SplitT
from edgekit.converters.tflite_head import TFLiteReference, split_tflite_head
from edgekit.runtimes.support_metadata import read_support_metadata
from edgekit.errors import ConversionError, InputError, ModelError
from edgekit.runtimes.tflite_file import TFLiteFile, parse_tflite

__all__ = ["FloatTFLiteSource", "load_float_tflite", "quantized_parts", "exporter_hints"]

_QUANTIZED_TYPES = ("int8", "uint8", "int16", "int4")


@dataclass
class FloatTFLiteSource(SourceModel):
    """A float32 .tflite to quantize. ``input_shape`` is the image view (1, H, W, C) whatever
    the model's own layout; ``model_shape`` is the model's input tensor as it is."""

    float_model: bytes = b""
    layout: Layout = Layout.NHWC
    model_shape: tuple[int, ...] = ()

    @property
    def model_input_shape(self) -> tuple[int, ...]:
        return self.model_shape

    @property
    def float_tflite(self) -> bytes | None:
        return self.float_model

    def to_model_layout(self, data: SplitT) -> SplitT:
        """An NCHW model gets its (N, H, W, C) images transposed."""
        if self.layout is not Layout.NCHW:
            return data
        split, shape = cast(DataSplit, data), self.model_shape

        def nchw(samples: Samples | None) -> Samples | None:
            if samples is None or samples.x.ndim != 4 or tuple(samples.x.shape[1:]) == tuple(shape[1:]):
                return samples
            return dataclasses.replace(samples, x=np.ascontiguousarray(samples.x.transpose(0, 3, 1, 2)))

        return cast(SplitT, dataclasses.replace(split, calibration=nchw(split.calibration),
                                                validation=nchw(split.validation)))

    def close(self) -> None:
        """Release the reference interpreter and remove the temporary folder. Safe to call twice."""
        if isinstance(self.reference, TFLiteReference):
            self.reference.close()
        super().close()


def quantized_parts(model: TFLiteFile) -> str | None:
    """What makes a .tflite already quantized (integer or float16 tensors), or None for a float32 model."""
    sg = model.subgraphs[0]
    io = [sg.tensors[i] for i in (*sg.inputs, *sg.outputs)]
    io_types = sorted({t.type for t in io if t.type in _QUANTIZED_TYPES})
    if io_types:
        return f"{'/'.join(io_types)} inputs or outputs"
    quantized = [t for s in model.subgraphs for t in s.tensors if t.type in _QUANTIZED_TYPES and t.scale]
    if quantized:
        return f"{len(quantized)} {'/'.join(sorted({t.type for t in quantized}))} quantized tensors"
    halves = [t for s in model.subgraphs for t in s.tensors if t.type == "float16"]
    if halves:
        return f"{len(halves)} float16 tensors"
    return None


def load_float_tflite(path: Path, input_size: tuple[int, int] | None = None,
                      split_head: bool = True) -> FloatTFLiteSource:
    """Read and check a float32 .tflite for quantization.

    Args:
        input_size: (width, height); only checked against the model's fixed size.
        split_head: a YOLO output that concatenates boxes and scores becomes two outputs (each
            with its own int8 scale); the file as given stays the float reference.

    Raises:
        InputError: the file is not a whole TFLite model, is already quantized or compiled
            for the Edge TPU, or ``input_size`` contradicts the model.
        ConversionError: several inputs, a batch other than 1, or a dynamic input size.
    """
    label = repr(str(path))
    data = path.read_bytes()
    try:
        parsed = parse_tflite(data, label=label)
    except ModelError as exc:
        raise InputError(str(exc)) from None
    if parsed.edgetpu_compiled:
        raise InputError(f"{label} is compiled for the Edge TPU; `edgekit convert` quantizes float32 models: pass "
                         "the float .tflite (or the Keras/ONNX model) it came from")
    if (why := quantized_parts(parsed)) is not None:
        raise InputError(f"{label} is already quantized ({why}); `edgekit convert` quantizes float32 models: pass "
                         "the float .tflite (or the Keras/ONNX model) it came from, or inspect it with `edgekit info`")
    sg = parsed.subgraphs[0]
    if len(sg.inputs) != 1:
        raise ConversionError(f"{label} has {len(sg.inputs)} inputs; edgekit converts single-input models")
    tensor = sg.tensors[sg.inputs[0]]
    shape, signature = tuple(tensor.shape), tuple(tensor.shape_signature or tensor.shape)
    if tensor.type != "float32":
        raise InputError(f"{label} takes {tensor.type} input; edgekit quantizes float32 models")
    if not shape or shape[0] != 1:
        raise ConversionError(f"{label} has input shape {list(shape)}; edgekit converts models with a batch of 1. "
                              "Re-export with a fixed batch of 1")
    if any(d < 0 for d in signature[1:]):
        raise ConversionError(f"{label} has input shape {list(signature)} with dynamic sizes; re-export it with a "
                              "fixed input size (e.g. Ultralytics' imgsz=...)")
    layout, view = _layout(shape)
    if input_size is not None and len(view) == 4 and (view[2], view[1]) != tuple(input_size):
        raise InputError(f"{label} takes {view[2]}x{view[1]} images; --input-size {input_size[0]}x{input_size[1]} "
                         "does not fit. A .tflite's size is fixed: drop the flag or re-export the model")
    labels, hint = exporter_hints(data, parsed)
    model = _with_signature(data, parsed)
    src = FloatTFLiteSource(name=path.name, sha256=hashlib.sha256(data).hexdigest(), input_shape=view,
                            input_dtype="float32", model_name=path.stem, float_model=model, layout=layout,
                            model_shape=shape, labels=labels, preprocessing_hint=hint,
                            output_roles=stated_roles(data, parsed, len(sg.outputs)))
    split = split_tflite_head(model, parse_tflite(model, label=label)) if split_head else None
    if split is not None:
        src._tmp = tempfile.TemporaryDirectory(prefix="edgekit-tflite-")
        original = Path(src._tmp.name) / path.name
        original.write_bytes(model)
        src.float_model, src.head_split = split
        src.reference = TFLiteReference(original, path.name)
    return src


def exporter_hints(data: bytes, parsed: TFLiteFile) -> tuple[tuple[str, ...] | None, PreprocessingHint | None]:
    """Class names and preprocessing the file states: edgekit's own metadata, TFLite Support metadata
    (MediaPipe, Model Maker: NormalizationOptions and a label file), or the metadata.json Ultralytics'
    exporter appends in a zip (names by class id; its models take RGB / 255, letterboxed)."""
    from edgekit.contract.preprocessing import Provenance, preprocessing_for
    from edgekit.runtimes.tensors import model_info

    hint: PreprocessingHint | None
    try:  # the file's metadata as the device reads it (its edgekit metadata, parsed; its TFLite metadata)
        info = model_info("", data, parsed)
        labels = ModelMetadata.parse(info.metadata).labels or None
        dev = preprocessing_for(info)
    except ModelError:
        info, labels, dev = None, None, None
    own = (Provenance.EDGEKIT, Provenance.ULTRALYTICS)  # Ultralytics' own metadata, translated, is edgekit's
    if dev is not None and dev.sources.get("normalization") in own and dev.normalization is not None \
            and dev.normalization.mean is not None and dev.normalization.std is not None:
        hint = PreprocessingHint(dev.normalization.mean, dev.normalization.std, dev.resize,
                                 "the model's edgekit metadata", dev.interpolation, dev.box_mapping)
        return labels, hint
    support = info.support if info is not None else read_support_metadata(data, parsed)  # MediaPipe / Model Maker
    if support is not None:
        hint = None
        if support.mean and support.std:
            # The rest as the device decides it for this file (its family's preset, else the convention).
            dev = dev if dev is not None else preprocessing_for(model_info("", data, parsed))
            hint = PreprocessingHint(support.mean, support.std, dev.resize,
                                     "the model's TFLite metadata (NormalizationOptions)"
                                     + (f" and the {dev.preset} preset" if dev.preset else ""),
                                     dev.interpolation, dev.box_mapping,
                                     dev.pad_value if dev.preset else None)
        return support.labels, hint
    exported = _ultralytics_metadata(data)
    if exported is None:
        return None, None
    from edgekit.contract.ultralytics import ultralytics_names  # by class id, as the device reads them

    names = ultralytics_names(exported)
    hint = PreprocessingHint((0.0,), (255.0,), ResizeMode.LETTERBOX,
                             "Ultralytics export metadata (RGB / 255, letterbox)",
                             Interpolation.LINEAR, BoxMapping.ULTRALYTICS)
    return (tuple(names) if names else None), hint


def stated_roles(data: bytes, parsed: TFLiteFile, outputs: int) -> tuple[str, ...] | None:
    """The ``detection.outputs`` roles of the file's edgekit metadata ("boxes"/"scores" in output
    order) when it has two outputs, else None (the shapes decide, as on the device)."""
    from edgekit.runtimes.metadata import read_metadata

    try:
        roles = ModelMetadata.parse(read_metadata(data, parsed)).detection.outputs
    except ModelError:
        return None
    if outputs != 2 or roles is None or sorted(roles) != ["boxes", "scores"]:
        return None
    return roles


def _ultralytics_metadata(data: bytes) -> dict[str, Any] | None:
    from edgekit.contract.ultralytics import read_ultralytics  # bounded, never eval

    doc = read_ultralytics(data)
    if not isinstance(doc, dict) or "ultralytics" not in str(doc.get("author", "")).lower() + \
            str(doc.get("description", "")).lower():
        return None
    return doc


def _layout(shape: tuple[int, ...]) -> tuple[Layout, tuple[int, ...]]:
    """The input's layout and its (1, H, W, C) view: channel-first when only the second axis reads as channels."""
    if len(shape) == 4 and shape[1] in (1, 3) and shape[3] not in (1, 3):
        return Layout.NCHW, (shape[0], shape[2], shape[3], shape[1])
    return Layout.NHWC, shape


def _with_signature(data: bytes, parsed: TFLiteFile) -> bytes:
    """The model with a 'serving_default' signature added when it has none (the quantizer feeds by signature)."""
    if parsed.signature_keys:
        return data
    try:
        import flatbuffers
        from ai_edge_litert import schema_py_generated as schema
    except ImportError as exc:
        raise ConversionError(f"the model has no signature and adding one needs flatbuffers ({exc})") from None
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    sg = model.subgraphs[0]

    def names(indices: Any, what: str) -> list[Any]:
        out = []
        for n, i in enumerate(indices):
            raw = sg.tensors[i].name
            out.append(schema.TensorMapT())
            out[-1].name = (raw.decode() if isinstance(raw, bytes) else str(raw or f"{what}_{n}")).split(":")[0]
            out[-1].tensorIndex = int(i)
        return out

    sig = schema.SignatureDefT()
    sig.signatureKey, sig.subgraphIndex = "serving_default", 0
    sig.inputs, sig.outputs = names(sg.inputs, "input"), names(sg.outputs, "output")
    model.signatureDefs = [sig]
    builder = flatbuffers.Builder(len(data) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
