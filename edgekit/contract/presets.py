"""Presets of model families: each one the preprocessing its reference implementation feeds the
model, and the decoding options it reads the outputs with, recognised by the file's signature
(input size and type, output shapes) when neither edgekit metadata nor the file's own TFLite
metadata says.

Every preset names the reference file its values were read from. MediaPipe's come from its graphs
at google/mediapipe v0.10.14 (commit 9d8807788567, ``mediapipe/modules/*/*.pbtxt``): their
``ImageToTensorCalculator`` options give the resize (``keep_aspect_ratio``: letterbox, centred,
``BORDER_ZERO``: black), the value range (``output_tensor_float_range``), and the OpenCV converter
behind it warps bilinearly (``cv::INTER_LINEAR``) whatever the shrink, on its own sampling grid
(:attr:`Interpolation.MEDIAPIPE`)::

    preset = match_preset(model.inputs, model.outputs)   # "mediapipe-face-short-range", or None
    PRESETS["movenet-single"].reference                   # where its numbers come from
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import numpy as np

from edgekit.contract.enums import Interpolation, OutputFormat, ResizeMode

__all__ = ["Preset", "PRESETS", "match_preset"]

_MP = "google/mediapipe v0.10.14 "
_IMAGE_TO_TENSOR = "mediapipe/calculators/tensor/image_to_tensor_converter_opencv.cc (cv::warpPerspective, " \
                   "INTER_LINEAR, BORDER_CONSTANT 0)"


class Preset(NamedTuple):
    """A family's reference preprocessing and decoding, and the signature that recognises it.

    ``mean``/``std`` give ``real = (pixel - mean) / std`` for float inputs (None: quantized inputs
    take the pixels as they are, which is what these files' own quantization encodes).
    ``inputs``: the (height, width) sizes the family's files take; ``outputs``: their shapes in
    output order, ``-1`` for any size.
    """

    name: str
    family: str
    reference: str
    resize: ResizeMode
    pad_value: int | None = 0  # None: a family that stretches says nothing of padding
    mean: float | None = None
    std: float | None = None
    interpolation: Interpolation | None = Interpolation.LINEAR  # None: the references disagree, AUTO stands
    inputs: tuple[tuple[int, int], ...] = ()
    outputs: tuple[tuple[int, ...], ...] = ()
    output_format: OutputFormat | None = None
    anchors: str | None = None  # the anchor preset (edgekit.contract.anchors.ANCHOR_PRESETS)
    ops: tuple[str, ...] = ()  # an op the graph must hold (instead of output shapes)
    float_input: bool | None = None  # True/False: only float / only integer inputs match

    def matches(self, inputs: Sequence[Any], outputs: Sequence[Any], ops: Sequence[str] = ()) -> bool:
        """Whether a model of these tensors (and ops, when known) has this family's signature."""
        if len(inputs) != 1:
            return False
        s = tuple(int(d) for d in inputs[0].shape)
        if len(s) != 4 or s[0] != 1 or s[3] != 3 or (self.inputs and (s[1], s[2]) not in self.inputs):
            return False
        floating = bool(np.issubdtype(np.dtype(getattr(inputs[0], "dtype", np.float32)), np.floating))
        if self.float_input is not None and floating != self.float_input:
            return False
        if self.ops:
            return all(op in ops for op in self.ops)
        shapes = [tuple(int(d) for d in o.shape) for o in outputs]
        return len(shapes) == len(self.outputs) and all(
            len(a) == len(b) and all(want in (-1, got) for got, want in zip(a, b)) for a, b in zip(shapes, self.outputs))

    def to_metadata(self) -> dict[str, Any]:
        """The edgekit metadata that writes this preset into a file (``edgekit meta --preset``)."""
        pre: dict[str, Any] = {"resize": self.resize.value, "preset": self.name}
        if self.interpolation is not None:
            pre["interpolation"] = self.interpolation.value
        if self.pad_value is not None:
            pre["pad_value"] = self.pad_value
        if self.mean is not None:
            pre["mean"], pre["std"] = [self.mean] * 3, [self.std] * 3
        doc: dict[str, Any] = {"preprocessing": pre}
        if self.output_format is not None:
            doc["output_format"] = self.output_format.value
        if self.anchors:
            from edgekit.contract.anchors import ANCHOR_PRESETS

            doc["anchors"] = ANCHOR_PRESETS[self.anchors].to_metadata()
            doc["task"] = "detect"
        return doc


def _mediapipe(name: str, graph: str, size: tuple[int, int], outputs: tuple[tuple[int, ...], ...], *,
               resize: ResizeMode = ResizeMode.LETTERBOX, unit: bool, anchors: str | None = None,
               fmt: OutputFormat | None = None, more: tuple[tuple[int, int], ...] = ()) -> Preset:
    # output_tensor_float_range [0, 1] is (pixel - 0) / 255; [-1, 1] is (pixel - 127.5) / 127.5.
    return Preset(name, "MediaPipe", _MP + graph + "; " + _IMAGE_TO_TENSOR, resize, 0,
                  0.0 if unit else 127.5, 255.0 if unit else 127.5, Interpolation.MEDIAPIPE, (size, *more), outputs,
                  fmt or (OutputFormat.ANCHORS if anchors else None), anchors, float_input=True)


_MOVENET = ("tensorflow/hub MoveNet tutorial (examples/tutorials/pose/movenet.ipynb): "
            "tf.image.resize_with_pad (bilinear, pads 0, content centred), pixels 0..255 as they are; "
            "Coral: google-coral/project-posenet movenet examples")

PRESETS: dict[str, Preset] = {p.name: p for p in (
    _mediapipe("mediapipe-face-short-range", "mediapipe/modules/face_detection/face_detection.pbtxt + "
               "face_detection_short_range.pbtxt (128x128, [-1, 1], keep_aspect_ratio, BORDER_ZERO)",
               (128, 128), ((1, 896, 16), (1, 896, 1)), unit=False, anchors="face-short-range"),
    _mediapipe("mediapipe-face-full-range", "mediapipe/modules/face_detection/face_detection.pbtxt + "
               "face_detection_full_range.pbtxt (192x192, [-1, 1], keep_aspect_ratio, BORDER_ZERO)",
               (192, 192), ((1, 2304, 16), (1, 2304, 1)), unit=False, anchors="face-full-range"),
    _mediapipe("mediapipe-palm", "mediapipe/modules/palm_detection/palm_detection_cpu.pbtxt (192x192, [0, 1], "
               "keep_aspect_ratio, BORDER_ZERO; lite and full)", (192, 192), ((1, 2016, 18), (1, 2016, 1)),
               unit=True, anchors="palm"),
    _mediapipe("mediapipe-pose-detector", "mediapipe/modules/pose_detection/pose_detection_cpu.pbtxt (224x224, "
               "[-1, 1], keep_aspect_ratio, BORDER_ZERO)", (224, 224), ((1, 2254, 12), (1, 2254, 1)), unit=False,
               anchors="pose-detector"),
    _mediapipe("mediapipe-selfie-segmentation", "mediapipe/modules/selfie_segmentation/selfie_segmentation_cpu"
               ".pbtxt (256x256 or 144x256 landscape, [0, 1], keep_aspect_ratio: false)", (256, 256),
               ((1, -1, -1, 1),), resize=ResizeMode.STRETCH, unit=True, fmt=OutputFormat.SEGMENTATION,
               more=((144, 256),)),
    _mediapipe("mediapipe-hand-landmark", "mediapipe/modules/hand_landmark/hand_landmark_cpu.pbtxt (224x224, "
               "[0, 1], keep_aspect_ratio, on the palm's rotated crop; lite and full)", (224, 224),
               ((1, 63), (1, 1), (1, 1), (1, 63)), unit=True, fmt=OutputFormat.KEYPOINTS),
    Preset("movenet-single", "MoveNet", _MOVENET, ResizeMode.LETTERBOX, 0, 0.0, 1.0, Interpolation.TENSORFLOW,
           ((192, 192), (256, 256)), ((1, 1, 17, 3),), OutputFormat.KEYPOINTS),
    Preset("movenet-multi", "MoveNet", _MOVENET, ResizeMode.LETTERBOX, 0, 0.0, 1.0, Interpolation.TENSORFLOW,
           (), ((1, 6, 56),), OutputFormat.KEYPOINTS),
    Preset("deeplab", "DeepLab (Coral)", "google-coral/pycoral examples/semantic_segmentation.py: "
           "img.resize((width, height), Image.LANCZOS) (a stretch, averaged when shrinking), uint8 pixels as "
           "they are; argmax class map", ResizeMode.STRETCH, None, None, None, Interpolation.AREA,
           ((513, 513),), ((1, 513, 513),), OutputFormat.SEGMENTATION),
    Preset("efficientdet-lite", "EfficientDet-Lite (Model Maker)", "tensorflow/examples lite/examples/"
           "object_detection (TFLite Task Library ObjectDetector): stretch to the input, uint8 pixels as they "
           "are (the file's metadata: mean 127, std 128 for float)", ResizeMode.STRETCH, None, None, None,
           Interpolation.LINEAR, ((320, 320), (384, 384), (448, 448), (512, 512), (640, 640)),
           output_format=OutputFormat.SSD, ops=("TFLite_Detection_PostProcess",), float_input=False),
    Preset("ssd", "SSD (TF Object Detection API / Coral)", "tensorflow/models research/object_detection "
           "(fixed_shape_resizer: a stretch to the input), uint8 pixels as they are, [-1, 1] for float "
           "inputs; its references resample differently (TF bilinear, Coral's PIL Lanczos): edgekit's AUTO stands",
           ResizeMode.STRETCH, None, None, None, None,
           output_format=OutputFormat.SSD, ops=("TFLite_Detection_PostProcess",)),
)}
# Ultralytics' exports carry their own metadata (names, imgsz, task), translated to edgekit's by
# edgekit.contract.ultralytics: letterbox, gray 114, bilinear, as ultralytics/data/augment.py's
# LetterBox and ultralytics/engine/predictor.py's preprocess feed them. No signature is needed.


def match_preset(inputs: Sequence[Any], outputs: Sequence[Any], ops: Sequence[str] = ()) -> Preset | None:
    """The first preset whose signature the model has, or None."""
    return next((p for p in PRESETS.values() if p.matches(inputs, outputs, ops)), None)
