"""The preprocessing a model expects: decided once, used for calibration, validation and the device.

Decided from, in order: what the user states (flags), a normalization layer at the
model's input (then the device feeds raw pixels), the Keras Applications family the
model's name reveals, and last an assumption (pixels / 255) that is reported as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from edgekit.contract.enums import BoxMapping, ColorOrder, Interpolation, ResizeMode
from edgekit.contract.spec import LETTERBOX_PAD, Normalization
from edgekit.converters.options import PreprocessingOverrides
from edgekit.converters.sources.base import SourceModel

__all__ = ["Preprocessing", "resolve_preprocessing", "LETTERBOX_PAD"]

# Keras Applications whose preprocess_input is outside the model: name prefix -> (mean, std, color).
_KERAS_APPLICATIONS: tuple[tuple[str, tuple[float, ...], tuple[float, ...], ColorOrder], ...] = (
    ("mobilenetv2", (127.5,), (127.5,), ColorOrder.RGB),
    ("mobilenet_", (127.5,), (127.5,), ColorOrder.RGB),
    ("inception", (127.5,), (127.5,), ColorOrder.RGB),
    ("xception", (127.5,), (127.5,), ColorOrder.RGB),
    ("resnet50", (103.939, 116.779, 123.68), (1.0,), ColorOrder.BGR),
    ("vgg", (103.939, 116.779, 123.68), (1.0,), ColorOrder.BGR),
)


@dataclass(frozen=True)
class Preprocessing:
    """How a pixel image becomes the model's input: resize, color order, (pixel - mean) / std."""

    input_size: tuple[int, int]  # (width, height)
    channels: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    color: ColorOrder = ColorOrder.RGB
    resize: ResizeMode = ResizeMode.STRETCH
    decided_by: str = "assumed"  # "flags" | "model: ..." | "keras application ..." | "assumed"
    # How frames are shrunk and letterboxed boxes mapped back (Ultralytics sources: LINEAR and
    # ULTRALYTICS, as their predict does); written into the metadata when not the default.
    interpolation: Interpolation = Interpolation.AUTO
    box_mapping: BoxMapping = BoxMapping.EXACT
    pad_value: int | None = None  # the letterbox border (None: LETTERBOX_PAD), written when stated

    @property
    def normalization(self) -> Normalization | None:
        """The device's :class:`~edgekit.contract.Normalization` for this (None unless 3 channels)."""
        if self.channels != 3:
            return None
        return Normalization(mean=self.mean, std=self.std, color=self.color)

    def normalize(self, pixels: np.ndarray) -> np.ndarray:
        """(pixel - mean) / std over the last axis, in float32 (the channels already in model order)."""
        mean = np.asarray(self.mean, np.float32)
        std = np.asarray(self.std, np.float32)
        return ((pixels.astype(np.float32) - mean) / std).astype(np.float32)

    def pixel_range(self) -> tuple[float, float]:
        """The model-input values that pixels 0 and 255 become (for messages)."""
        lo = float(np.min(self.normalize(np.zeros(self.channels))))
        hi = float(np.max(self.normalize(np.full(self.channels, 255.0))))
        return lo, hi

    def to_metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"input_size": [int(self.input_size[0]), int(self.input_size[1])],
               "resize": self.resize.value, "color": self.color.value.upper(),
               "mean": [float(m) for m in self.mean], "std": [float(s) for s in self.std]}
        if self.interpolation is not Interpolation.AUTO:
            doc["interpolation"] = self.interpolation.value
        if self.box_mapping is not BoxMapping.EXACT:
            doc["box_mapping"] = self.box_mapping.value
        if self.pad_value is not None:
            doc["pad_value"] = int(self.pad_value)
        return doc


def _per_channel(values: tuple[float, ...], channels: int, what: str) -> tuple[float, ...]:
    from edgekit.errors import InputError

    if len(values) == 1:
        return tuple(float(values[0]) for _ in range(channels))
    if len(values) != channels:
        raise InputError(f"{what} has {len(values)} values but the model input has {channels} channels; "
                         f"give 1 or {channels}")
    return tuple(float(v) for v in values)


def resolve_preprocessing(src: SourceModel, given: PreprocessingOverrides) -> tuple[Preprocessing | None, list[str]]:
    """Decide the preprocessing for an image model; None for a model that does not take images.

    Returns the preprocessing and the warnings worth showing the user.

    Raises:
        InputError: mean/std values do not match the number of channels.
    """
    if not src.is_image:
        return None, []
    hinted_resize: ResizeMode | None = None
    read_as: tuple[Interpolation, BoxMapping] = (Interpolation.AUTO, BoxMapping.EXACT)
    pad_value: int | None = None
    _, h, w, c = src.input_shape
    warnings: list[str] = []
    color = given.color or ColorOrder.RGB
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    if given.given:
        decided = "flags"
        if given.scale is not None:
            std = (1.0 / given.scale,)
        else:
            mean, std = given.mean or (0.0,), given.std or (1.0,)
        if src.normalization is not None:
            warnings.append(f"the model already starts with {src.normalization.description}; --mean/--std/--scale "
                            "are applied before it (normalizing twice is a classic mistake; drop the flags if "
                            "the model was trained on raw pixels)")
    elif src.normalization is not None:
        decided = f"model: {src.normalization.description} at its input, so it takes raw pixels 0..255"
    elif (hint := getattr(src, "preprocessing_hint", None)) is not None:
        mean, std, decided = hint.mean, hint.std, hint.description
        hinted_resize = hint.resize
        read_as = (hint.interpolation, hint.box_mapping)
        pad_value = getattr(hint, "pad_value", None)
    elif (app := _keras_application(src.model_name)) is not None:
        mean, std, app_color = app[1], app[2], app[3]
        color = given.color or app_color
        decided = f"keras application {app[0]!r} preprocess_input (from the model name {src.model_name!r})"
    else:
        std = (255.0,)
        decided = "assumed"
        warnings.append("could not infer the preprocessing from the model (no Rescaling layer at its input); "
                        "assumed pixels / 255 (inputs 0..1). State it with --scale, or --mean and --std")
    pre = Preprocessing(input_size=(w, h), channels=c, mean=_per_channel(mean, c, "mean"),
                        std=_per_channel(std, c, "std"), color=color,
                        resize=given.resize or hinted_resize or ResizeMode.STRETCH, decided_by=decided,
                        interpolation=read_as[0], box_mapping=read_as[1], pad_value=pad_value)
    return pre, warnings


def _keras_application(name: str) -> tuple[str, tuple[float, ...], tuple[float, ...], ColorOrder] | None:
    low = name.lower()
    for row in _KERAS_APPLICATIONS:
        if low.startswith(row[0]):
            return row
    return None
