"""A small anchor-free YOLO-style detector in Keras for the demo data set.

Output layout (YOLOv5 TFLite style, everything already decoded inside the model):
``[1, N, 5 + C]`` float with, per row, ``cx, cy, w, h`` normalised to [0, 1] of the input,
``objectness`` and ``C`` class probabilities (sigmoid applied); score = objectness * class prob.
N = (S/8)^2 + (S/16)^2 rows: the stride-8 grid row by row, then the stride-16 grid.
Input: float32 ``[1, S, S, 3]`` RGB pixels in [0, 255], stretched to S x S; the first layer is
``Rescaling(1/255)``, so the input tensor takes raw pixels (edgekit preprocessing mean 0, std 1).

Architecture: conv-BN-ReLU6 only (int8 friendly, every op runs on XNNPACK). A stride-8 head sees
defects and small parts, a stride-16 head sees parts; both end in a 1x1 conv with 5 + C channels.
The box decoding is ``sigmoid(raw) * gain + offset`` with per-row constants, so it is one LOGISTIC,
one MUL and one ADD in the .tflite.

TensorFlow is imported inside the functions that need it, never at module import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgekit.errors import ConversionError, InputError, ModelError

__all__ = ["DetectorConfig", "OUTPUT_FORMAT", "BOX_FORMAT", "STRIDES", "metadata", "build_model", "build_heads",
           "decode_constants", "export_saved", "load_saved", "predict", "require_keras"]

OUTPUT_FORMAT = "yolo"          # edgekit metadata "output_format"
BOX_FORMAT = "cxcywh"           # edgekit metadata "detection.box_format", normalised
STRIDES: tuple[int, ...] = (8, 16)
# Largest box side (fraction of the input) each head can express.
MAX_SIDE: tuple[float, ...] = (0.35, 1.0)
SMALL_OBJECT = 0.2              # max(w, h) at or below this goes to the stride-8 head
PRIOR = 0.01                    # initial objectness/class probability (focal-loss style bias init)


@dataclass(frozen=True)
class DetectorConfig:
    """Shape of the detector: classes, square input side (multiple of 16) and base width in channels."""

    num_classes: int = 4
    input_size: int = 160
    width: int = 32

    def __post_init__(self) -> None:
        if self.num_classes < 1:
            raise InputError(f"num_classes must be >= 1, got {self.num_classes}")
        if self.input_size < 32 or self.input_size % 16:
            raise InputError(f"input_size must be a multiple of 16 of at least 32, got {self.input_size}")
        if self.width < 8:
            raise InputError(f"width must be >= 8 channels, got {self.width}")

    @property
    def grids(self) -> tuple[int, ...]:
        return tuple(self.input_size // s for s in STRIDES)

    @property
    def num_rows(self) -> int:
        return sum(g * g for g in self.grids)


def metadata(input_size: int = 160, labels: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The edgekit metadata a converted demo detector should carry (labels, preprocessing, output format)."""
    from edgekit.contract import BoxFormat, OutputFormat, Task
    from edgekit.contract.metadata import DetectionMetadata, ModelMetadata
    from edgekit.demo.scene import CLASS_NAMES

    return ModelMetadata(
        task=Task.DETECT, labels=tuple(labels or CLASS_NAMES), output_format=OutputFormat(OUTPUT_FORMAT),
        preprocessing={"input_size": [input_size, input_size], "resize": "stretch", "color": "RGB",
                       "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0]},
        detection=DetectionMetadata(box_format=BoxFormat(BOX_FORMAT), normalized=True, iou_threshold=0.45),
    ).to_document()


def require_keras() -> Any:
    """Import Keras (TensorFlow backend) or explain how to get it.

    Raises:
        ConversionError: TensorFlow/Keras is not installed.
    """
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        os.environ.setdefault("KERAS_BACKEND", "tensorflow")
        import keras
    except ImportError as exc:
        raise ConversionError("training the demo detector needs TensorFlow and Keras: "
                              "pip install 'edgekit-tflite[convert]'") from exc
    return keras


def decode_constants(cfg: DetectorConfig) -> tuple[np.ndarray, np.ndarray]:
    """Per-row ``gain`` and ``offset`` [1, N, 5+C] so that output = sigmoid(raw) * gain + offset.

    x, y: (cell + 2*sigmoid - 0.5) * stride / S (a centre may sit up to half a cell outside its cell,
    which lets neighbour cells learn it too); w, h: sigmoid * MAX_SIDE of the head; the rest: sigmoid.
    """
    gains, offsets = [], []
    for stride, grid, side in zip(STRIDES, cfg.grids, MAX_SIDE):
        gy, gx = np.mgrid[0:grid, 0:grid].reshape(2, -1).astype(np.float32)
        cell = stride / cfg.input_size
        gain = np.ones((grid * grid, 5 + cfg.num_classes), np.float32)
        offset = np.zeros_like(gain)
        gain[:, 0:2] = 2 * cell
        offset[:, 0], offset[:, 1] = (gx - 0.5) * cell, (gy - 0.5) * cell
        gain[:, 2:4] = side
        gains.append(gain)
        offsets.append(offset)
    return np.concatenate(gains)[None], np.concatenate(offsets)[None]


def _cbr(keras: Any, x: Any, filters: int, stride: int, name: str, kernel: int = 3) -> Any:
    layers = keras.layers
    x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, name=f"{name}_conv")(x)
    x = layers.BatchNormalization(momentum=0.9, name=f"{name}_bn")(x)
    return layers.ReLU(max_value=6.0, name=f"{name}_relu")(x)


def build_heads(cfg: DetectorConfig, batch_size: int | None = None) -> tuple[Any, Any]:
    """The input and the raw (pre-sigmoid) output [B, N, 5+C] of the network; used for training.

    Raises:
        ConversionError: TensorFlow/Keras is not installed.
    """
    keras = require_keras()
    layers, w, out_ch = keras.layers, cfg.width, 5 + cfg.num_classes
    inp = keras.Input((cfg.input_size, cfg.input_size, 3), batch_size=batch_size, name="image")
    x = layers.Rescaling(1 / 255, name="rescale")(inp)
    x = _cbr(keras, x, w // 2, 2, "stem")
    x = _cbr(keras, x, w, 2, "c2a")
    x = _cbr(keras, x, 2 * w, 2, "c3a")
    p3 = _cbr(keras, x, 2 * w, 1, "c3b")
    x = _cbr(keras, p3, 3 * w, 2, "c4a")
    p4 = _cbr(keras, x, 3 * w, 1, "c4b")
    h4 = _cbr(keras, p4, 3 * w, 1, "h4")
    # Bilinear, not nearest: nearest becomes TILE in TFLite, which XNNPACK does not run.
    up = layers.UpSampling2D(2, interpolation="bilinear", name="up")(_cbr(keras, p4, w, 1, "lat", kernel=1))
    h3 = _cbr(keras, layers.Concatenate(name="fuse")([p3, up]), 2 * w, 1, "h3")
    raws = []
    for name, feat, grid in (("out8", h3, cfg.grids[0]), ("out16", h4, cfg.grids[1])):
        y = layers.Conv2D(out_ch, 1, name=name)(feat)
        raws.append(layers.Reshape((grid * grid, out_ch), name=f"{name}_rows")(y))
    raw = layers.Concatenate(axis=1, name="raw")(raws)
    return inp, raw


def _init_bias(model: Any) -> None:
    # Start confident that nothing is there: stable early training with ~1% positive cells.
    for name in ("out8", "out16"):
        layer = model.get_layer(name)
        bias = np.zeros(layer.bias.shape, np.float32)
        bias[4:] = np.log(PRIOR / (1 - PRIOR))
        layer.bias.assign(bias)


def build_model(num_classes: int, input_size: int = 160, batch_size: int | None = 1,
                width: int = 32) -> Any:
    """The inference detector: float32 [B, S, S, 3] pixels in [0, 255] -> decoded [B, N, 5+C].

    ``batch_size=1`` (the default) is what export needs; ``None`` gives a batched twin for evaluation.

    Raises:
        InputError: a shape argument is out of range.
        ConversionError: TensorFlow/Keras is not installed.
    """
    cfg = DetectorConfig(num_classes=num_classes, input_size=input_size, width=width)
    keras = require_keras()
    inp, raw = build_heads(cfg, batch_size)
    gain, offset = decode_constants(cfg)
    prob = keras.layers.Activation("sigmoid", name="prob")(raw)
    out = keras.ops.add(keras.ops.multiply(prob, gain), offset)
    model = keras.Model(inp, out, name=f"edgekit_demo_detector_{input_size}")
    _init_bias(model)
    return model


def export_saved(model: Any, path: str | os.PathLike[str]) -> str:
    """Save the model as a Keras ``.keras`` file (no custom objects: it loads anywhere Keras 3 runs).

    Raises:
        InputError: ``path`` does not end in ``.keras``.
    """
    path = os.fspath(path)
    if not path.endswith(".keras"):
        raise InputError(f"export_saved writes a Keras 3 archive: the path must end in .keras, got {path!r}")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    model.save(path)
    return path


def load_saved(path: str | os.PathLike[str]) -> Any:
    """Load a ``.keras`` file written by :func:`export_saved`.

    Raises:
        ModelError: the file is missing or is not a Keras archive.
        ConversionError: TensorFlow/Keras is not installed.
    """
    keras = require_keras()
    if not os.path.isfile(path):
        raise ModelError(f"no Keras model at {os.fspath(path)!r}: train one with edgekit.demo.train.train()")
    try:
        return keras.models.load_model(path)
    except (ValueError, OSError) as exc:  # Keras raises ValueError for a file that is not a .keras archive
        raise ModelError(f"cannot load {os.fspath(path)!r} as a Keras 3 model: {exc}") from exc


def predict(model: Any, images: np.ndarray, batch_size: int = 32) -> np.ndarray:
    """Run the Keras detector on uint8/float images [n, S, S, 3] -> outputs [n, N, 5+C] float32.

    A model built for a fixed batch is cloned with a free batch dimension first (same weights).

    Raises:
        InputError: the images do not match the model's input size.
    """
    images = np.asarray(images)
    want = tuple(model.input_shape[1:])
    if images.ndim != 4 or tuple(images.shape[1:]) != want:
        raise InputError(f"model expects images of shape (n, {', '.join(map(str, want))}), got {images.shape}")
    if len(images) == 0:
        return np.zeros((0, *model.output_shape[1:]), np.float32)
    if model.input_shape[0] is not None:
        keras = require_keras()
        twin = keras.models.clone_model(model, input_tensors=keras.Input(want, batch_size=None))
        twin.set_weights(model.get_weights())
        model = twin
    return np.asarray(model.predict(images.astype(np.float32), batch_size=batch_size, verbose=0))
