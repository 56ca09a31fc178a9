"""Resampling as two reference implementations do it, bit for bit where it matters:
MediaPipe's ``ImageToTensorCalculator`` (:attr:`~edgekit.contract.Interpolation.MEDIAPIPE`) and
TensorFlow's ``tf.image.resize_with_pad`` (:attr:`~edgekit.contract.Interpolation.TENSORFLOW`).
:func:`edgekit.preprocess.fit_into` calls these when the preprocessing names them."""

from __future__ import annotations

import math

import cv2
import numpy as np

from edgekit.contract.enums import ResizeMode
from edgekit.contract.spec import ResizePlan, Transform

__all__ = ["tf_pad_plan", "tf_bilinear_into", "warp_into"]


def tf_pad_plan(src_hw: tuple[int, int], dst_wh: tuple[int, int]) -> ResizePlan:
    """Where ``tf.image.resize_with_pad`` puts an image: ratio ``max(w / dw, h / dh)``, content
    ``floor(w / ratio)`` x ``floor(h / ratio)``, padding ``floor((dw - w / ratio) / 2)`` before."""
    h, w = src_hw
    dw, dh = dst_wh
    ratio = max(w / dw, h / dh)
    fw, fh = w / ratio, h / ratio
    nw, nh = max(1, min(dw, int(math.floor(fw)))), max(1, min(dh, int(math.floor(fh))))
    x0, y0 = max(0, int(math.floor((dw - fw) / 2))), max(0, int(math.floor((dh - fh) / 2)))
    return ResizePlan(Transform((w, h), (dw, dh), nw / w, nh / h, float(x0), float(y0)), x0, y0, nw, nh)


def tf_bilinear_into(image: np.ndarray, target: np.ndarray) -> None:
    """``tf.image.resize`` (bilinear, half-pixel centres, no antialiasing) in float32, in its order
    of operations (resize_bilinear_op.cc: top = tl + (tr - tl) * dx, then top + (bottom - top) * dy),
    cast to uint8 by truncation as the MoveNet tutorial's ``tf.cast`` does. Bit for bit what
    TensorFlow feeds: MoveNet's quantized files move a keypoint by 8 % of the diagonal over
    pixels one level off (OpenCV's fixed-point rounding)."""
    h, w = image.shape[:2]
    th, tw = target.shape[:2]

    def axis(n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # compute_interpolation_weights with HalfPixelScaler: lower max(floor(in), 0), upper
        # min(ceil(in), n - 1), lerp in - floor(in)
        pos = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * np.float32(n_in / n_out) - np.float32(0.5)
        floor = np.floor(pos)
        lower = np.maximum(floor, 0).astype(np.int64)
        upper = np.minimum(np.ceil(pos), n_in - 1).astype(np.int64)
        return lower, np.maximum(upper, 0), (pos - floor).astype(np.float32)

    y0, y1, fy = axis(th, h)
    x0, x1, fx = axis(tw, w)
    rows0, rows1 = image[y0].astype(np.float32), image[y1].astype(np.float32)
    fxc = fx[None, :, None]
    top = rows0[:, x0] + (rows0[:, x1] - rows0[:, x0]) * fxc
    bottom = rows1[:, x0] + (rows1[:, x1] - rows1[:, x0]) * fxc
    out = top + (bottom - top) * fy[:, None, None]
    target[...] = np.clip(out, 0, 255).astype(np.uint8)  # float -> uint8 truncates, as tf.cast


def warp_into(image: np.ndarray, view: np.ndarray, mode: ResizeMode, pad_value: int) -> Transform:
    """MediaPipe's ImageToTensorCalculator on CPU: the frame (or, keeping its aspect ratio, the
    square-padded region around it) warped onto the tensor by an affine map of corners to corners,
    bilinear, the border filled with ``pad_value``; the transform is the same map, unrounded."""
    h, w = image.shape[:2]
    dh, dw = view.shape[:2]
    if mode is ResizeMode.STRETCH:
        sx, sy, px, py = dw / w, dh / h, 0.0, 0.0
    else:
        sx = sy = min(dw / w, dh / h)
        px, py = (dw - w * sx) / 2, (dh - h * sy) / 2
    m = np.array([[sx, 0.0, px], [0.0, sy, py]], np.float64)
    out = cv2.warpAffine(image, m, (dw, dh), dst=view, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                         borderValue=(pad_value,) * 3)
    if not np.shares_memory(out, view):
        view[...] = out
    return Transform((w, h), (dw, dh), sx, sy, px, py)
