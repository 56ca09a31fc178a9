"""Calibration and validation data: image folders, .npy/.npz, tf.data, arrays, any iterable.

Everything becomes :class:`Samples`, the model's input values (preprocessed) with class
ids when known. Samples are drawn reproducibly with the seed; with no validation data a
held-out part of the calibration source is used, never the samples calibrated on.

Rules for arrays: uint8 arrays (and decoded images) are pixels and get the model's
preprocessing (resize, color order, (pixel - mean) / std); float arrays are taken as the
model's input values already and must have its input shape.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from edgekit.contract.spec import Transform
from edgekit.converters._native import progress
from edgekit.converters.detection_data import DetectionSet, Truth, find_detection_set
from edgekit.converters.images import class_ids, decode_images, list_images, prepare_pixels
from edgekit.converters.preprocessing import Preprocessing
from edgekit.errors import InputError

__all__ = ["Samples", "DataSplit", "load_data"]


@dataclass(frozen=True)
class Samples:
    """Model inputs (N, *input shape without batch), class ids (N,) or None, and where they came from.

    ``transforms``: for samples made from images by the device's preprocessing, each one's
    mapping between the image and the model input (detections are mapped back through it, as
    on the device); None for samples given as model inputs.
    """

    x: np.ndarray
    y: np.ndarray | None
    origin: str
    transforms: tuple[Transform, ...] | None = None
    truth: tuple[Truth, ...] | None = None  # detection data sets: each image's objects, in its own pixels

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def representative(self, desc: str = "calibrating") -> Callable[[], Iterator[list[np.ndarray]]]:
        """A representative-dataset factory for the converter: one [x] of batch 1 per sample."""
        def gen() -> Iterator[list[np.ndarray]]:
            for i in progress(range(len(self)), total=len(self), desc=desc):
                yield [self.x[i:i + 1]]
        return gen

    def head(self, n: int) -> Samples:
        return Samples(self.x[:n], None if self.y is None else self.y[:n], self.origin,
                       None if self.transforms is None else self.transforms[:n],
                       None if self.truth is None else self.truth[:n])


@dataclass(frozen=True)
class DataSplit:
    calibration: Samples | None
    validation: Samples | None
    class_names: tuple[str, ...] | None
    notes: tuple[str, ...] = ()


@dataclass
class _Pool:
    """A source whose items are numbered 0..count-1 and turned into model inputs on demand."""

    count: int
    take: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray | None, tuple[Transform, ...] | None]]
    origin: str
    class_names: tuple[str, ...] | None = None
    notes: list[str] = field(default_factory=list)
    truth: Callable[[np.ndarray], tuple[Truth, ...]] | None = None


def load_data(calibration: Any, validation: Any, *, input_shape: tuple[int, ...], input_dtype: str,
              pre: Preprocessing | None, num_calibration: int, num_validation: int, seed: int,
              holdout: float, labels: Sequence[str] | None = None) -> DataSplit:
    """Draw the calibration and validation samples.

    Raises:
        InputError: a source is missing, empty, of the wrong shape, or has too few samples
            to hold some out for validation.
    """
    if calibration is None and validation is None:
        return DataSplit(None, None, None)
    rng = np.random.default_rng(seed)
    limit = num_calibration + (num_validation if validation is None else 0)
    ctx = _Ctx(input_shape, input_dtype, pre, labels)
    cal_pool = _pool(calibration, ctx, limit, "train") if calibration is not None else None
    val_pool = _pool(validation, ctx, num_validation) if validation is not None else None
    if cal_pool is not None and val_pool is None:
        return _held_out(cal_pool, rng, num_calibration, num_validation, holdout)
    cal = _draw(cal_pool, np.sort(rng.permutation(cal_pool.count)[:num_calibration])) if cal_pool else None
    val = _draw(val_pool, np.sort(rng.permutation(val_pool.count)[:num_validation])) if val_pool else None
    pools = [p for p in (cal_pool, val_pool) if p is not None]
    names = next((p.class_names for p in pools if p.class_names), None)
    return DataSplit(cal, val, names, tuple(n for p in pools for n in p.notes))


def _held_out(pool: _Pool, rng: np.random.Generator, num_calibration: int, num_validation: int,
              holdout: float) -> DataSplit:
    """Validation = a random `holdout` part of the pool; calibration from the rest, never from it."""
    n = pool.count
    if n < 2:
        raise InputError(f"{pool.origin} has {n} sample(s); give at least 2 (a part is held out for "
                         "validation), or pass --validation")
    order = rng.permutation(n)
    n_val = min(num_validation, max(1, int(round(holdout * n))))
    cal = _draw(pool, np.sort(order[n_val:n_val + num_calibration]))
    val = _draw(pool, np.sort(order[:n_val]))
    val = Samples(val.x, val.y, f"{pool.origin} (held-out {n_val} of {n})", val.transforms, val.truth)
    return DataSplit(cal, val, pool.class_names, tuple(pool.notes))


def _draw(pool: _Pool, idx: np.ndarray) -> Samples:
    x, y, transforms = pool.take(idx)
    return Samples(x, y, pool.origin, transforms, pool.truth(idx) if pool.truth is not None else None)


@dataclass(frozen=True)
class _Ctx:
    input_shape: tuple[int, ...]
    input_dtype: str
    pre: Preprocessing | None
    labels: Sequence[str] | None


def _pool(source: Any, ctx: _Ctx, limit: int, split: str = "val") -> _Pool:
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.exists():
            raise InputError(f"data {str(path)!r} does not exist; pass an image folder, a .npy or a .npz file")
        if ctx.pre is not None and (found := find_detection_set(path, split)) is not None:
            return _detection_pool(found, ctx.pre)
        if path.is_dir():
            return _folder_pool(path, ctx)
        if path.suffix.lower() in (".npy", ".npz"):
            return _array_pool(*_load_arrays(path), ctx, origin=str(path))
        raise InputError(f"data {str(path)!r} is neither a folder of images nor a .npy/.npz file")
    if isinstance(source, np.ndarray):
        return _array_pool(source, None, ctx, origin=f"array {source.shape}")
    if isinstance(source, tuple) and len(source) == 2 and all(isinstance(a, np.ndarray) for a in source):
        return _array_pool(source[0], source[1], ctx, origin=f"arrays {source[0].shape}")
    if hasattr(source, "as_numpy_iterator"):
        return _iterable_pool(source.as_numpy_iterator(), ctx, limit, "tf.data.Dataset")
    if isinstance(source, Iterable):
        return _iterable_pool(iter(source), ctx, limit, type(source).__name__)
    raise InputError(f"cannot use a {type(source).__name__} as data; pass an image folder, a .npy/.npz file, "
                     "a tf.data.Dataset, an array or an iterable of arrays or (array, label) pairs")


def _load_arrays(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    try:
        if path.suffix.lower() == ".npy":
            return np.load(path, mmap_mode="r", allow_pickle=False), None
        with np.load(path, allow_pickle=False) as z:
            keys = list(z.keys())
            xk = next((k for k in ("x", "images", "inputs", "data") if k in keys), keys[0] if keys else None)
            if xk is None:
                raise InputError(f"{str(path)!r} holds no arrays")
            yk = next((k for k in ("y", "labels", "label") if k in keys), None)
            return z[xk], (z[yk] if yk else None)
    except (ValueError, OSError) as exc:
        raise InputError(f"cannot read {str(path)!r} as numpy data: {exc}") from None


def _folder_pool(root: Path, ctx: _Ctx) -> _Pool:
    if ctx.pre is None:
        raise InputError(f"{str(root)!r} is an image folder but the model does not take images "
                         f"(input shape {ctx.input_shape}); pass a .npy/.npz file")
    files, classes = list_images(root)
    notes: list[str] = []
    names: tuple[str, ...] | None = None
    y = None
    if all(c is not None for c in classes):
        names, y = class_ids([str(c) for c in classes], ctx.labels, root)
    elif any(c is not None for c in classes):
        notes.append(f"{str(root)!r} mixes images in class sub-folders with images at its top level; "
                     "labels are not used")
    paths = np.array([str(p) for p in files])
    pre = ctx.pre

    def take(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, tuple[Transform, ...] | None]:
        x, transforms = decode_images(list(paths[idx]), pre, f"reading {root.name}")
        return x, (None if y is None else y[idx]), transforms

    return _Pool(len(files), take, f"folder {str(root)!r}", names, notes)


def _detection_pool(found: DetectionSet, pre: Preprocessing) -> _Pool:
    """Images of a detection data set (YOLO, COCO, labels.json) with their objects as the truth."""
    paths = [str(p) for p in found.files]

    def take(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, tuple[Transform, ...] | None]:
        x, transforms = decode_images([paths[i] for i in idx], pre, f"reading {found.origin}")
        return x, None, transforms

    def truth(idx: np.ndarray) -> tuple[Truth, ...]:
        return tuple(Truth(found.boxes[i], np.ones(len(found.classes[i]), np.float32), found.classes[i])
                     for i in idx)

    return _Pool(len(found), take, found.origin, found.names, truth=truth)


def _array_pool(x: np.ndarray, y: np.ndarray | None, ctx: _Ctx, origin: str) -> _Pool:
    item_shape = ctx.input_shape[1:]
    if x.ndim == len(item_shape) + 2 and x.shape[1] == 1:
        x = x[:, 0]  # (N, 1, H, W, C): samples saved with their batch of 1
    if x.ndim != len(item_shape) + 1:
        raise InputError(f"{origin}: expected an array of samples shaped (N, {', '.join(map(str, item_shape))}), "
                         f"got {x.shape}")
    labels = _label_array(y, x.shape[0], origin) if y is not None else None
    pre = ctx.pre
    pixels = x.dtype == np.uint8 and pre is not None
    if not pixels and x.shape[1:] != item_shape:
        raise InputError(f"{origin}: samples of shape {x.shape[1:]} do not fit the model input {item_shape}. "
                         "Float arrays are used as model inputs as they are; pass uint8 pixels to have them resized")

    def take(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, tuple[Transform, ...] | None]:
        chosen = np.asarray(x[idx])
        ys = None if labels is None else labels[idx]
        if pre is not None and pixels:
            out, transforms = prepare_pixels(chosen, pre)
            return out, ys, transforms
        return chosen.astype(_np_dtype(ctx.input_dtype)), ys, None

    return _Pool(int(x.shape[0]), take, origin)


def _np_dtype(name: str) -> np.dtype:
    try:
        return np.dtype(name)
    except TypeError:
        return np.dtype(np.float32)


def _label_array(y: np.ndarray, n: int, origin: str) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 2:  # one-hot
        y = y.argmax(axis=1)
    if y.shape != (n,):
        raise InputError(f"{origin}: {n} samples but labels of shape {y.shape}; give one class id per sample")
    return y.astype(np.int64)


def _iterable_pool(items: Iterator[Any], ctx: _Ctx, limit: int, origin: str) -> _Pool:
    """Read up to `limit` items (in order: shuffle the source first if it is sorted)."""
    xs: list[np.ndarray] = []
    ys: list[Any] = []
    rank = len(ctx.input_shape)
    for item in items:
        x, y = _split_item(item)
        x = np.asarray(x)
        batch = x if x.ndim == rank and x.shape[0] != 1 else x.reshape((1, *x.shape[-(rank - 1):]))
        xs.extend(batch)
        if y is not None:
            yb = np.asarray(y).reshape(len(batch), -1) if np.ndim(y) else np.asarray([y])
            ys.extend(yb.argmax(axis=1) if yb.ndim == 2 and yb.shape[1] > 1 else yb.reshape(-1))
        if len(xs) >= limit:
            break
    if not xs:
        raise InputError(f"the {origin} yielded no samples")
    x_all = np.stack(xs[:limit])
    y_all = np.asarray(ys[:limit]) if len(ys) >= len(x_all) else None
    return _array_pool(x_all, y_all, ctx, origin=f"{origin} ({len(x_all)} samples read)")


def _split_item(item: Any) -> tuple[Any, Any]:
    if isinstance(item, dict):
        x = next((item[k] for k in ("image", "images", "x", "input", "inputs") if k in item), None)
        y = next((item[k] for k in ("label", "labels", "y") if k in item), None)
        if x is None:
            raise InputError(f"a data item is a dict with keys {sorted(item)}; expected 'image' or 'x' (and 'label')")
        return x, y
    if isinstance(item, (tuple, list)):
        return (item[0], item[1]) if len(item) >= 2 else (item[0], None)
    return item, None
