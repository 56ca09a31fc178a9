"""The choices both sides of the model contract name, spelt once.

Every enum is a ``str`` enum whose value is what the edgekit metadata stores; :meth:`Choice.parse`
maps a user's string (any case, ``_`` or ``-``) to a member, with a did-you-mean.
"""

from __future__ import annotations

import enum
from typing import TypeVar

from edgekit.errors import InputError, ModelError

__all__ = ["Choice", "Task", "OutputFormat", "BoxFormat", "YoloLayout", "ResizeMode", "ColorOrder", "Layout",
           "Interpolation", "BoxMapping"]

C = TypeVar("C", bound="Choice")


class Choice(str, enum.Enum):
    """A str enum whose :meth:`parse` is forgiving about case and separators."""

    @classmethod
    def parse(cls: type[C], value: str | C) -> C:
        """The member whose value (or name) is ``value``: case-insensitive, ``_`` and ``-`` alike.

        Raises:
            InputError: no member has that name (the message lists them and suggests the closest).
        """
        if isinstance(value, cls):
            return value
        text = _key(str(value))
        for member in cls:
            if _key(member.value) == text or _key(member.name) == text:
                return member
        import difflib  # only for a value that is not one (start-up time)

        names = [m.value for m in cls]
        close = difflib.get_close_matches(str(value).strip(), names, n=1, cutoff=0.6) or \
            difflib.get_close_matches(text, [_key(n) for n in names], n=1)
        hint = ""
        if close:
            hint = f" Did you mean {next(n for n in names if _key(n) == _key(close[0]))!r}?"
        raise InputError(f"unknown {_words(cls.__name__)} {value!r}; choose one of {', '.join(names)}.{hint}")

    @classmethod
    def from_metadata(cls: type[C], value: object, key: str) -> C:
        """The member a model's metadata names under ``key`` (forgiving as :meth:`parse`).

        Raises:
            ModelError: no member has that name (the metadata is the model's, not the user's input).
        """
        try:
            return cls.parse(value if isinstance(value, cls) else str(value))
        except InputError:
            raise ModelError(f"the model's metadata has {key} {value!r}; edgekit reads "
                             f"{', '.join(m.value for m in cls)}") from None


def _key(text: str) -> str:
    return text.strip().lower().replace("_", "-")


def _words(name: str) -> str:
    return "".join(f" {c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


class Task(Choice):
    """What a model is for."""

    CLASSIFY = "classify"
    DETECT = "detect"
    SEGMENT = "segment"  # the class of every pixel (edgekit.tasks_vision.Segmenter)
    POSE = "pose"  # people's keypoints (edgekit.tasks_vision.PoseEstimator)


class OutputFormat(Choice):
    """How a model's outputs are laid out (metadata key ``output_format``)."""

    CLASSES = "classes"  # one score per class, [1, C]
    SSD = "ssd"  # TFLite_Detection_PostProcess: boxes, classes, scores, count
    YOLO = "yolo"  # raw head: [1, 4+C, N] or [1, N, 5+C], or boxes and scores as two outputs
    SEGMENTATION = "segmentation"  # [1, H, W] class ids, or [1, H, W, C] / [1, H, W, 1] scores
    KEYPOINTS = "keypoints"  # MoveNet: [1, 1, K, 3] single pose, [1, P, 56] multi pose
    ANCHORS = "anchors"  # raw anchor-based SSD (MediaPipe): [1, N, 4+2K] boxes + [1, N, C] scores


class BoxFormat(Choice):
    """The order of a box's four numbers (metadata key ``detection.box_format``)."""

    XYXY = "xyxy"
    CXCYWH = "cxcywh"
    YXYX = "yxyx"


class YoloLayout(Choice):
    """Where boxes and scores sit in a raw YOLO output."""

    V8 = "[1, 4+C, N]"  # boxes then class scores per column, no objectness (YOLOv8/v11)
    V5 = "[1, N, 5+C]"  # box, objectness, class scores per row (YOLOv5/v7)


class ResizeMode(Choice):
    """STRETCH: scale each axis to fit (aspect ratio changes; what SSD/MobileNet expect).
    LETTERBOX: one scale keeping the aspect ratio, the rest padded gray 114, centered (YOLO)."""

    STRETCH = "stretch"
    LETTERBOX = "letterbox"


class ColorOrder(Choice):
    """The channel order a model was trained on (metadata ``preprocessing.color``)."""

    RGB = "RGB"
    BGR = "BGR"


class Interpolation(Choice):
    """How a frame is shrunk into the input (metadata ``preprocessing.interpolation``).

    AUTO: bilinear, or pixel-area averaging from a 3x shrink on (less aliasing, ~7x the cost).
    LINEAR: always bilinear, as Ultralytics' ``predict`` (LetterBox) does. AREA: averaging whenever
    the frame is shrunk (a frame smaller than the input is enlarged bilinearly). MEDIAPIPE: bilinear
    on MediaPipe's sampling grid; TENSORFLOW: bilinear, placed as ``tf.image.resize_with_pad`` (below).
    """

    AUTO = "auto"
    LINEAR = "linear"
    AREA = "area"
    # Bilinear as MediaPipe's ImageToTensorCalculator samples (image_to_tensor_converter_opencv.cc):
    # cv::warpPerspective maps the region's corners onto the tensor's corners, so tensor pixel i
    # samples the frame at i / scale (not (i + 0.5) / scale - 0.5 as cv::resize), and a letterbox
    # keeps its exact fractional padding. Faces move by up to a tenth of their size without it.
    MEDIAPIPE = "mediapipe"
    # Bilinear as TensorFlow's tf.image.resize_with_pad places it (image_ops_impl.py): the content
    # is floor(w / ratio) x floor(h / ratio), padded floor((size - w / ratio) / 2) before; a content
    # one row taller (edgekit's rounding) moves MoveNet's less certain keypoints by several percent.
    TENSORFLOW = "tensorflow"


class BoxMapping(Choice):
    """How letterboxed boxes go back to the image (metadata ``preprocessing.box_mapping``).

    EXACT: through the content's own scale (``round(w * gain) / w``) and offset, the inverse of
    what the image went through. ULTRALYTICS: ``scale_boxes`` of Ultralytics' ``predict``, one gain
    and the pad ``round((input - w * gain) / 2 - 0.1)``; differs from EXACT by under half an
    input pixel, and gives Ultralytics' numbers for its models.
    """

    EXACT = "exact"
    ULTRALYTICS = "ultralytics"


class Layout(Choice):
    """Where the channels sit in an image input: (1, H, W, 3) or (1, 3, H, W)."""

    NHWC = "NHWC"
    NCHW = "NCHW"
