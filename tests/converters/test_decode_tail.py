"""The decode tail of a YOLO head (what the fallback keeps in float first), on small models converted here.

A YOLOv8-style box branch (conv -> 16-bin softmax -> fixed 0..15 convolution -> anchor add ->
stride multiply) and the tiny YOLOv5-style detector of tests/_tiny_models.py, each converted to a
float .tflite by TFLiteConverter: the tail runs from the output back to the convolution that makes
the box logits, through the DFL's fixed convolution, and no further.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from edgekit.converters.decode_tail import decode_tail, tail_groups
from edgekit.runtimes.tflite_file import parse_tflite
from tests._tiny_models import yolo_head

pytestmark = pytest.mark.needs_tf


def _float_tflite(model: Any) -> bytes:
    import tensorflow as tf

    return bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())


def _dfl_branch() -> Any:
    """[1, 8, 8, 3] -> boxes [1, 64, 4] in pixels, YOLOv8's decode: DFL softmax, anchor add, stride."""
    import keras

    x = keras.Input((8, 8, 3), batch_size=1)
    h = keras.layers.Conv2D(8, 3, padding="same", activation="relu", name="body")(x)
    logits = keras.layers.Conv2D(64, 1, name="box_logits")(h)  # 4 sides x 16 bins
    bins = keras.layers.Softmax(axis=-1)(keras.layers.Reshape((64, 4, 16))(logits))
    dfl = keras.layers.Dense(1, use_bias=False, name="dfl", trainable=False)
    dist = keras.layers.Reshape((64, 4))(dfl(bins))
    dfl.set_weights([np.arange(16, dtype=np.float32).reshape(16, 1)])
    grid = np.stack(np.meshgrid(np.arange(8), np.arange(8)), -1).reshape(1, 64, 2).astype(np.float32) + 0.5
    lt, rb = dist[..., :2], dist[..., 2:]
    boxes = keras.ops.concatenate([keras.ops.negative(lt) + grid, rb + grid], axis=-1) * 8.0  # anchor add, stride
    return keras.Model(x, boxes)


def _ops(model: bytes, tensors: tuple[str, ...]) -> list[str]:
    sg = parse_tflite(model).subgraphs[0]
    by_output = {sg.tensors[t].name: op.opcode for op in sg.operators for t in op.outputs}
    return [by_output[t] for t in tensors]


def test_the_dfl_tail_runs_back_through_the_softmax_to_the_box_logits() -> None:
    model = _float_tflite(_dfl_branch())
    ops = _ops(model, decode_tail(model, 0))
    assert "SOFTMAX" in ops and ops.count("FULLY_CONNECTED") + ops.count("CONV_2D") + ops.count("BATCH_MATMUL") == 2
    assert "CONV_2D" in ops  # box_logits, the head's layer; the body's convolution is not in the tail
    every = [op.opcode for op in parse_tflite(model).subgraphs[0].operators]
    assert every.count("CONV_2D") == ops.count("CONV_2D") + 1


def test_tails_of_a_one_output_head_and_of_named_outputs() -> None:
    model = _float_tflite(yolo_head())
    (group,) = tail_groups(model, None)
    ops = _ops(model, group.tensors)
    assert group.label == "decode tail" and ops.count("CONV_2D") == 1 and "LOGISTIC" in ops
    assert ops[-1] == "CONCATENATION"  # the output's own op, last in graph order
    # two outputs named by roles: the boxes' tail first, whatever the output order
    assert [g.label for g in tail_groups(model, ("scores",))] == ["scores decode tail"]
