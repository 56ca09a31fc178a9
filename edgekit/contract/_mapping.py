"""Points and index grids between model-input pixels and source-frame pixels (numpy only).

The mapping is the preprocessing's transform (``input = source * scale + pad`` per axis, in
continuous pixel coordinates, see :class:`edgekit.preprocess.Transform`); only its fields are
read here, so anything with them will do.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from edgekit.errors import InputError

__all__ = ["PixelMapping", "normalized_points_to_source", "source_grid_indices"]


class PixelMapping(Protocol):
    """What the decoders read of a preprocessing transform."""

    @property
    def src_size(self) -> tuple[int, int]: ...  # (width, height) of the source frame

    @property
    def dst_size(self) -> tuple[int, int]: ...  # (width, height) of the model input

    @property
    def scale_x(self) -> float: ...

    @property
    def scale_y(self) -> float: ...

    @property
    def pad_x(self) -> float: ...

    @property
    def pad_y(self) -> float: ...


def normalized_points_to_source(xy: np.ndarray, transform: PixelMapping, *, clip: bool = True) -> np.ndarray:
    """Points (..., 2) as x, y in [0, 1] of the model input -> source pixels (float32).

    ``clip`` keeps them inside the frame (a keypoint the model places in letterbox padding
    lands on the frame's edge).

    Raises:
        InputError: the last axis is not 2 long.
    """
    p = np.asarray(xy, dtype=np.float64)
    if p.ndim == 0 or p.shape[-1] != 2:
        raise InputError(f"points must have shape (..., 2) as x, y; got shape {p.shape}")
    dw, dh = transform.dst_size
    out = np.empty_like(p)
    out[..., 0] = (p[..., 0] * dw - transform.pad_x) / transform.scale_x
    out[..., 1] = (p[..., 1] * dh - transform.pad_y) / transform.scale_y
    if clip:
        w, h = transform.src_size
        np.clip(out[..., 0], 0.0, float(w), out=out[..., 0])
        np.clip(out[..., 1], 0.0, float(h), out=out[..., 1])
    return out.astype(np.float32)


def source_grid_indices(transform: PixelMapping, grid_wh: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """For each source column and row, the cell of a ``grid_wh`` (width, height) map spread over
    the model input that the pixel's centre falls in: (rows (H,), cols (W,)) int64 indices.

    The map may be coarser than the input (a segmenter whose output is a quarter of its input);
    pixels whose centre lies in letterbox padding take the nearest cell inside the map.
    """
    gw, gh = int(grid_wh[0]), int(grid_wh[1])
    w, h = transform.src_size
    dw, dh = transform.dst_size
    cx = (np.arange(w, dtype=np.float64) + 0.5) * transform.scale_x + transform.pad_x
    cy = (np.arange(h, dtype=np.float64) + 0.5) * transform.scale_y + transform.pad_y
    cols = np.clip(np.floor(cx * gw / dw), 0, gw - 1).astype(np.int64)
    rows = np.clip(np.floor(cy * gh / dh), 0, gh - 1).astype(np.int64)
    return rows, cols
