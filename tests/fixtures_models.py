"""Tiny models the tests build themselves (TensorFlow needed; skipped cleanly without it).

tests/conftest.py registers this module as a plugin: a test asks for ``tiny_models`` or ``vision_models`` by name.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

INPUT_SHAPE = (1, 16, 16, 3)
NUM_CLASSES = 5


@dataclass(frozen=True)
class TinyModels:
    """A Keras conv + dense classifier, its float32 and int8 .tflite, and probe inputs/outputs."""

    keras_model: Any
    float_path: Path
    int8_path: Path
    x: np.ndarray  # (8, 16, 16, 3) float32 in [-1, 1]
    y: np.ndarray  # the Keras model's outputs on x, one row per sample


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    tf = pytest.importorskip("tensorflow", reason="building test models needs TensorFlow (the convert extra)")
    keras = tf.keras
    keras.utils.set_random_seed(0)
    inp = keras.Input(INPUT_SHAPE[1:], batch_size=1)  # a fixed batch of 1: no SHAPE/PACK ops
    h = keras.layers.Conv2D(8, 3, activation="relu")(inp)
    h = keras.layers.GlobalAveragePooling2D()(h)
    out = keras.layers.Dense(NUM_CLASSES, activation="softmax")(h)
    model = keras.Model(inp, out)

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (8, *INPUT_SHAPE[1:])).astype(np.float32)
    y = np.concatenate([np.asarray(model(x[i:i + 1])) for i in range(len(x))])

    folder = tmp_path_factory.mktemp("tiny_models")
    float_path = folder / "tiny_float.tflite"
    float_path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())

    def representative() -> Any:
        for _ in range(32):
            yield [rng.uniform(-1, 1, INPUT_SHAPE).astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = representative
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    int8_path = folder / "tiny_int8.tflite"
    with warnings.catch_warnings():
        # "Statistics for quantized inputs were expected": the representative data gives them.
        warnings.simplefilter("ignore", UserWarning)
        int8_path.write_bytes(conv.convert())
    return TinyModels(model, float_path, int8_path, x, y)


# --- vision models with the output signatures of public segmenters, pose and anchor detectors -------


@dataclass(frozen=True)
class VisionModels:
    """Small real .tflite files (fixed batch 1) whose outputs look like published models':

    ``seg_scores``: float [1, 64, 64, 3] per-class logits (background, red, green) from a 128x128 input;
    ``seg_scores_int8``: the same, int8 in and out; ``seg_argmax``: int64 [1, 64, 64], the arg-max
    inside the model (as DeepLab); ``pose_single``: [1, 1, 17, 3] (y, x, score: soft centroids of
    colour maps); ``pose_multi``: [1, 6, 56]; ``face``: [1, 896, 16] + [1, 896, 1] (MediaPipe face
    detector's raw anchors, 128x128 input).
    """

    seg_scores: Path
    seg_scores_int8: Path
    seg_argmax: Path
    pose_single: Path
    pose_multi: Path
    face: Path


# 1x1 convolution: logits of background, "red" and "green" from RGB in [-1, 1].
SEG_KERNEL = np.array([[0.0, 4.0, -2.0], [0.0, -2.0, 4.0], [0.0, -2.0, -2.0]], np.float32)  # rows: R, G, B
SEG_BIAS = np.array([0.0, -1.5, -1.5], np.float32)


@pytest.fixture(scope="session")
def vision_models(tmp_path_factory: pytest.TempPathFactory) -> VisionModels:
    tf = pytest.importorskip("tensorflow", reason="building test models needs TensorFlow (the convert extra)")
    folder = tmp_path_factory.mktemp("vision_models")
    rng = np.random.default_rng(0)

    def convert(fn: Any, name: str, int8_shape: tuple[int, ...] | None = None) -> Path:
        conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()])
        if int8_shape is not None:
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
            conv.representative_dataset = lambda: ([rng.uniform(-1, 1, int8_shape).astype(np.float32)]
                                                   for _ in range(16))
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            conv.inference_input_type = tf.int8
            conv.inference_output_type = tf.int8
        path = folder / f"{name}.tflite"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            path.write_bytes(conv.convert())
        return path

    def seg_logits(x: Any) -> Any:
        k = tf.constant(SEG_KERNEL.reshape(1, 1, 3, 3))
        pooled = tf.nn.avg_pool2d(x, 2, 2, "VALID")  # the map is half the input, as many segmenters'
        return tf.nn.conv2d(pooled, k, 1, "VALID") + SEG_BIAS

    img128 = tf.TensorSpec((1, 128, 128, 3), tf.float32)
    scores = tf.function(seg_logits, input_signature=[img128])
    argmax = tf.function(lambda x: tf.argmax(seg_logits(x), axis=-1), input_signature=[img128])

    k17 = tf.constant(rng.normal(0, 2, (1, 1, 3, 17)).astype(np.float32))

    def single(x: Any) -> Any:
        x = x / 127.5 - 1.0  # MoveNet takes pixels 0..255 (its preset feeds them so)
        w = tf.sigmoid(tf.nn.conv2d(tf.nn.avg_pool2d(x, 4, 4, "VALID"), k17, 1, "VALID"))  # [1, 48, 48, 17]
        grid = (tf.range(48, dtype=tf.float32) + 0.5) / 48.0
        total = tf.reduce_sum(w, axis=[1, 2])
        y = tf.reduce_sum(w * grid[None, :, None, None], axis=[1, 2]) / total
        xx = tf.reduce_sum(w * grid[None, None, :, None], axis=[1, 2]) / total
        s = tf.reduce_mean(w, axis=[1, 2])
        return tf.reshape(tf.stack([y, xx, s], axis=-1), (1, 1, 17, 3))

    dense = tf.constant(rng.normal(0, 0.5, (3, 6 * 56)).astype(np.float32))

    def multi(x: Any) -> Any:
        return tf.reshape(tf.sigmoid(tf.reduce_mean(x, axis=[1, 2]) @ dense), (1, 6, 56))

    face_w = tf.constant(rng.normal(0, 0.5, (3, 896 * 17)).astype(np.float32))

    def face(x: Any) -> tuple[Any, Any]:
        h = tf.reshape(tf.reduce_mean(x, axis=[1, 2]) @ face_w, (1, 896, 17))
        return h[:, :, :16] * 10.0, h[:, :, 16:]

    img192 = tf.TensorSpec((1, 192, 192, 3), tf.float32)
    return VisionModels(
        seg_scores=convert(scores, "seg_scores"),
        seg_scores_int8=convert(scores, "seg_scores_int8", (1, 128, 128, 3)),
        seg_argmax=convert(argmax, "seg_argmax"),
        pose_single=convert(tf.function(single, input_signature=[img192]), "pose_single"),
        pose_multi=convert(tf.function(multi, input_signature=[img192]), "pose_multi"),
        face=convert(tf.function(face, input_signature=[img128]), "face"),
    )
