"""Image files and pixel arrays -> model inputs, with a parallel tf.data pipeline.

The preprocessing is the one the device applies (edgekit.preprocess): color order, resize
(stretch, or letterbox padded with 114 grey), then (pixel - mean) / std.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from edgekit.converters._native import import_tensorflow, progress
from edgekit.converters.options import ColorOrder, ResizeMode
from edgekit.converters.preprocessing import LETTERBOX_PAD, Preprocessing
from edgekit.errors import InputError

__all__ = ["IMAGE_SUFFIXES", "list_images", "class_ids", "decode_images", "prepare_pixels", "tf_prepare"]

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


def decode_images(paths: list[str], pre: Preprocessing, desc: str) -> np.ndarray:
    """Decode, resize and normalize image files with a parallel tf.data pipeline (in order).

    Raises:
        InputError: a file is not an image TensorFlow decodes (JPEG, PNG, BMP, GIF).
    """
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
    return np.stack(out).astype(np.float32)


def tf_prepare(tf: Any, img: Any, pre: Preprocessing) -> Any:
    """uint8 HWC pixels -> model input: color order, resize, (pixel - mean) / std."""
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


def prepare_pixels(pixels: np.ndarray, pre: Preprocessing) -> np.ndarray:
    """uint8 pixel arrays (N, H, W, C) -> model inputs, as :func:`decode_images` does for files.

    Raises:
        InputError: the arrays' channels differ from the model's.
    """
    tf = import_tensorflow()
    if pixels.shape[-1] != pre.channels:
        raise InputError(f"pixel arrays have {pixels.shape[-1]} channels; the model takes {pre.channels}")
    ds = tf.data.Dataset.from_tensor_slices(pixels).map(lambda im: tf_prepare(tf, im, pre),
                                                        num_parallel_calls=tf.data.AUTOTUNE)
    return np.stack(list(ds.prefetch(tf.data.AUTOTUNE).as_numpy_iterator())).astype(np.float32)
