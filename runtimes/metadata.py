"""edgekit metadata inside a .tflite file.

The converter stores a JSON document in the flatbuffer's ``metadata`` table under the
name ``edgekit`` (labels, preprocessing, task, quantization mode, source hash, accuracy
summary). Every TFLite interpreter ignores metadata it does not know, so the file still
loads anywhere. Reading is plain JSON parsing: no eval, no pickle.
"""

from __future__ import annotations

import json
from typing import Any

from edgekit.errors import ModelError
from edgekit.runtimes.tflite_file import TFLiteFile

__all__ = ["METADATA_NAME", "SUPPORT_METADATA_NAME", "MAX_METADATA_BYTES", "read_metadata", "other_metadata_names"]

METADATA_NAME = "edgekit"
# TFLite Support's own entry (MediaPipe, Model Maker), read by edgekit.runtimes.support_metadata
SUPPORT_METADATA_NAME = "TFLITE_METADATA"
MAX_METADATA_BYTES = 16 * 1024**2


def read_metadata(data: bytes, parsed: TFLiteFile) -> dict[str, Any] | None:
    """The edgekit metadata of a parsed model, or None when it carries none.

    A file without edgekit's entry but with the metadata Ultralytics' exporter appends (class
    names, input size, task) gets it translated (:mod:`edgekit.contract.ultralytics`).

    Raises:
        ModelError: the metadata entry exists but is not a JSON object.
    """
    index = parsed.metadata.get(METADATA_NAME)
    if index is None:
        from edgekit.contract.ultralytics import from_ultralytics

        return from_ultralytics(data)
    buf = parsed.buffers[index]
    if buf.size > MAX_METADATA_BYTES:
        raise ModelError(f"the model's edgekit metadata is {buf.size} bytes, more than the "
                         f"{MAX_METADATA_BYTES} allowed; re-export the model.")
    raw = data[buf.start:buf.start + buf.size]
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"the model's edgekit metadata is not valid JSON ({exc}); re-export the model "
                         "with `edgekit convert`.") from None
    if not isinstance(doc, dict):
        raise ModelError("the model's edgekit metadata is not a JSON object; re-export the model.")
    return doc


def other_metadata_names(parsed: TFLiteFile) -> list[str]:
    """Names of the other metadata entries (e.g. TFLite's own 'min_runtime_version', 'TFLITE_METADATA')."""
    return sorted(n for n in parsed.metadata if n != METADATA_NAME)
