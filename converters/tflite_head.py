"""A float .tflite YOLO head whose one output concatenates boxes and scores, split into two outputs.

Ultralytics' TFLite export ends in ``CONCATENATION([boxes [1, 4, N], scores [1, C, N]], axis 1)``:
boxes in input pixels (0..640) and class scores (0..1) in one tensor, so int8 gives both one
scale and the scores keep a handful of levels (detections collapse). Dropping that last op and
making its two inputs the model's outputs gives each its own scale; the original file stays the
float reference, and the device reads the two outputs by the ``detection.outputs`` metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgekit.converters.yolo_head import HeadSplit
from edgekit.runtimes.tflite_file import TFLiteFile

__all__ = ["split_tflite_head", "TFLiteReference"]


def _schema() -> tuple[Any, Any]:
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    return flatbuffers, schema


def split_tflite_head(data: bytes, parsed: TFLiteFile) -> tuple[bytes, HeadSplit] | None:
    """The model with its final boxes+scores concatenation removed, or None when it has none.

    The head qualifies when the only output, [1, 4+C, N] or [1, N, 4+C] with N > 4+C, is written by
    a CONCATENATION of exactly two tensors along the 4+C axis, of 4 and C entries.
    """
    sg = parsed.subgraphs[0]
    if len(sg.outputs) != 1:
        return None
    out = sg.tensors[sg.outputs[0]]
    shape = tuple(out.shape)
    if len(shape) != 3 or shape[0] != 1:
        return None
    axis = 1 if shape[1] < shape[2] else 2
    if shape[axis] < 5:
        return None
    producer = next((k for k, op in enumerate(sg.operators) if sg.outputs[0] in op.outputs), None)
    if producer is None or sg.operators[producer].opcode != "CONCATENATION":
        return None
    ins = [i for i in sg.operators[producer].inputs if i >= 0]
    sizes = [sg.tensors[i].shape[axis] if len(sg.tensors[i].shape) == 3 else -1 for i in ins]
    if len(ins) != 2 or sizes[0] != 4 or sizes[1] != shape[axis] - 4:
        return None
    flatbuffers, schema = _schema()
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    msg = model.subgraphs[0]
    concat_axis = int(getattr(msg.operators[producer].builtinOptions, "axis", axis))
    if concat_axis % 3 != axis:
        return None
    del msg.operators[producer]
    dropped = sg.outputs[0]  # the concatenated tensor: nothing writes it now, so it goes too

    def renumber(i: int) -> int:
        return i - 1 if i > dropped else i

    del msg.tensors[dropped]
    for op in msg.operators:
        op.inputs = [renumber(int(i)) if i >= 0 else int(i) for i in op.inputs]
        op.outputs = [renumber(int(i)) for i in op.outputs]
    msg.inputs = [renumber(int(i)) for i in msg.inputs]
    msg.outputs = [renumber(int(i)) for i in ins]
    for sig in model.signatureDefs or []:
        if sig.subgraphIndex == 0:
            for entry in sig.inputs or []:
                entry.tensorIndex = renumber(int(entry.tensorIndex))
            sig.outputs = []
            for name, index in zip(("boxes", "scores"), msg.outputs):
                entry = schema.TensorMapT()
                entry.name, entry.tensorIndex = name, int(index)
                sig.outputs.append(entry)
    builder = flatbuffers.Builder(len(data) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    where = f"CONCATENATION {out.name!r}"
    return bytes(builder.Output()), HeadSplit(num_classes=shape[axis] - 4, axis=axis, where=where)


class TFLiteReference:
    """The float .tflite as given, run by the device's interpreter: the reference when the converted
    float model differs from it (a split head)."""

    def __init__(self, path: Path, name: str) -> None:
        self.path, self.name = path, name
        self._model: Any = None

    def run(self, x: np.ndarray) -> list[np.ndarray]:
        """The outputs (batch axis kept) for one sample of model inputs (batch 1).

        Raises:
            ModelError: the interpreter cannot load or run the file.
        """
        if self._model is None:
            from edgekit.runtimes import load_model

            self._model = load_model(self.path)
        return [np.asarray(o) for o in self._model.run(x)]

    def close(self) -> None:
        """Release the interpreter. Safe to call twice."""
        if self._model is not None:
            self._model.close()
            self._model = None
