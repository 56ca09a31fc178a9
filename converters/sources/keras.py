"""The model to convert: a Keras file, a SavedModel folder, or a Keras model in memory.

Whatever arrives is turned into something the converter takes with a fixed batch of 1
(a dynamic batch adds SHAPE/PACK ops that keep XNNPACK and the Edge TPU off parts of
the graph): a Keras model re-wrapped on a batch-1 Input, or a SavedModel re-exported
with a batch-1 signature.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.converters._native import import_keras, import_tensorflow
from edgekit.converters.sources.base import NormalizationLayer, SourceModel
from edgekit.errors import ConversionError, InputError

__all__ = ["load_keras", "KerasReference", "find_normalization"]

def load_keras(model: Any, input_size: tuple[int, int] | None = None, *, split_head: bool = True) -> SourceModel:
    """A Keras model (a .keras/.h5 path or a keras.Model) or a SavedModel folder, with a batch of 1
    (:func:`edgekit.converters.sources.load_source` routes every other kind).

    Raises:
        InputError: the path is not a Keras model file nor a SavedModel folder.
        ConversionError: the model cannot be loaded, has several inputs, or an unknown size.
    """
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if path.is_dir():
            return _from_saved_model(path, input_size)
        if path.suffix.lower() not in (".keras", ".h5", ".hdf5"):
            raise InputError(f"{str(path)!r} is not a Keras model file; expected .keras, .h5 or a SavedModel folder")
        keras = import_keras()
        try:
            loaded = keras.models.load_model(path, compile=False)
        except Exception as exc:  # noqa: BLE001 - Keras raises many kinds; the user needs one sentence
            raise ConversionError(f"Keras could not load {str(path)!r}: {_first_line(exc)}. If it uses custom "
                                  "layers, load it yourself and pass the keras.Model to convert()") from None
        return _from_keras(loaded, path.name, _sha256_file(path), input_size, split_head)
    if hasattr(model, "layers") and hasattr(model, "inputs"):
        return _from_keras(model, getattr(model, "name", "keras_model"), _sha256_weights(model), input_size,
                           split_head)
    raise InputError(f"cannot convert a {type(model).__name__}; pass a .keras/.h5 path, a SavedModel folder "
                     "or a keras.Model")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _fixed_shape(shape: tuple[Any, ...], input_size: tuple[int, int] | None, what: str) -> tuple[int, ...]:
    dims = list(shape)
    if len(dims) == 4 and input_size is not None:
        want = (input_size[1], input_size[0])
        fixed = [(d, s) for d, s in zip(dims[1:3], want) if d is not None and d >= 0]
        if any(d != s for d, s in fixed):
            raise InputError(f"{what} takes {dims[2]}x{dims[1]} images; --input-size "
                             f"{input_size[0]}x{input_size[1]} does not fit. Drop the flag or re-export the model")
        dims[1], dims[2] = want
    if any(d is None or d < 0 for d in dims[1:]):
        raise ConversionError(f"{what} has input shape {tuple(shape)} with unknown sizes; give the size "
                              "with --input-size WxH (input_size=(w, h))")
    return (1, *[int(d) for d in dims[1:]])


def _from_keras(model: Any, name: str, digest: str, input_size: tuple[int, int] | None,
                split_head: bool = True) -> SourceModel:
    from edgekit.converters.yolo_head import split_keras_head

    keras = import_keras()
    inputs = list(model.inputs or [])
    if len(inputs) != 1:
        raise ConversionError(f"model {name!r} has {len(inputs)} inputs; edgekit converts single-input models")
    spec = inputs[0]
    shape = _fixed_shape(tuple(spec.shape), input_size, f"model {name!r}")
    dtype = str(getattr(spec, "dtype", "float32"))
    split = split_keras_head(model) if split_head else None
    wrapped = split[0] if split is not None else model
    if tuple(spec.shape) != shape:
        x = keras.Input(shape=shape[1:], batch_size=1, dtype=dtype, name="input")
        wrapped = keras.Model(x, wrapped(x), name=f"{model.name}_batch1")
    src = SourceModel(name=name, sha256=digest, input_shape=shape, input_dtype=dtype, keras_model=wrapped,
                      model_name=str(model.name), normalization=find_normalization(model),
                      reference=KerasReference(model) if split is not None else None,
                      head_split=split[1] if split is not None else None)
    # TFLiteConverter.from_keras_model exports a SavedModel on every call (most of a small
    # model's conversion time); export once and convert every mode from it.
    src._tmp = tempfile.TemporaryDirectory(prefix="edgekit-keras-")
    out = Path(src._tmp.name) / "saved_model"
    try:
        wrapped.export(str(out), format="tf_saved_model", verbose=False)
    except Exception as exc:  # noqa: BLE001 - Keras/TF raise many kinds
        src.close()
        raise ConversionError(f"could not export {name!r} for the converter: {_first_line(exc)}") from None
    src.saved_model_dir = out
    return src


class KerasReference:
    """The Keras model as it was (before its head was split), run on one sample at a time."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self.name = f"keras model {model.name!r}"

    def run(self, x: np.ndarray) -> list[np.ndarray]:
        out = self._model(x, training=False)
        return [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]


def find_normalization(model: Any) -> NormalizationLayer | None:
    """The Rescaling or Normalization layer the model applies first, if any (nested models too)."""
    for layer in getattr(model, "layers", []):
        kind = type(layer).__name__
        if kind == "InputLayer":
            continue
        if kind == "Rescaling":
            return NormalizationLayer(kind, f"Rescaling(scale={_num(layer.scale)}, offset={_num(layer.offset)})")
        if kind == "Normalization":
            return NormalizationLayer(kind, "Normalization(mean/variance learned from data)")
        if hasattr(layer, "layers"):  # a nested model or Sequential: look at its first layer
            return find_normalization(layer)
        return None
    return None


def _num(value: Any) -> str:
    try:
        return f"{float(value):.6g}"
    except (TypeError, ValueError):
        return str(value)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _sha256_dir(path: Path) -> str:
    """A hash of a SavedModel folder: relative names and contents, in sorted order."""
    h = hashlib.sha256()
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        h.update(str(p.relative_to(path)).encode())
        h.update(bytes.fromhex(_sha256_file(p)))
    return h.hexdigest()


def _sha256_weights(model: Any) -> str:
    h = hashlib.sha256(model.to_json().encode() if hasattr(model, "to_json") else b"")
    for w in model.get_weights():
        h.update(w.tobytes())
    return h.hexdigest()


def _from_saved_model(path: Path, input_size: tuple[int, int] | None) -> SourceModel:
    if not (path / "saved_model.pb").exists():
        raise InputError(f"{str(path)!r} is a folder without saved_model.pb; pass a SavedModel folder "
                         "or a .keras/.h5 file")
    tf = import_tensorflow()
    try:
        loaded = tf.saved_model.load(str(path))
        sig = loaded.signatures["serving_default"]
    except KeyError:
        raise ConversionError(f"SavedModel {str(path)!r} has no 'serving_default' signature; export it with "
                              "one (model.export(path) in Keras)") from None
    except Exception as exc:  # noqa: BLE001
        raise ConversionError(f"TensorFlow could not load SavedModel {str(path)!r}: {_first_line(exc)}") from None
    specs = sig.structured_input_signature[1]
    if len(specs) != 1:
        raise ConversionError(f"SavedModel {str(path)!r} has {len(specs)} inputs; edgekit converts single-input models")
    input_name, spec = next(iter(specs.items()))
    shape = _fixed_shape(tuple(spec.shape.as_list()), input_size, f"SavedModel {str(path)!r}")
    src = SourceModel(name=path.name, sha256=_sha256_dir(path), input_shape=shape, input_dtype=spec.dtype.name,
                      saved_model_dir=path)
    if tuple(spec.shape.as_list()) == shape:
        return src
    src._tmp = tempfile.TemporaryDirectory(prefix="edgekit-savedmodel-")
    src.saved_model_dir = Path(src._tmp.name) / "fixed"
    _reexport_fixed(tf, loaded, sig, input_name, shape, spec.dtype, src.saved_model_dir)
    return src


def _reexport_fixed(tf: Any, loaded: Any, sig: Any, input_name: str, shape: tuple[int, ...], dtype: Any,
                    out: Path) -> None:
    """Save a SavedModel whose signature takes exactly `shape` (the converter then sees batch 1)."""
    module = tf.Module()
    module.loaded = loaded  # tracks the variables the signature captures

    @tf.function(input_signature=[tf.TensorSpec(shape, dtype, name=input_name)])
    def serve(x: Any) -> Any:
        return sig(**{input_name: x})

    module.serve = serve
    try:
        tf.saved_model.save(module, str(out), signatures={"serving_default": serve})
    except Exception as exc:  # noqa: BLE001
        raise ConversionError(f"could not re-export the SavedModel with a batch of 1: {_first_line(exc)}") from None
