"""The model contract: what a .tflite file's outputs and inputs mean, the same on both sides.

numpy only (no OpenCV, no interpreter, no TensorFlow): the device's Detector/Classifier and the
converter's accuracy gate import the same enums, the same format recognizer and the same
decoders from here, so the gate measures exactly what the device will do::

    from edgekit.contract import make_decoder, image_input, Normalization, Transform

    decoder = make_decoder(model.outputs, model.metadata, threshold=0.25)
    detections = decoder(outputs, transform)       # boxes in the source image's pixels

Modules: :mod:`~edgekit.contract.enums` (Task, OutputFormat, BoxFormat, YoloLayout, ResizeMode,
ColorOrder, Layout), :mod:`~edgekit.contract.spec` (Normalization, Transform, ImageInput, the
letterbox geometry), :mod:`~edgekit.contract.recognize` (format from metadata, shapes, ops),
:mod:`~edgekit.contract.readings` (the evidence behind it: shapes, dtypes, input size, labels,
values; refusals where two readings fit), :mod:`~edgekit.contract.decode` (SSD, YOLO + class-wise
NMS, classification top-k), :mod:`~edgekit.contract.segmentation` (class maps and per-class scores),
:mod:`~edgekit.contract.keypoints` (MoveNet), :mod:`~edgekit.contract.anchors` (MediaPipe SSD
anchors, box/keypoint decoding, weighted NMS), :mod:`~edgekit.contract.metrics` (mAP@0.5), :mod:`~edgekit.contract.ultralytics` (Ultralytics' own
metadata in its .tflite exports, read as the edgekit metadata below when a file has none).

The edgekit metadata (JSON in the flatbuffer's metadata table, written by ``edgekit convert``;
every key optional, absent keys fall back to recognition from shapes):

``task``              "classify" | "detect" | "segment" | "pose"
``labels``            class names by class id
``output_format``     "classes" | "ssd" | "yolo" | "segmentation" | "keypoints" | "anchors"
``anchors``           {"ssd": SsdAnchorOptions, "decode": AnchorDecodeOptions} of a raw
                      anchor model (MediaPipe's fields; ``edgekit meta --anchors`` writes them)
``segmentation``      ``layout`` "class_map" | "scores" | "foreground" (when the shape is not enough)
``preprocessing``     ``input_size`` [w, h]; ``resize`` "stretch" | "letterbox" (gray 114,
                      centered, as Ultralytics' LetterBox(auto=False)); ``color`` "RGB" | "BGR";
                      ``mean``/``std`` (real = (pixel - mean) / std, per channel);
                      ``layout`` "NHWC" | "NCHW" (only needed when the shape reads both ways);
                      ``interpolation`` "auto" | "linear" | "area" (how frames are shrunk;
                      Ultralytics' predict is "linear"); ``box_mapping`` "exact" | "ultralytics"
                      (letterboxed boxes back through the content's scale, or through
                      Ultralytics' scale_boxes gain and rounded pad)
``detection``         ``box_format`` "cxcywh" | "xyxy" | "yxyx"; ``normalized`` true when boxes
                      are fractions of the input (else input pixels; absent: judged by range);
                      ``iou_threshold`` (class-wise NMS); ``score_threshold`` (default
                      confidence); ``max_det`` (most detections per image);
                      ``outputs`` ["boxes", "scores"] in output order, for a YOLO head split
                      into boxes [1, 4, N] and class scores [1, C, N] (each with its own
                      quantization scale)
``quantization``, ``source``, ``accuracy``, ``edgetpu``, ``edgekit_version``   what the converter
                      records (mode and engine, the source's name and hash, the gate's figures,
                      edgetpu_compiler's report); read and written by
                      :class:`~edgekit.contract.metadata.ModelMetadata` (its ``parse`` and
                      ``to_document``), the document's one parser and one writer
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgekit._lazy import exported_names, load_export

# Names load with their module when first used (PEP 562): a classifier's start-up reads the
# enums, the spec and the decoders, never the anchors, keypoints or segmentation readers it has
# no use for (edgekit/__init__.py does the same for the package's face).
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("DEFAULT_IOU", "Decoder", "batched_nms", "decode_classes", "decode_ssd", "decode_yolo",
                     "make_decoder", "nms", "to_xyxy"), "edgekit.contract.decode"),
    **dict.fromkeys(("BoxFormat", "BoxMapping", "Choice", "ColorOrder", "Interpolation", "Layout", "OutputFormat",
                     "ResizeMode", "Task", "YoloLayout"), "edgekit.contract.enums"),
    **dict.fromkeys(("box_iou", "map50"), "edgekit.contract.metrics"),
    **dict.fromkeys(("AmbiguousOutputsError", "Reading", "detect_format", "read_outputs", "recognize_format"),
                    "edgekit.contract.readings"),
    **dict.fromkeys(("SSD_OP", "YoloOutputs", "ssd_order", "task_of", "yolo_layout", "yolo_outputs"),
                    "edgekit.contract.recognize"),
    **dict.fromkeys(("LETTERBOX_PAD", "ImageInput", "Normalization", "ResizePlan", "TensorLike", "Transform",
                     "box_mapping", "image_input", "interpolation", "plan_resize", "resize_mode"),
                    "edgekit.contract.spec"),
}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on demand
    from edgekit.contract.decode import (
        DEFAULT_IOU,
        Decoder,
        batched_nms,
        decode_classes,
        decode_ssd,
        decode_yolo,
        make_decoder,
        nms,
        to_xyxy,
    )
    from edgekit.contract.enums import (
        BoxFormat,
        BoxMapping,
        Choice,
        ColorOrder,
        Interpolation,
        Layout,
        OutputFormat,
        ResizeMode,
        Task,
        YoloLayout,
    )
    from edgekit.contract.metrics import box_iou, map50
    from edgekit.contract.readings import AmbiguousOutputsError, Reading, detect_format, read_outputs, recognize_format
    from edgekit.contract.recognize import (
        SSD_OP,
        YoloOutputs,
        ssd_order,
        task_of,
        yolo_layout,
        yolo_outputs,
    )
    from edgekit.contract.spec import (
        LETTERBOX_PAD,
        ImageInput,
        Normalization,
        ResizePlan,
        TensorLike,
        Transform,
        box_mapping,
        image_input,
        interpolation,
        plan_resize,
        resize_mode,
    )


def __getattr__(name: str) -> Any:
    return load_export(__name__, _EXPORTS, globals(), name)


def __dir__() -> list[str]:
    return exported_names(globals(), __all__)


__all__ = [
    "DEFAULT_IOU", "LETTERBOX_PAD", "SSD_OP", "AmbiguousOutputsError", "Reading", "read_outputs",
    "BoxFormat", "BoxMapping", "Choice", "ColorOrder", "Interpolation", "Layout", "OutputFormat", "ResizeMode", "Task",
    "YoloLayout", "Decoder", "ImageInput", "Normalization", "ResizePlan", "TensorLike", "Transform", "YoloOutputs",
    "batched_nms", "box_iou", "box_mapping", "decode_classes", "decode_ssd", "decode_yolo", "detect_format",
    "image_input", "interpolation", "make_decoder", "map50", "nms", "plan_resize", "recognize_format", "resize_mode",
    "ssd_order", "task_of",
    "to_xyxy", "yolo_layout", "yolo_outputs",
]
