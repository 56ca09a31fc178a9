"""Moved to :mod:`edgekit.contract` (the decoders both sides share); this name stays for old imports."""

from __future__ import annotations

from edgekit.contract.decode import (
    DEFAULT_IOU,
    MAX_NMS_CANDIDATES,
    Decoder,
    Result,
    batched_nms,
    decode_classes,
    decode_ssd,
    decode_yolo,
    make_decoder,
    nms,
    to_xyxy,
)
from edgekit.contract.enums import BoxFormat, OutputFormat, YoloLayout
from edgekit.contract.recognize import detect_format, yolo_layout

__all__ = ["OutputFormat", "BoxFormat", "YoloLayout", "Decoder", "Result", "make_decoder", "nms", "batched_nms",
           "to_xyxy", "decode_ssd", "decode_yolo", "decode_classes", "detect_format", "yolo_layout", "DEFAULT_IOU",
           "MAX_NMS_CANDIDATES"]
