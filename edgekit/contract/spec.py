"""The preprocessing half of the contract: how an image becomes a model's input, and back.

Pure numpy; the pixel work (resizing with OpenCV into the input tensor) is
:mod:`edgekit.preprocess`, which follows these values exactly, and the converter computes its
validation inputs through it too, so both sides feed a model the same numbers.

Coordinates are continuous: pixel ``i`` spans ``[i, i + 1)``, so a box covering a whole W x H
image is ``(0, 0, W, H)`` and the mapping between image and input is exact.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Protocol, TypeVar

import numpy as np

from edgekit.contract.enums import BoxMapping, Choice, ColorOrder, Interpolation, Layout, ResizeMode
from edgekit.errors import InputError, ModelError

__all__ = ["LETTERBOX_PAD", "Normalization", "Transform", "ImageInput", "TensorLike", "ResizePlan", "plan_resize",
           "image_input", "resize_mode", "interpolation", "box_mapping"]

# Letterbox borders are gray 114: what YOLO-family models see in training (Ultralytics' LetterBox).
LETTERBOX_PAD = 114


class TensorLike(Protocol):
    """What the contract reads of a tensor: :class:`edgekit.runtimes.TensorSpec` fits."""

    @property
    def name(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class Normalization:
    """How pixels become the model's real input values: ``real = (pixel - mean) / std``.

    ``mean``/``std`` of None mean "the convention for the input's type" (see
    :func:`edgekit.preprocess.to_input`); ``color`` is the channel order the model was trained on.

    Raises (on creation):
        InputError: the color is not RGB/BGR, only one of mean/std is given, a value is not
            one number or three, or std holds a 0.
    """

    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    color: ColorOrder = ColorOrder.RGB

    def __post_init__(self) -> None:
        object.__setattr__(self, "color", _color_order(self.color))
        if (self.mean is None) != (self.std is None):
            raise InputError("give both mean and std, or neither")
        for name in ("mean", "std"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _three(name, value))
        if self.std is not None and any(s == 0 for s in self.std):
            raise InputError(f"std must not be 0, got {self.std}")

    def real(self, rgb: np.ndarray) -> np.ndarray:
        """RGB uint8 pixels (..., 3) -> the model's float32 input values (channels swapped for BGR).

        Raises:
            InputError: this normalization has no mean/std (the input type's convention applies).
        """
        if self.mean is None or self.std is None:
            raise InputError("this Normalization has no mean/std; edgekit.preprocess.to_input applies the "
                             "input type's convention")
        a = rgb[..., ::-1] if self.color is ColorOrder.BGR else rgb
        return (a.astype(np.float32) - np.asarray(self.mean, np.float32)) / np.asarray(self.std, np.float32)

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any] | None) -> Normalization | None:
        """The normalization in edgekit metadata (the whole document or its ``preprocessing``).

        Returns None when the metadata says nothing about it.

        Raises:
            ModelError: the metadata holds values that make no sense.
        """
        if not meta:
            return None
        pre = meta.get("preprocessing", meta)
        if not isinstance(pre, Mapping) or not any(k in pre for k in ("mean", "std", "color")):
            return None
        try:
            return cls(mean=pre.get("mean"), std=pre.get("std"), color=_color_order(pre.get("color") or "RGB"))
        except (InputError, TypeError) as exc:
            raise ModelError(f"the model's edgekit metadata has invalid preprocessing {dict(pre)}: {exc}. "
                             "Re-export the model with `edgekit convert`.") from None


def _color_order(value: object) -> ColorOrder:
    """A ColorOrder, or its name in any case (what the constructor and the metadata may give)."""
    try:
        return value if isinstance(value, ColorOrder) else ColorOrder(str(value).upper())
    except ValueError:
        raise InputError(f"color must be RGB or BGR, got {value!r}") from None


def _three(name: str, value: Any) -> tuple[float, float, float]:
    vals = [value] if isinstance(value, numbers.Real) else list(value)
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3 or not all(_finite_number(v) for v in vals):
        raise InputError(f"{name} must be one number or three (one per channel), got {value!r}")
    return (float(vals[0]), float(vals[1]), float(vals[2]))


def _finite_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Transform:
    """The mapping between source-image pixels and model-input pixels.

    ``input = source * scale + pad`` on each axis, in continuous pixel coordinates. For
    LETTERBOX the two scales are the content's real size over the source's (they differ by the
    rounding of the content size at most), or, with :attr:`BoxMapping.ULTRALYTICS`, Ultralytics'
    ``scale_boxes`` gain and pad (see :func:`plan_resize`).
    """

    src_size: tuple[int, int]  # (width, height) of the source image
    dst_size: tuple[int, int]  # (width, height) of the model input
    scale_x: float
    scale_y: float
    pad_x: float = 0.0
    pad_y: float = 0.0

    @classmethod
    def identity(cls, size: tuple[int, int]) -> Transform:
        """Source and input are the same (width, height) image: boxes stay where they are."""
        return cls((int(size[0]), int(size[1])), (int(size[0]), int(size[1])), 1.0, 1.0)

    def boxes_to_source(self, boxes_xyxy: np.ndarray) -> np.ndarray:
        """Boxes (..., 4) as x1, y1, x2, y2 in input pixels -> source pixels, clipped to the image.

        Raises:
            InputError: the last axis is not 4 long.
        """
        b = _as_boxes(boxes_xyxy)
        offset = np.array([self.pad_x, self.pad_y, self.pad_x, self.pad_y])
        scale = np.array([self.scale_x, self.scale_y, self.scale_x, self.scale_y])
        out = (b - offset) / scale
        w, h = self.src_size
        clipped: np.ndarray = np.clip(out, 0.0, np.array([w, h, w, h], dtype=np.float64))  # (numpy types it Any)
        return clipped

    def normalized_to_source(self, boxes_xyxy_normalized: np.ndarray) -> np.ndarray:
        """Boxes as x1, y1, x2, y2 in [0, 1] of the model input -> source pixels, clipped.

        Raises:
            InputError: the last axis is not 4 long.
        """
        b = _as_boxes(boxes_xyxy_normalized)
        w, h = self.dst_size
        return self.boxes_to_source(b * np.array([w, h, w, h], dtype=np.float64))


def _as_boxes(boxes: np.ndarray) -> np.ndarray:
    b = np.asarray(boxes, dtype=np.float64)
    if b.ndim == 0 or b.shape[-1] != 4:
        raise InputError(f"boxes must have shape (..., 4) as x1, y1, x2, y2; got shape {b.shape}")
    return b


class ResizePlan(NamedTuple):
    """Where an image goes in the input: its transform, and the content's place (x0, y0) and size."""

    transform: Transform
    x0: int
    y0: int
    width: int
    height: int


def plan_resize(src_hw: tuple[int, int], dst_wh: tuple[int, int], mode: ResizeMode,
                boxes: BoxMapping = BoxMapping.EXACT) -> ResizePlan:
    """The plan for an image of (height, width) ``src_hw`` into an input of (width, height) ``dst_wh``.

    LETTERBOX is Ultralytics' ``LetterBox(auto=False, center=True)``: gain ``min(dw / w, dh / h)``,
    content ``round(w * gain)`` x ``round(h * gain)``, padding split with the odd pixel on the
    right/bottom. Boxes go back through the content's scales and offset (EXACT), or through
    Ultralytics' ``scale_boxes``: the gain, and pad ``round((dw - w * gain) / 2 - 0.1)``.
    """
    h, w = src_hw
    dw, dh = dst_wh
    if mode is ResizeMode.STRETCH:
        return ResizePlan(Transform((w, h), (dw, dh), dw / w, dh / h), 0, 0, dw, dh)
    gain = min(dw / w, dh / h)
    nw, nh = max(1, min(dw, round(w * gain))), max(1, min(dh, round(h * gain)))
    x0, y0 = (dw - nw) // 2, (dh - nh) // 2
    if boxes is BoxMapping.ULTRALYTICS:
        tf = Transform((w, h), (dw, dh), gain, gain, float(round((dw - w * gain) / 2 - 0.1)),
                       float(round((dh - h * gain) / 2 - 0.1)))
    else:
        tf = Transform((w, h), (dw, dh), nw / w, nh / h, float(x0), float(y0))
    return ResizePlan(tf, x0, y0, nw, nh)


_C = TypeVar("_C", bound=Choice)


def _named(metadata: Mapping[str, Any] | None, key: str, enum: type[_C], default: _C) -> _C:
    pre = (metadata or {}).get("preprocessing")
    named = pre.get(key) if isinstance(pre, Mapping) else None
    try:
        return enum.parse(named) if named else default
    except InputError as exc:
        raise ModelError(f"the model's metadata has preprocessing.{key} {named!r}: {exc}") from None


def interpolation(metadata: Mapping[str, Any] | None) -> Interpolation:
    """The metadata's ``preprocessing.interpolation``, else AUTO.

    Raises:
        ModelError: the metadata names an unknown interpolation.
    """
    return _named(metadata, "interpolation", Interpolation, Interpolation.AUTO)


def box_mapping(metadata: Mapping[str, Any] | None) -> BoxMapping:
    """The metadata's ``preprocessing.box_mapping``, else EXACT.

    Raises:
        ModelError: the metadata names an unknown mapping.
    """
    return _named(metadata, "box_mapping", BoxMapping, BoxMapping.EXACT)


def resize_mode(value: ResizeMode | str | None, metadata: Mapping[str, Any] | None = None) -> ResizeMode:
    """``value``, else the metadata's ``preprocessing.resize``, else STRETCH.

    Raises:
        InputError: the value names no resize mode.
    """
    pre = (metadata or {}).get("preprocessing")
    chosen = value or (pre.get("resize") if isinstance(pre, Mapping) else None) or ResizeMode.STRETCH
    return ResizeMode.parse(chosen)


class ImageInput(NamedTuple):
    """Where an image goes in a model's input tensor: its size and where the channels sit."""

    width: int
    height: int
    layout: Layout = Layout.NHWC

    @property
    def size(self) -> tuple[int, int]:
        """(width, height)."""
        return self.width, self.height

    def describe(self) -> str:
        return f"{self.width}x{self.height} RGB, {self.layout.value}"


def image_input(spec: TensorLike, metadata: Mapping[str, Any] | None = None) -> ImageInput:
    """Read an image input's size and layout from its shape: (1, H, W, 3) is NHWC, (1, 3, H, W)
    NCHW (litert-torch and Ultralytics exports); the metadata's ``preprocessing.layout`` settles
    a shape that reads both ways.

    Raises:
        ModelError: the input is not one RGB image in either layout.
    """
    shape = tuple(int(d) for d in spec.shape)
    pre = (metadata or {}).get("preprocessing")
    named = pre.get("layout") if isinstance(pre, Mapping) else None
    if len(shape) == 3:
        shape = (1, *shape)
    nhwc = len(shape) == 4 and shape[0] == 1 and shape[3] == 3
    nchw = len(shape) == 4 and shape[0] == 1 and shape[1] == 3
    if named and (nhwc or nchw):
        try:
            layout = Layout.parse(named)
        except InputError as exc:
            raise ModelError(f"the model's metadata has preprocessing.layout {named!r}: {exc}") from None
        nhwc, nchw = layout is Layout.NHWC and nhwc, layout is Layout.NCHW and nchw
    if nhwc:
        return ImageInput(shape[2], shape[1], Layout.NHWC)
    if nchw:
        return ImageInput(shape[3], shape[2], Layout.NCHW)
    raise ModelError(f"input {spec.name!r} of shape {list(spec.shape)} is not one RGB image: edgekit feeds "
                     "images as (1, H, W, 3) or (1, 3, H, W)")


