"""Ultralytics' own metadata in its .tflite exports, read as edgekit metadata.

Ultralytics' exporter appends a zip archive to the .tflite (interpreters ignore bytes past the
flatbuffer) holding ``metadata.json`` (or, through tflite-support, a Python dict literal): class
names, input size, task. For a detector that is everything the device needs to read it as
Ultralytics' ``predict`` does, so ``edgekit detect model.tflite`` runs a YOLOv8/11 export with no
flags: labels from ``names``, letterbox to ``imgsz`` (gray 114, bilinear, boxes back through
``scale_boxes``), pixels / 255, ``conf`` 0.25, ``iou`` 0.7, ``max_det`` 300 (Ultralytics'
defaults). Used only when the file carries no edgekit metadata. Never eval: JSON, or
:func:`ast.literal_eval` of a bounded text, and any failure reads as "no metadata".
"""

from __future__ import annotations

import json
from typing import Any, Mapping

__all__ = ["PREDICT_DEFAULTS", "read_ultralytics", "from_ultralytics", "ultralytics_names"]

MAX_MEMBER_BYTES = 256 * 1024  # Ultralytics' metadata is a few KB; more is not theirs
# Ultralytics' predict defaults (ultralytics/cfg/default.yaml): conf, iou, max_det.
PREDICT_DEFAULTS = {"score_threshold": 0.25, "iou_threshold": 0.7, "max_det": 300}


def read_ultralytics(data: bytes) -> dict[str, Any] | None:
    """The metadata dict Ultralytics appended to a .tflite, or None (no zip, not a dict, too large)."""
    if b"PK\x05\x06" not in data[-(65536 + 22):]:  # no zip end-of-central-directory record at the end
        return None
    import ast
    import io
    import zipfile  # only for a file that ends in a zip (a start-up cost for every other)

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            if not infos or infos[0].file_size > MAX_MEMBER_BYTES:
                return None
            with zf.open(infos[0]) as f:
                text = f.read(MAX_MEMBER_BYTES + 1).decode("utf-8")
            name = infos[0].filename
        if len(text) > MAX_MEMBER_BYTES:
            return None
        doc = json.loads(text) if name.endswith(".json") else ast.literal_eval(text)
    except (zipfile.BadZipFile, OSError, EOFError, UnicodeDecodeError, ValueError, SyntaxError, TypeError,
            RecursionError, MemoryError, NotImplementedError, RuntimeError, KeyError):
        return None
    return doc if isinstance(doc, dict) and "names" in doc else None


def ultralytics_names(doc: Mapping[str, Any]) -> list[str] | None:
    """The class names of Ultralytics' metadata (``names``, by class id; a gap is an empty name), or None."""
    return _names(doc.get("names"))


def _names(raw: Any) -> list[str] | None:
    if isinstance(raw, dict):
        try:
            by_id = {int(k): str(v) for k, v in raw.items()}
        except (TypeError, ValueError):
            return None
        if not by_id or min(by_id) < 0 or max(by_id) >= 100_000:
            return None
        return [by_id.get(i, "") for i in range(max(by_id) + 1)]
    if isinstance(raw, list):
        return [str(v) for v in raw]
    return None


def _imgsz(raw: Any) -> list[int] | None:
    size = [raw, raw] if isinstance(raw, int) else raw
    if isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(v, int) and 0 < v < 100_000 for v in size):
        return [int(size[1]), int(size[0])]  # Ultralytics' imgsz is (h, w); edgekit's input_size is [w, h]
    return None


def from_ultralytics(data: bytes) -> dict[str, Any] | None:
    """Edgekit metadata for a .tflite that carries Ultralytics' metadata (None: it carries none).

    A detector (``task: detect``, without NMS inside the model) gets the full reading of
    Ultralytics' ``predict``; other tasks get their class names only.
    """
    meta = read_ultralytics(data)
    if meta is None:
        return None
    doc: dict[str, Any] = {"source": {"name": "Ultralytics metadata in the file"}}
    names = _names(meta.get("names"))
    if names:
        doc["labels"] = names
    args: dict[str, Any] = meta["args"] if isinstance(meta.get("args"), dict) else {}
    if meta.get("task") != "detect" or args.get("nms") or meta.get("end2end"):
        return doc
    pre: dict[str, Any] = {"resize": "letterbox", "interpolation": "linear", "box_mapping": "ultralytics",
                           "mean": [0.0, 0.0, 0.0], "std": [255.0, 255.0, 255.0], "color": "RGB"}
    if (size := _imgsz(meta.get("imgsz"))) is not None:
        pre["input_size"] = size
    return {**doc, "task": "detect", "output_format": "yolo", "preprocessing": pre,
            # AutoBackend scales every TFLite export's xywh by the input size: they are fractions
            "detection": {"box_format": "cxcywh", "normalized": True, **PREDICT_DEFAULTS}}
