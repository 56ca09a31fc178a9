"""Images into model inputs, and boxes from model inputs back onto the image.

Small pure functions shared by ``edgekit classify`` and the detection loop::

    image = load_image("photo.jpg")                             # RGB uint8, H x W x 3
    resized, tf = fit(image, (300, 300), ResizeMode.LETTERBOX)   # size is (width, height)
    x = to_input(resized, model.inputs[0], Normalization.from_metadata(model.metadata))
    boxes_px = tf.normalized_to_source(boxes_normalized)         # back onto `image`, clipped

Coordinates are continuous: pixel ``i`` spans ``[i, i + 1)``, so a box covering a whole
W x H image is ``(0, 0, W, H)`` and the mapping between image and input is exact.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from edgekit.contract.enums import BoxMapping, ColorOrder, Interpolation, Layout, ResizeMode
from edgekit.contract.spec import LETTERBOX_PAD, Normalization, Transform, image_input, plan_resize
from edgekit.resample import tf_bilinear_into, tf_pad_plan, warp_into
from edgekit.errors import InputError, ModelError
from edgekit.runtimes.tensors import TensorSpec

__all__ = [
    "MAX_IMAGE_PIXELS",
    "LETTERBOX_PAD",
    "ColorOrder",
    "Normalization",
    "ResizeMode",
    "Transform",
    "fit",
    "fit_into",
    "load_image",
    "to_input",
    "write_channels_first",
    "write_channels_last",
]

MAX_IMAGE_PIXELS = 100_000_000


def load_image(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an image file as RGB uint8 of shape (H, W, 3), upright per its EXIF orientation.

    Grayscale is repeated into three channels; alpha (RGBA, LA, palette transparency) is
    composited on black; 16-bit images are scaled to 8 bits. Any format Pillow reads
    (BMP, JPEG, PNG, WebP, TIFF, ...).

    Raises:
        InputError: the path is missing, a folder, empty, not an image, truncated or
            corrupt, or larger than :data:`MAX_IMAGE_PIXELS`.
    """
    from PIL import Image, UnidentifiedImageError

    p = Path(path)
    _check_image_path(p)
    try:
        # Pillow warns above ~89 MP and refuses above twice that; our limit sits between,
        # so its warning (printed on stderr, under the CLI's one-line errors) is noise here.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            im = Image.open(p)
        with im:
            w, h = im.size
            if w * h > MAX_IMAGE_PIXELS:
                raise _too_large(p, w, h)
            im.load()
            return _to_rgb8(_upright(im))
    except InputError:
        raise
    except PermissionError:
        raise InputError(f"cannot read image {str(p)!r}: permission denied. Check the file's permissions.") from None
    except Image.DecompressionBombError as exc:
        raise InputError(f"image {str(p)!r} is larger than the {MAX_IMAGE_PIXELS / 1e6:.0f} megapixels edgekit "
                         f"reads ({exc}). Downscale it first.") from None
    except UnidentifiedImageError:
        raise InputError(f"{str(p)!r} is not an image Pillow can read (expected BMP, JPEG, PNG, WebP, "
                         f"...; the file starts with {_head(p)!r}). Pass an image file.") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        # Pillow reports a cut-off or damaged file as any of these, depending on the codec.
        raise InputError(f"image {str(p)!r} is truncated or corrupt ({exc}). Copy or save it again.") from None


def _check_image_path(p: Path) -> None:
    if not p.exists():
        raise InputError(f"image file {str(p)!r} does not exist. Check the path.")
    if p.is_dir():
        raise InputError(f"{str(p)!r} is a directory; pass image files (e.g. {str(p / '*.jpg')!r}).")
    if p.stat().st_size == 0:
        raise InputError(f"image file {str(p)!r} is empty (0 bytes); the copy was interrupted or never written.")


def _too_large(p: Path, w: int, h: int) -> InputError:
    return InputError(f"image {str(p)!r} is {w}x{h} ({w * h / 1e6:.0f} megapixels); edgekit reads at most "
                      f"{MAX_IMAGE_PIXELS / 1e6:.0f} megapixels. Downscale it first.")


def _head(p: Path) -> bytes:
    with open(p, "rb") as f:
        return f.read(8)


# EXIF Orientation values that need a transpose (1 is upright; anything else is not a valid value).
_TURNED = frozenset(range(2, 9))


def _upright(im: Any) -> Any:
    """The image turned upright per its EXIF orientation; the same object when it already is.

    Not ``exif_transpose(in_place=True)``: that keyword came with Pillow 10, and Raspberry Pi
    OS's Pillow is 9.4 (picamera2 pulls it into install.sh's venv). Without it, Pillow 9.4
    returns a copy even of an upright image (300 MB for 100 megapixels); asking first copies
    only when there is something to turn.
    """
    if im.getexif().get(0x0112) not in _TURNED:
        return im
    from PIL import ImageOps  # only for an image to turn (start-up time)

    return ImageOps.exif_transpose(im)


def _to_rgb8(im: Any) -> np.ndarray:
    """Any Pillow mode -> RGB uint8 array."""
    mode = im.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        a = np.asarray(im)
        if mode == "F" and a.size and float(a.max()) <= 1.0:
            a = a * 255.0  # float images in [0, 1]
        elif mode != "F":
            a = a.astype(np.float64) / 257.0  # 0..65535 -> 0..255
        gray = np.clip(np.round(a), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2))
    if mode in ("P", "PA"):
        im = im.convert("RGBA" if mode == "PA" or "transparency" in im.info else "RGB")
    elif mode not in ("RGB", "RGBA", "RGBa", "L", "LA", "La"):
        im = im.convert("RGB")  # 1, CMYK, YCbCr, LAB, HSV
    a = np.asarray(im)
    if a.ndim == 2:
        return np.ascontiguousarray(np.repeat(a[:, :, None], 3, axis=2))
    if a.shape[2] == 2:  # gray + alpha
        gray = np.repeat(a[:, :, :1], 3, axis=2)
        return _on_black(gray, a[:, :, 1:], premultiplied=im.mode == "La")
    if a.shape[2] == 4:
        return _on_black(a[:, :, :3], a[:, :, 3:], premultiplied=im.mode == "RGBa")
    return np.ascontiguousarray(a)


def _on_black(rgb: np.ndarray, alpha: np.ndarray, premultiplied: bool) -> np.ndarray:
    if premultiplied:
        return np.ascontiguousarray(rgb)
    out = (rgb.astype(np.uint16) * alpha.astype(np.uint16) + 127) // 255
    return out.astype(np.uint8)


def _check_image(image: np.ndarray) -> np.ndarray:
    a = np.asarray(image)
    if a.ndim != 3 or a.shape[2] != 3 or a.dtype != np.uint8 or 0 in a.shape:
        raise InputError(f"expected an RGB uint8 image of shape (H, W, 3), got {a.dtype.name} {a.shape}. "
                         "Use load_image(), or convert (e.g. cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)).")
    return a


def _resize_into(image: np.ndarray, target: np.ndarray, how: Interpolation = Interpolation.AUTO) -> None:
    th, tw = target.shape[:2]
    h, w = image.shape[:2]
    # INTER_AREA averages every source pixel when shrinking a lot (INTER_LINEAR would alias),
    # but costs ~7x more (1.5 ms vs 0.2 ms for 640x480 -> 300x300): only from 3x on does it pay.
    # At exactly 3x (and other odd factors) INTER_LINEAR's sample points fall on pixel centres: it
    # keeps one pixel in three and drops the rest (a 480-px belt into a 160-px model saw defects on
    # good parts), hence from 3x, not past it. Enlarging uses INTER_LINEAR even for AREA (OpenCV's
    # INTER_AREA enlarges like nearest-neighbour).
    # (Models trained and exported by Ultralytics see INTER_LINEAR in predict: their metadata says so.)
    shrinking = tw <= w and th <= h
    area = shrinking and (how is Interpolation.AREA or (how is Interpolation.AUTO and (tw <= w / 3 or th <= h / 3)))
    interp = cv2.INTER_AREA if area else cv2.INTER_LINEAR
    if (th, tw) == (h, w):
        target[...] = image
        return
    out = cv2.resize(image, (tw, th), dst=target, interpolation=interp)
    if not np.shares_memory(out, target):  # OpenCV made its own array; copy it in
        target[...] = out


def fit(image: np.ndarray, size: tuple[int, int], mode: ResizeMode | str = ResizeMode.STRETCH,
        *, pad_value: int = LETTERBOX_PAD, interpolation: Interpolation | str = Interpolation.AUTO,
        boxes: BoxMapping | str = BoxMapping.EXACT) -> tuple[np.ndarray, Transform]:
    """Resize an RGB uint8 image to ``size`` = (width, height) for a model input.

    LETTERBOX pads with ``pad_value`` (114 gray by default, what YOLO models are trained
    with; pass 0 for black).

    Raises:
        InputError: the image is not H x W x 3 uint8, or the size is not positive.
    """
    dw, dh = int(size[0]), int(size[1])
    if dw < 1 or dh < 1:
        raise InputError(f"the target size must be positive (width, height), got {tuple(size)}")
    out = np.empty((dh, dw, 3), dtype=np.uint8)
    return out, fit_into(image, out, mode, pad_value=pad_value, interpolation=interpolation, boxes=boxes)


def fit_into(image: np.ndarray, out_view: np.ndarray, mode: ResizeMode | str = ResizeMode.STRETCH,
             *, pad_value: int = LETTERBOX_PAD, interpolation: Interpolation | str = Interpolation.AUTO,
             boxes: BoxMapping | str = BoxMapping.EXACT) -> Transform:
    """Resize an RGB uint8 image straight into ``out_view`` (H x W x 3 or 1 x H x W x 3 uint8),
    e.g. ``model.input_view(0)``, with no intermediate copy. ``interpolation`` AUTO is bilinear,
    or pixel-area averaging from a 3x shrink on; LINEAR is what Ultralytics' predict uses. ``boxes``:
    how the returned transform maps letterboxed boxes back (see :class:`~edgekit.contract.BoxMapping`).

    Raises:
        InputError: the image or the view is not H x W x 3 uint8 (for float or int8 inputs
            use :func:`fit` then :func:`to_input`).
    """
    a = _check_image(image)
    view = out_view[0] if out_view.ndim == 4 and out_view.shape[0] == 1 else out_view
    if view.ndim != 3 or view.shape[2] != 3 or view.dtype != np.uint8:
        raise InputError(f"fit_into writes uint8 pixels into an (H, W, 3) or (1, H, W, 3) uint8 array, got "
                         f"{out_view.dtype.name} {out_view.shape}. For float or int8 model inputs use fit() "
                         "then to_input().")
    m, how = ResizeMode.parse(mode), Interpolation.parse(interpolation)
    if how is Interpolation.MEDIAPIPE:
        return warp_into(a, view, m, pad_value)
    if how is Interpolation.TENSORFLOW and m is ResizeMode.LETTERBOX:
        tf, x0, y0, nw, nh = tf_pad_plan(a.shape[:2], (view.shape[1], view.shape[0]))
    else:
        tf, x0, y0, nw, nh = plan_resize(a.shape[:2], (view.shape[1], view.shape[0]), m, BoxMapping.parse(boxes))
    if m is ResizeMode.STRETCH:
        (tf_bilinear_into if how is Interpolation.TENSORFLOW else lambda i, v: _resize_into(i, v, how))(a, view)
        return tf
    view[:y0] = pad_value
    view[y0 + nh:] = pad_value
    view[y0:y0 + nh, :x0] = pad_value
    view[y0:y0 + nh, x0 + nw:] = pad_value
    if how is Interpolation.TENSORFLOW:
        tf_bilinear_into(a, view[y0:y0 + nh, x0:x0 + nw])
    else:
        _resize_into(a, view[y0:y0 + nh, x0:x0 + nw], how)
    return tf


def to_input(image: np.ndarray, spec: TensorSpec, norm: Normalization | None = None) -> np.ndarray:
    """A resized RGB uint8 image -> exactly what input ``spec`` holds (its dtype and shape).

    With ``norm`` giving mean/std: ``real = (pixel - mean) / std``, then quantized with the
    input's scale and zero point (or cast, for float inputs). Without (models carrying no
    metadata) the conventions of published image models apply:

    * uint8 input: the pixels as they are (quantized image models take raw pixels, e.g.
      scale 1/128 and zero point 128 encode the [-1, 1] range);
    * int8 input: ``pixel - 128``;
    * float input: ``(pixel - 127.5) / 127.5``, the MobileNet convention ([-1, 1]);
    * int16 input: the MobileNet convention, quantized.

    ``norm.color == BGR`` swaps the channels first. A channels-first input (1, 3, H, W) gets
    the same values transposed.

    Raises:
        InputError: the image size differs from the input's, or the input is not an image.
    """
    a = _check_image(image)
    hw, layout = _image_hw(spec)
    if a.shape[:2] != hw:
        raise InputError(f"input {spec.name!r} expects an image of {hw[1]}x{hw[0]} (shape {spec.shape}), "
                         f"got {a.shape[1]}x{a.shape[0]} {a.shape}. Resize it with fit() first.")
    out = np.empty(spec.shape, dtype=spec.dtype)
    (write_channels_first if layout is Layout.NCHW else write_channels_last)(a, out, spec, norm)
    return out


def _real_to(real: np.ndarray, spec: TensorSpec) -> np.ndarray:
    dtype = np.dtype(spec.dtype)
    if spec.quantized or np.issubdtype(dtype, np.floating):
        return spec.quantize(real)
    info = np.iinfo(dtype)  # an unquantized integer input: the rounded real values
    return np.clip(np.round(real), info.min, info.max).astype(dtype)


def _image_hw(spec: TensorSpec) -> tuple[tuple[int, int], Layout]:
    try:
        inp = image_input(spec)
    except ModelError:
        raise InputError(f"input {spec.name!r} of shape {tuple(spec.shape)} is not an RGB image input "
                         "(1, H, W, 3) or (1, 3, H, W).") from None
    return (inp.height, inp.width), inp.layout


def write_channels_first(image: np.ndarray, target: np.ndarray, spec: TensorSpec, norm: Normalization | None = None,
                         *, bgr: bool = False) -> None:
    """Write a resized uint8 image (H, W, 3) into a channels-first input ``target`` ((1, 3, H, W)
    or (3, H, W) of ``spec``'s dtype, e.g. ``model.input_view(0)``) one channel at a time: the
    values :func:`to_input` gives, transposed, without a transposed copy of the image.

    ``bgr``: the image is in OpenCV's BGR order (the channels are read swapped).

    Raises:
        InputError: the target is not (1, 3, H, W) or (3, H, W) of the image's size, or the
            input's type has no image convention and no normalization is given.
    """
    view = target[0] if target.ndim == 4 and target.shape[0] == 1 else target
    if view.ndim != 3 or view.shape[0] != 3 or view.shape[1:] != image.shape[:2]:
        raise InputError(f"expected a (1, 3, {image.shape[0]}, {image.shape[1]}) input for a "
                         f"{image.shape[1]}x{image.shape[0]} image, got {target.shape}")
    swap = bgr != (norm is not None and norm.color is ColorOrder.BGR)  # the model's channel c is the image's 2 - c
    mean, std = _mean_std(norm)
    lut = _lut(spec, mean, std)
    if lut is not None:  # looked up channels-last in OpenCV, then one transposing copy
        src = cv2.cvtColor(image, cv2.COLOR_BGR2RGB) if swap else np.ascontiguousarray(image)
        view[...] = cv2.LUT(src, lut).transpose(2, 0, 1)
        return
    for c in range(3):
        _fill(image[:, :, 2 - c if swap else c], view[c], spec, None if mean is None else mean[c],
              None if std is None else std[c])


def write_channels_last(image: np.ndarray, target: np.ndarray, spec: TensorSpec, norm: Normalization | None = None,
                        *, bgr: bool = False) -> None:
    """Write a resized uint8 image (H, W, 3) into a channels-last input ``target`` ((1, H, W, 3) or
    (H, W, 3) of ``spec``'s dtype): the values :func:`to_input` gives, computed straight into the
    tensor (float inputs) or with one temporary (quantized ones), not through copies.

    ``bgr``: the image is in OpenCV's BGR order (the channels are read swapped).

    Raises:
        InputError: the target is not (1, H, W, 3) or (H, W, 3) of the image's size, or the
            input's type has no image convention and no normalization is given.
    """
    view = target[0] if target.ndim == 4 and target.shape[0] == 1 else target
    if view.shape != image.shape:
        raise InputError(f"expected a (1, {image.shape[0]}, {image.shape[1]}, 3) input for a "
                         f"{image.shape[1]}x{image.shape[0]} image, got {target.shape}")
    swap = bgr != (norm is not None and norm.color is ColorOrder.BGR)
    src = cv2.cvtColor(image, cv2.COLOR_BGR2RGB) if swap else np.ascontiguousarray(image)
    mean, std = _mean_std(norm)
    lut = _lut(spec, mean, std)
    if lut is not None:  # one table look-up per value, in OpenCV (which lets the other threads run)
        if view.flags.c_contiguous:
            cv2.LUT(src, lut, dst=view)
        else:
            view[...] = cv2.LUT(src, lut)
        return
    h, w = src.shape[:2]
    # Rows of W*3 values: numpy's inner loops then run along a row, not over 3 channels.
    out = view.reshape(h, w * 3) if view.flags.c_contiguous else view
    if out is not view:
        mean, std = (None if mean is None else np.tile(mean, w)), (None if std is None else np.tile(std, w))
    _fill(src.reshape(h, w * 3) if out is not view else src, out, spec, mean, std)


# Input types OpenCV's LUT can write (its table's depth is the output's).
_LUT_TYPES = frozenset(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16, np.float32))
_LUTS: dict[tuple[Any, ...], np.ndarray] = {}


def _lut(spec: TensorSpec, mean: np.ndarray | None, std: np.ndarray | None) -> np.ndarray | None:
    """The (1, 256, 3) table of what :func:`_fill` writes for each pixel value in each channel (computed
    by :func:`_fill` itself, so the values are the same to the bit); None for a type OpenCV's LUT does
    not write. Each value of a uint8 image maps to one input value per channel, so a frame costs one
    look-up per value instead of a subtract, a divide, a round, a clip and a cast over the whole frame."""
    dtype = np.dtype(spec.dtype)
    if dtype not in _LUT_TYPES:
        return None
    key = (dtype.str, spec.scale, spec.zero_point, None if mean is None else mean.tobytes(),
           None if std is None else std.tobytes())
    lut = _LUTS.get(key)
    if lut is None:
        ramp = np.repeat(np.arange(256, dtype=np.uint8), 3).reshape(1, 768)  # (v, v, v) for v in 0..255
        table = np.empty((1, 768), dtype)
        _fill(ramp, table, spec, None if mean is None else np.tile(mean, 256), None if std is None else np.tile(std, 256))
        lut = _LUTS[key] = table.reshape(1, 256, 3)
    return lut


def _mean_std(norm: Normalization | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    if norm is None or norm.mean is None or norm.std is None:
        return None, None
    return np.asarray(norm.mean, np.float32), np.asarray(norm.std, np.float32)


def _fill(src: np.ndarray, out: np.ndarray, spec: TensorSpec, mean: Any, std: Any) -> None:
    """``out`` = what :func:`to_input` computes from pixels ``src``, with the normalization's
    float32 ``mean``/``std`` (broadcast along ``src``), or the input type's convention (None)."""
    dtype = np.dtype(spec.dtype)
    if mean is not None and std is not None:
        if dtype == np.float32:  # straight into the tensor: the same float32 arithmetic as Normalization.real
            np.subtract(src, mean, out=out, dtype=np.float32)
            np.divide(out, std, out=out)
        else:
            real = np.subtract(src, mean, dtype=np.float32)
            np.divide(real, std, out=real)
            out[...] = _real_to(real, spec)
    elif dtype == np.uint8:
        out[...] = src
    elif dtype == np.int8:
        np.subtract(src, 128, out=out, dtype=np.int16, casting="unsafe")
    elif np.issubdtype(dtype, np.floating) or (spec.quantized and dtype == np.int16):
        out[...] = _real_to((src.astype(np.float32) - np.float32(127.5)) / np.float32(127.5), spec)
    else:
        raise InputError(f"input {spec.name!r} is {dtype.name}; edgekit has no image convention for it. "
                         "Give a Normalization (mean, std) or feed the array yourself.")
