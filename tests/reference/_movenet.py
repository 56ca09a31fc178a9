"""The MoveNet reference: TensorFlow's ``tf.image.resize_with_pad`` (bilinear, black padding, content
centred), as the MoveNet tutorial feeds the model, and its keypoints taken back through that pad."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

MOVENET = Path(__file__).resolve().parent / "models" / "movenet_single_pose_lightning_ptq.tflite"


def reference_keypoints(tf: Any, path: Path, image: np.ndarray) -> np.ndarray:
    """(17, 3) x, y in image pixels and score: the model fed ``tf.image.resize_with_pad`` of the image."""
    from edgekit.runtimes.loader import load_model

    h, w = image.shape[:2]
    with load_model(path, isolate=False) as m:
        size = m.inputs[0].shape[1]
        padded = tf.image.resize_with_pad(image[None], size, size)  # float32, bilinear, zeros around
        # The tutorial casts the float result: tf.cast(input_image, dtype=tf.uint8) truncates.
        m.input_view(0)[...] = tf.cast(padded, m.inputs[0].dtype.name).numpy()
        m.invoke()
        out = m.output(0)[0, 0].astype(np.float64)  # y, x, score, normalized to the padded square
    # resize_with_pad: ratio max(h / size, w / size); content floor(h / ratio) x floor(w / ratio),
    # padded floor((size - content) / 2) before.
    ratio = max(h / size, w / size)
    rh, rw = int(h / ratio), int(w / ratio)
    top, left = (size - rh) // 2, (size - rw) // 2
    x = (out[:, 1] * size - left) * (w / rw)
    y = (out[:, 0] * size - top) * (h / rh)
    return np.stack([x, y, out[:, 2]], axis=1)


def worst_error(tf: Any, estimator: Any, image: np.ndarray, path: Path = MOVENET, min_score: float = 0.3
                ) -> tuple[float, int]:
    """The largest distance (fraction of the image diagonal) between edgekit's keypoints and the
    reference's, over the keypoints the reference scores above ``min_score``; and how many those are."""
    want = reference_keypoints(tf, path, image)
    got = estimator.estimate(image)
    if not len(got):
        return 1.0, int((want[:, 2] > min_score).sum())
    sure = want[:, 2] > min_score
    diagonal = float(np.hypot(*image.shape[:2]))
    d = np.hypot(*(got.keypoints[0][sure] - want[sure, :2]).T) / diagonal
    return float(d.max(initial=0.0)), int(sure.sum())
