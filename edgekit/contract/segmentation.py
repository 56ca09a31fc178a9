"""Segmentation outputs -> a class per frame pixel, per-class areas (numpy only).

Three layouts of a segmenter's one output are read::

    [1, H, W] or [1, H, W, 1] integers       the class id per pixel (arg-max inside the model, e.g. DeepLab)
    [1, H, W, C] float or quantized, C >= 2  a score per class (logits or probabilities)
    [1, H, W, 1] float or quantized          one foreground score per pixel (e.g. a selfie segmenter)

The map is taken back onto the source frame through the preprocessing's transform (stretch
or letterbox, the same mapping as boxes), nearest cell per pixel::

    mask = decode_segmentation(output, transform, labels=labels)
    mask.class_map          # (H, W) int32 class ids, in the frame's pixels
    mask.classes()          # [ClassArea(id, label, area, fraction), ...] for the classes present

Score maps are reduced to their arg-max at the model's resolution, then resized (the class of
the nearest cell, as for a class map): one arg-max per output cell instead of per frame pixel.
Connected regions (boxes and areas per blob) need OpenCV and live in :mod:`edgekit.segment`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from edgekit._lazy import load_export
from edgekit.contract._mapping import PixelMapping, source_grid_indices
from edgekit.contract.enums import Choice
from edgekit.errors import InputError, ModelError

if TYPE_CHECKING:
    from edgekit.results.masks import ClassArea, SegmentationMask

# The results this module hands on load when first asked for (PEP 562): every model's reading asks
# segmentation_layout here, and only a segmenter's decoding makes a mask (start-up time).
_EXPORTS = dict.fromkeys(("ClassArea", "SegmentationMask"), "edgekit.results.masks")


def __getattr__(name: str) -> Any:
    return load_export(__name__, _EXPORTS, globals(), name)

__all__ = ["SegmentationLayout", "ClassArea", "SegmentationMask", "segmentation_layout", "class_map_of", "bilinear_to_source",
           "resize_to_source", "decode_segmentation", "MIN_MAP_SIDE"]

# A map narrower than this is not a per-pixel answer (a [1, 1, 17, 3] keypoint tensor is not a mask).
MIN_MAP_SIDE = 8
# More channels than this are not classes of a segmenter (DeepLab has 21, ADE20K 151, COCO-stuff 183).
MAX_SEG_CLASSES = 1024


class SegmentationLayout(Choice):
    CLASS_MAP = "class_map"  # [1, H, W] integers: the arg-max is inside the model
    SCORES = "scores"  # [1, H, W, C], C >= 2: a score per class
    FOREGROUND = "foreground"  # [1, H, W, 1] real values: one foreground score per pixel


def segmentation_layout(shape: Sequence[int], dtype: Any, quantized: bool = False) -> SegmentationLayout | None:
    """Which segmentation layout an output of this shape and type holds, or None for none.

    Integer tensors that are not quantized hold class ids; float or quantized tensors hold scores.
    """
    s = tuple(int(d) for d in shape)
    integer = np.issubdtype(np.dtype(dtype), np.integer) and not quantized
    if len(s) == 4 and s[-1] == 1:
        s = s[:3]
        if not integer and len(s) == 3 and s[0] == 1 and min(s[1:]) >= MIN_MAP_SIDE:
            return SegmentationLayout.FOREGROUND
    if len(s) == 3 and s[0] == 1 and min(s[1:]) >= MIN_MAP_SIDE:
        return SegmentationLayout.CLASS_MAP if integer else None
    if len(s) == 4 and s[0] == 1 and min(s[1:3]) >= MIN_MAP_SIDE and 2 <= s[3] <= MAX_SEG_CLASSES and not integer:
        return SegmentationLayout.SCORES
    return None


def class_map_of(output: np.ndarray, layout: SegmentationLayout, *, threshold: float = 0.5) -> np.ndarray:
    """A segmentation output (dequantized) -> int32 (h, w) class ids at the model's resolution.

    FOREGROUND scores count as probabilities (class 1 where >= ``threshold``) when they lie in
    [0, 1], as logits (class 1 where the sigmoid is >= ``threshold``) otherwise.

    Raises:
        ModelError: the array does not fit the layout, or a class map holds negative ids.
    """
    a = np.asarray(output)
    if a.ndim == 4 and a.shape[-1] == 1:
        a = a[..., 0]
    if layout is SegmentationLayout.SCORES:
        if a.ndim != 4 or a.shape[0] != 1:
            raise ModelError(f"per-class scores must be [1, H, W, C], got {list(np.shape(output))}")
        best: np.ndarray = a[0].argmax(axis=-1)  # (numpy types the index and the argmax Any)
        return best.astype(np.int32)
    if a.ndim != 3 or a.shape[0] != 1:
        raise ModelError(f"a {layout.value} output must be [1, H, W] or [1, H, W, 1], got {list(np.shape(output))}")
    if layout is SegmentationLayout.FOREGROUND:
        s = a[0].astype(np.float32, copy=False)
        lo, hi = float(s.min()), float(s.max())
        if lo < 0.0 or hi > 1.0:  # logits: sigmoid(x) >= t  <=>  x >= logit(t)
            t = np.float32(np.log(threshold / (1.0 - threshold))) if 0.0 < threshold < 1.0 else \
                np.float32(-np.inf if threshold <= 0 else np.inf)
            on: np.ndarray = s >= t
        else:
            on = s >= np.float32(threshold)
        return on.astype(np.int32)
    m: np.ndarray = a[0]
    if not np.issubdtype(m.dtype, np.integer):
        if not np.all(m == np.rint(m)):
            raise ModelError("a class map holds class ids, but this output holds fractions; "
                             "set \"segmentation\": {\"layout\": \"scores\"} in the model's metadata")
        m = m.astype(np.int64)
    if m.size and int(m.min()) < 0:
        raise ModelError(f"a class map holds class ids >= 0; this one holds {int(m.min())}")
    return m.astype(np.int32, copy=False)


def resize_to_source(small: np.ndarray, transform: PixelMapping) -> np.ndarray:
    """A (h, w) map over the model input -> (H, W) over the source frame, nearest cell per pixel
    (letterbox padding dropped, a stretch undone).

    Raises:
        InputError: the map is not 2-D.
    """
    m = np.asarray(small)
    if m.ndim != 2 or 0 in m.shape:
        raise InputError(f"expected a 2-D map, got shape {m.shape}")
    rows, cols = source_grid_indices(transform, (m.shape[1], m.shape[0]))
    return np.take(np.take(m, rows, axis=0), cols, axis=1)


def decode_segmentation(output: np.ndarray, transform: PixelMapping, *, layout: SegmentationLayout | None = None,
                        labels: Sequence[str] | None = None, threshold: float = 0.5) -> SegmentationMask:
    """A segmenter's output (dequantized) -> the class of every source-frame pixel.

    ``layout`` None reads it from the array's shape and type (see :func:`segmentation_layout`).

    Raises:
        ModelError: the output is no segmentation layout, or does not fit the one given.
    """
    from edgekit.results.masks import SegmentationMask

    a = np.asarray(output)
    if layout is None:
        layout = segmentation_layout(a.shape, a.dtype)
        if layout is None:
            raise ModelError(f"a segmentation output is [1, H, W] class ids or [1, H, W, C] scores; got "
                             f"{a.dtype.name}{list(a.shape)}")
    if layout is SegmentationLayout.FOREGROUND and np.issubdtype(a.dtype, np.floating):
        # MediaPipe's TensorsToSegmentationCalculator resizes the scores to the frame (bilinear)
        # and only then are they thresholded: smooth edges, where a nearest-cell map is blocky.
        scores = bilinear_to_source(a.reshape(a.shape[1], a.shape[2]), transform)
        small = class_map_of(scores[None], layout, threshold=threshold)
        return SegmentationMask(small, tuple(labels or ()))
    small = class_map_of(a, layout, threshold=threshold)
    return SegmentationMask(resize_to_source(small, transform), tuple(labels or ()))


def bilinear_to_source(scores: np.ndarray, transform: PixelMapping) -> np.ndarray:
    """A (h, w) float map over the model input -> (H, W) over the source frame, bilinear between
    cell centres (OpenCV's ``INTER_LINEAR`` convention: half-pixel centres, edges replicated).

    Raises:
        InputError: the map is not 2-D.
    """
    m = np.asarray(scores, dtype=np.float32)
    if m.ndim != 2 or 0 in m.shape:
        raise InputError(f"expected a 2-D map, got shape {m.shape}")
    gh, gw = m.shape
    w, h = transform.src_size
    dw, dh = transform.dst_size

    def axis(n: int, scale: float, pad: float, cells: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = ((np.arange(n, dtype=np.float64) + 0.5) * scale + pad) * cells / size - 0.5
        pos = np.clip(pos, 0.0, cells - 1)
        i0 = np.floor(pos).astype(np.int64)
        return i0, np.minimum(i0 + 1, cells - 1), (pos - i0).astype(np.float32)

    r0, r1, fr = axis(h, transform.scale_y, transform.pad_y, gh, dh)
    c0, c1, fc = axis(w, transform.scale_x, transform.pad_x, gw, dw)
    rows = m[r0] * (1 - fr)[:, None] + m[r1] * fr[:, None]
    out: np.ndarray = rows[:, c0] * (1 - fc)[None, :] + rows[:, c1] * fc[None, :]
    return out
