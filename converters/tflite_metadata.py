"""The TFLite Support metadata that MediaPipe's and Model Maker's .tflite files carry: input
normalization and class labels, read without tflite-support.

The ``TFLITE_METADATA`` entry is a flatbuffer of ``metadata_schema.fbs`` (file identifier
"M001"); only the fields edgekit needs are read, by their slots in that schema:
ModelMetadata.subgraph_metadata (3) -> SubGraphMetadata.input/output_tensor_metadata (2, 3) ->
TensorMetadata.process_units (4) -> ProcessUnit.options (union: type 0, value 1;
NormalizationOptions is 1) -> NormalizationOptions.mean/std (0, 1); TensorMetadata.associated_files
(6) -> AssociatedFile.name (0), type (2; TENSOR_AXIS_LABELS is 2). The label files themselves are
in the zip appended to the model.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from edgekit.runtimes.tflite_file import TFLiteFile

__all__ = ["SupportMetadata", "read_support_metadata"]

NAME = "TFLITE_METADATA"
_NORMALIZATION = 1  # ProcessUnitOptions union member
_AXIS_LABELS = 2  # AssociatedFileType.TENSOR_AXIS_LABELS


@dataclass(frozen=True)
class SupportMetadata:
    """What the file's TFLite Support metadata states (None where it states nothing)."""

    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None
    labels: tuple[str, ...] | None


class _Table:
    """A flatbuffer table read by field slot (vtable offset 4 + 2 * slot)."""

    def __init__(self, buf: bytes, pos: int) -> None:
        from flatbuffers.table import Table

        self.t = Table(bytearray(buf), pos)

    def _off(self, slot: int) -> int:
        return int(self.t.Offset(4 + 2 * slot))

    def table(self, slot: int) -> _Table | None:
        o = self._off(slot)
        return _Table(self.t.Bytes, self.t.Indirect(o + self.t.Pos)) if o else None

    def tables(self, slot: int) -> list[_Table]:
        o = self._off(slot)
        if not o:
            return []
        start = self.t.Vector(o)
        return [_Table(self.t.Bytes, self.t.Indirect(start + 4 * i)) for i in range(self.t.VectorLen(o))]

    def floats(self, slot: int) -> tuple[float, ...]:
        from flatbuffers.number_types import Float32Flags

        o = self._off(slot)
        return tuple(float(v) for v in self.t.GetVectorAsNumpy(Float32Flags, o)) if o else ()

    def string(self, slot: int) -> str:
        o = self._off(slot)
        return self.t.String(o + self.t.Pos).decode("utf-8", "replace") if o else ""

    def byte(self, slot: int) -> int:
        from flatbuffers.number_types import Uint8Flags

        o = self._off(slot)
        return int(self.t.Get(Uint8Flags, o + self.t.Pos)) if o else 0


def read_support_metadata(data: bytes, parsed: TFLiteFile) -> SupportMetadata | None:
    """The input normalization and output labels in the file's TFLite Support metadata, if it has any.

    A damaged metadata entry reads as none (the model itself was already checked).
    """
    index = parsed.metadata.get(NAME)
    if index is None or not 0 <= index < len(parsed.buffers) or not parsed.buffers[index].size:
        return None
    buf = parsed.buffers[index]
    raw = data[buf.start:buf.start + buf.size]
    try:
        return _read(raw, data)
    except Exception:  # noqa: BLE001 - any malformed table: the metadata is only a hint
        return None


def _read(raw: bytes, model: bytes) -> SupportMetadata | None:
    import flatbuffers

    root = _Table(raw, flatbuffers.encode.Get(flatbuffers.packer.uoffset, bytearray(raw), 0))
    subgraphs = root.tables(3)
    if not subgraphs:
        return None
    inputs, outputs = subgraphs[0].tables(2), subgraphs[0].tables(3)
    mean = std = None
    for unit in inputs[0].tables(4) if inputs else []:
        options = unit.table(1)
        if unit.byte(0) == _NORMALIZATION and options is not None:
            mean, std = options.floats(0) or None, options.floats(1) or None
            break
    labels = None
    for tensor in outputs:
        name = next((f.string(0) for f in tensor.tables(6) if f.byte(2) == _AXIS_LABELS), "")
        if name:
            labels = _zip_lines(model, name)
            break
    if mean is None and labels is None:
        return None
    return SupportMetadata(mean, std, labels)


def _zip_lines(model: bytes, name: str) -> tuple[str, ...] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(model)) as zf:
            text = zf.read(name).decode("utf-8", "replace")
    except (zipfile.BadZipFile, KeyError, OSError):
        return None
    lines = tuple(line.strip() for line in text.splitlines() if line.strip())
    return lines or None
