"""The YOLO head split on a Keras model: same values, two outputs, and the converter keeps each scale."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.needs_tf


def _keras_yolo():
    keras = pytest.importorskip("keras")
    x = keras.Input((32, 32, 3), batch_size=1)
    f = keras.layers.Conv2D(7, 8, strides=8, name="head")(x)  # [1, 4, 4, 7]
    rows = keras.layers.Reshape((16, 7))(f)
    boxes = keras.ops.transpose(keras.ops.sigmoid(rows[..., :4]) * 32.0, (0, 2, 1))
    scores = keras.ops.transpose(keras.ops.sigmoid(rows[..., 4:]), (0, 2, 1))
    out = keras.layers.Concatenate(axis=1, name="output0")([boxes, scores])
    return keras.Model(x, out)


def test_split_keras_head_gives_the_same_values_as_two_outputs() -> None:
    from edgekit.converters.yolo_head import split_keras_head

    model = _keras_yolo()
    split, info = split_keras_head(model)
    assert info.num_classes == 3 and info.axis == 1 and "output0" in info.where
    x = np.random.default_rng(0).random((1, 32, 32, 3), dtype=np.float32) * 255
    whole = np.asarray(model(x))
    boxes, scores = (np.asarray(o) for o in split(x))
    np.testing.assert_allclose(boxes, whole[:, :4], rtol=1e-6)
    np.testing.assert_allclose(scores, whole[:, 4:], rtol=1e-6)


def test_a_model_not_ending_in_a_concat_is_left_alone() -> None:
    keras = pytest.importorskip("keras")
    from edgekit.converters.yolo_head import split_keras_head

    x = keras.Input((8,), batch_size=1)
    assert split_keras_head(keras.Model(x, keras.layers.Dense(3)(x))) is None
