"""A model whose output shapes read as a format but whose values cannot be it is refused when the
task is created (the gray-frame check in edgekit.tasks._Task), not decoded into confident nonsense."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import edgekit
from edgekit.errors import ModelError

SIZE, N, CLASSES = 32, 64, 3


def _yolo_like(folder: Path, name: str, scores_in_unit_range: bool) -> Path:
    """Float [1, 4 + C, N] (the Ultralytics layout): boxes in input pixels, then C score rows,
    squashed to 0..1 or left as raw logits around 4 (which no YOLO head emits)."""
    tf = pytest.importorskip("tensorflow", reason="building test models needs TensorFlow (the convert extra)")
    rng = np.random.default_rng(0)
    w = tf.constant(rng.normal(0, 0.05, (3, 4 + CLASSES)).astype(np.float32))

    def head(x):  # x: [1, 32, 32, 3] in 0..255
        pooled = tf.nn.avg_pool2d(x / 255.0, 4, 4, "VALID")  # [1, 8, 8, 3]
        raw = tf.reshape(tf.tensordot(pooled, w, 1), (1, N, 4 + CLASSES))
        boxes = tf.sigmoid(raw[..., :4]) * SIZE
        scores = tf.sigmoid(raw[..., 4:]) if scores_in_unit_range else raw[..., 4:] + 4.0
        return tf.transpose(tf.concat([boxes, scores], -1), (0, 2, 1))

    fn = tf.function(head, input_signature=[tf.TensorSpec((1, SIZE, SIZE, 3), tf.float32)])
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()])
    path = folder / f"{name}.tflite"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path.write_bytes(conv.convert())
    return path


@pytest.mark.slow
def test_a_yolo_shaped_head_with_scores_outside_0_1_is_refused(tmp_path: Path) -> None:
    labels = ["a", "b", "c"]
    good = _yolo_like(tmp_path, "good", scores_in_unit_range=True)
    with edgekit.Detector.create_from_model_path(str(good), labels=labels) as detector:  # the control loads
        assert detector.labels == labels
    bad = _yolo_like(tmp_path, "logits", scores_in_unit_range=False)
    with pytest.raises(ModelError, match="--output-format"):
        edgekit.Detector.create_from_model_path(str(bad), labels=labels)
