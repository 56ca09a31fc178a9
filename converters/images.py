"""Image files and pixel arrays -> model inputs, computed by the device's own code.

RGB images go through exactly what ``edgekit.Detector``/``Classifier`` do on the device
(:func:`edgekit.preprocess.load_image`, :func:`~edgekit.preprocess.fit`, the contract's
:class:`~edgekit.contract.Normalization`), so the accuracy gate feeds the models the numbers
the device will, and keeps each image's :class:`~edgekit.contract.Transform` to map
detections back onto it. Models with other channel counts go through a tf.data pipeline.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from edgekit.contract.enums import ColorOrder, ResizeMode
from edgekit.contract.spec import LETTERBOX_PAD, Transform
from edgekit.converters._native import import_tensorflow, progress
from edgekit.converters.preprocessing import Preprocessing
from edgekit.errors import InputError

__all__ = ["IMAGE_SUFFIXES", "Inputs", "list_images", "class_ids", "decode_images", "prepare_pixels", "tf_prepare"]


class Inputs(NamedTuple):
    """Model inputs (N, H, W, C) float32 and, for RGB images, each one's transform (else None)."""

    x: np.ndarray
    transforms: tuple[Transform, ...] | None


def _device_inputs(items: Sequence[Any], load: Callable[[Any], np.ndarray], pre: Preprocessing,
                   desc: str) -> Inputs:
    """What the device computes for each item: load, fit (resize/letterbox), normalize."""
    from edgekit.preprocess import fit

    norm = pre.normalization
    if norm is None:
        raise InputError(f"the device's preprocessing takes RGB images; this model has {pre.channels} channels")

    def one(item: Any) -> tuple[np.ndarray, Transform]:
        resized, tf = fit(load(item), pre.input_size, pre.resize, interpolation=pre.interpolation,
                          boxes=pre.box_mapping, pad_value=LETTERBOX_PAD if pre.pad_value is None else pre.pad_value)
        return norm.real(resized), tf

    workers = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:  # OpenCV and Pillow release the GIL
        done = list(progress(pool.map(one, items), total=len(items), desc=desc))
    if not done:
        return Inputs(np.zeros((0, pre.input_size[1], pre.input_size[0], 3), np.float32), ())
    return Inputs(np.stack([d[0] for d in done]).astype(np.float32), tuple(d[1] for d in done))

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif")


def list_images(root: Path) -> tuple[list[Path], list[str | None]]:
    """Image files under `root` (recursive, hidden ones skipped) and each one's class folder
    (the first folder below `root`; None for images at the top level).

    Raises:
        InputError: there is no image.
    """
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    if not files:
        raise InputError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {str(root)!r} or its sub-folders")
    parts = [p.relative_to(root).parts for p in files]
    return files, [ps[0] if len(ps) > 1 else None for ps in parts]


def class_ids(classes: list[str], labels: Sequence[str] | None, root: Path) -> tuple[tuple[str, ...], np.ndarray]:
    """Class ids from folder names: their index in `labels` when given, else in sorted order.

    Raises:
        InputError: a folder name is not in `labels`.
    """
    if labels:
        unknown = sorted(set(classes) - set(labels))
        if unknown:
            raise InputError(f"class folders {unknown[:5]} in {str(root)!r} are not in the labels list; "
                             "folder names must match labels, or drop --labels to number folders in sorted order")
        index = {name: i for i, name in enumerate(labels)}
        return tuple(labels), np.array([index[c] for c in classes], np.int64)
    names = tuple(sorted(set(classes)))
    index = {name: i for i, name in enumerate(names)}
    return names, np.array([index[c] for c in classes], np.int64)


def _load_image(path: str) -> np.ndarray:
    from edgekit.preprocess import load_image

    try:
        return load_image(path)
    except InputError as exc:
        raise InputError(f"cannot decode image {str(path)!r} of the data: {exc}") from None


def decode_images(paths: list[str], pre: Preprocessing, desc: str) -> Inputs:
    """Decode, resize and normalize image files (in order), as the device does.

    Raises:
        InputError: a file is not an image (or, for non-RGB models, not one TensorFlow decodes).
    """
    if pre.channels == 3:
        return _device_inputs(paths, _load_image, pre, desc)
    tf = import_tensorflow()
    channels = pre.channels

    def load(path: Any) -> Any:
        img = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
        return tf_prepare(tf, img, pre)

    ds = tf.data.Dataset.from_tensor_slices(paths).map(load, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    out: list[np.ndarray] = []
    it = iter(ds.as_numpy_iterator())
    for i in progress(range(len(paths)), total=len(paths), desc=desc):
        try:
            out.append(next(it))
        except tf.errors.InvalidArgumentError as exc:
            why = str(exc).splitlines()[0].split(": ")[-1].rstrip(".")  # TF's own reason, last in its chain
            raise InputError(f"cannot decode image {str(paths[i])!r}: {why}. Remove or re-save it") from None
    return Inputs(np.stack(out).astype(np.float32), None)


def tf_prepare(tf: Any, img: Any, pre: Preprocessing) -> Any:
    """uint8 HWC pixels -> model input: color order, resize, (pixel - mean) / std (non-RGB models)."""
    img = tf.cast(img, tf.float32)
    if pre.color is ColorOrder.BGR:
        img = img[..., ::-1]
    w, h = pre.input_size
    if pre.resize is ResizeMode.LETTERBOX:
        size = tf.cast(tf.shape(img)[:2], tf.float32)
        r = tf.minimum(h / size[0], w / size[1])
        nh = tf.cast(tf.round(size[0] * r), tf.int32)
        nw = tf.cast(tf.round(size[1] * r), tf.int32)
        img = tf.image.resize(img, tf.stack([nh, nw]), antialias=True)
        img = tf.image.pad_to_bounding_box(img - LETTERBOX_PAD, (h - nh) // 2, (w - nw) // 2, h, w) + LETTERBOX_PAD
    else:
        # antialias: shrinking averages the source pixels, as the device's cv2.INTER_AREA does
        img = tf.image.resize(img, (h, w), antialias=True)
    mean = tf.constant(pre.mean, tf.float32)
    std = tf.constant(pre.std, tf.float32)
    return (img - mean) / std


def prepare_pixels(pixels: np.ndarray, pre: Preprocessing) -> Inputs:
    """uint8 pixel arrays (N, H, W, C; RGB) -> model inputs, as :func:`decode_images` does for files.

    Raises:
        InputError: the arrays' channels differ from the model's.
    """
    if pixels.shape[-1] != pre.channels:
        raise InputError(f"pixel arrays have {pixels.shape[-1]} channels; the model takes {pre.channels}")
    if pre.channels == 3:
        return _device_inputs(list(pixels), np.ascontiguousarray, pre, "preparing images")
    tf = import_tensorflow()
    ds = tf.data.Dataset.from_tensor_slices(pixels).map(lambda im: tf_prepare(tf, im, pre),
                                                        num_parallel_calls=tf.data.AUTOTUNE)
    return Inputs(np.stack(list(ds.prefetch(tf.data.AUTOTUNE).as_numpy_iterator())).astype(np.float32), None)
