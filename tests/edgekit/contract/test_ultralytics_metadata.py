"""Ultralytics' metadata zipped after a .tflite's flatbuffer, read as edgekit metadata; anything
odd about it reads as no metadata, never as an error or an eval."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from edgekit.contract.ultralytics import from_ultralytics, read_ultralytics

MODEL = b"\x1c\x00\x00\x00TFL3" + bytes(200)  # stands in for the flatbuffer: only the tail is read here
META = {"task": "detect", "imgsz": [320, 480], "names": {"0": "person", "1": "bicycle"}, "stride": 32,
        "args": {"nms": False}}


def _zip(name: str, payload: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(name, payload)
    return buf.getvalue()


def test_a_detector_gets_what_predict_uses() -> None:
    doc = from_ultralytics(MODEL + _zip("metadata.json", json.dumps(META).encode()))
    assert doc is not None
    assert doc["labels"] == ["person", "bicycle"] and doc["task"] == "detect" and doc["output_format"] == "yolo"
    assert doc["preprocessing"] == {"input_size": [480, 320], "resize": "letterbox", "interpolation": "linear",
                                    "box_mapping": "ultralytics", "mean": [0.0] * 3, "std": [255.0] * 3,
                                    "color": "RGB"}
    assert doc["detection"] == {"box_format": "cxcywh", "normalized": True, "score_threshold": 0.25,
                                "iou_threshold": 0.7, "max_det": 300}


def test_tflite_support_writes_a_python_literal() -> None:
    text = repr({**META, "names": {0: "person", 1: "bicycle"}, "imgsz": 640}).encode()
    doc = from_ultralytics(MODEL + _zip("metadata.txt", text))
    assert doc is not None and doc["labels"] == ["person", "bicycle"]
    assert doc["preprocessing"]["input_size"] == [640, 640]


@pytest.mark.parametrize("meta, expected", [
    ({**META, "task": "segment"}, {"labels": ["person", "bicycle"]}),  # names only: other tasks read otherwise
    ({**META, "args": {"nms": True}}, {"labels": ["person", "bicycle"]}),  # NMS inside: not a raw head
    ({**META, "names": ["x", "y", "z"]}, {"labels": ["x", "y", "z"]}),
])
def test_what_is_not_a_raw_yolo_detector_gets_its_names_only(meta: dict, expected: dict) -> None:
    doc = from_ultralytics(MODEL + _zip("metadata.json", json.dumps(meta).encode()))
    assert doc is not None and {k: doc[k] for k in expected} == expected
    assert ("output_format" in doc) is (meta.get("names") == ["x", "y", "z"])


@pytest.mark.parametrize("data", [
    MODEL,  # no zip
    MODEL + b"PK\x05\x06" + bytes(18),  # an end record and nothing behind it
    MODEL + _zip("metadata.json", b"{not json"),
    MODEL + _zip("metadata.json", b"[1, 2, 3]"),  # not a dict
    MODEL + _zip("metadata.json", json.dumps({"task": "detect"}).encode()),  # no names: not Ultralytics'
    MODEL + _zip("metadata.txt", b"__import__('os').system('echo no')"),  # never evaluated
    MODEL + _zip("metadata.txt", b"[" * 100_000),  # nesting that would exhaust the parser
    MODEL + _zip("metadata.json", b" " * (300 * 1024)),  # larger than any real metadata
])
def test_anything_else_is_no_metadata(data: bytes) -> None:
    assert read_ultralytics(data) is None and from_ultralytics(data) is None
