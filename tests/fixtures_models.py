"""Tiny models the tests build themselves (TensorFlow needed; skipped cleanly without it).

Import the fixtures into a test module with ``from tests.fixtures_models import tiny_models``.
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
