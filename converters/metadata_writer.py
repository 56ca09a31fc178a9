"""Write edgekit's metadata JSON into a .tflite file's metadata table.

The document goes into a new buffer referenced by a ``metadata`` entry named ``edgekit``
(an existing ``edgekit`` entry is replaced, its buffer reused). Interpreters ignore
metadata names they do not know, so the file still loads everywhere; the device side
reads it back with :func:`edgekit.runtimes.read_metadata`.

Needs only ``flatbuffers`` and the TFLite schema module that ships with ai-edge-litert
(or TensorFlow): no TensorFlow import, so it works on any machine that has the runtime.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping

import numpy as np

from edgekit.errors import ConversionError
from edgekit.runtimes.metadata import METADATA_NAME, read_metadata
from edgekit.runtimes.tflite_file import FILE_IDENTIFIER, parse_tflite

__all__ = ["write_metadata", "write_metadata_file", "encode_metadata"]

# TFLite's converter aligns buffers to 16 bytes; weights read in place by the kernels
# (mmap'd models) must stay aligned after we repack the file.
_BUFFER_ALIGNMENT = 16
_FLATBUFFER_LIMIT = 2**31  # bytes a flatbuffer's 32-bit offsets can span


def _schema() -> ModuleType:
    """The generated TFLite schema module (object API), from ai-edge-litert or TensorFlow."""
    try:
        from ai_edge_litert import schema_py_generated as schema
    except ImportError:
        try:
            from tensorflow.lite.python import schema_py_generated as schema
        except ImportError:
            raise ConversionError(
                "writing metadata needs the TFLite schema module from ai-edge-litert or TensorFlow; "
                "run: pip install ai-edge-litert") from None
    return schema


def _flatbuffers() -> ModuleType:
    try:
        import flatbuffers
    except ImportError:
        raise ConversionError("writing metadata needs the flatbuffers package; run: pip install flatbuffers "
                              "(it comes with ai-edge-litert and TensorFlow)") from None
    return flatbuffers


def encode_metadata(doc: Mapping[str, Any]) -> bytes:
    """The JSON bytes stored in the file (compact, UTF-8, keys sorted for stable hashes).

    Raises:
        ConversionError: the document is not JSON-serialisable (NaN, numpy types, ...).
    """
    try:
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ConversionError(f"the edgekit metadata is not plain JSON ({exc}); convert numpy values "
                              "with float()/int() and replace NaN/inf with null") from None


def _aligned_buffer_type(schema: ModuleType) -> type:
    class AlignedBufferT(schema.BufferT):  # type: ignore[name-defined]
        """A BufferT whose data vector is packed 16-byte aligned (the generated Pack uses 1)."""

        def Pack(self, builder: Any) -> int:  # noqa: N802 - the generated API's name
            data_off = None
            if self.data is not None and len(self.data):
                payload = self.data if isinstance(self.data, bytes) else np.asarray(self.data, np.uint8).tobytes()
                builder.StartVector(1, len(payload), _BUFFER_ALIGNMENT)
                builder.head -= len(payload)
                builder.Bytes[builder.head:builder.head + len(payload)] = payload
                data_off = builder.EndVector()
            schema.BufferStart(builder)
            if data_off is not None:
                schema.BufferAddData(builder, data_off)
            schema.BufferAddOffset(builder, self.offset)
            schema.BufferAddSize(builder, self.size)
            return int(schema.BufferEnd(builder))

    return AlignedBufferT


def write_metadata(model: bytes, doc: Mapping[str, Any]) -> bytes:
    """Return `model` with `doc` stored as its ``edgekit`` metadata.

    Raises:
        ModelError: `model` is not a valid TFLite flatbuffer.
        ConversionError: the model keeps tensor data outside the flatbuffer and would pass 2 GB
            with it inside, or the document is not plain JSON.
    """
    parse_tflite(model, label="the converted model")  # refuse garbage before unpacking it
    payload = encode_metadata(doc)
    schema, flatbuffers = _schema(), _flatbuffers()
    obj = schema.ModelT.InitFromPackedBuf(bytearray(model), 0)
    buffers = list(obj.buffers or [])
    outside = sum(b.size for b in buffers if b.offset > 1)
    if outside and len(model) + len(payload) >= _FLATBUFFER_LIMIT:
        raise ConversionError(f"the model keeps {outside:,} bytes of tensor data after its flatbuffer and is "
                              f"{len(model) / 1e9:.1f} GB: inlined, it would pass the 2 GB a flatbuffer can "
                              "hold, so edgekit cannot add metadata to it")
    aligned = _aligned_buffer_type(schema)
    # Data kept after the flatbuffer (buffers by offset, as ai-edge-quantizer and MediaPipe's newer
    # files write them) is taken back inside: the repacked file is an ordinary one.
    obj.buffers = [aligned(data=np.frombuffer(model, np.uint8, b.size, b.offset) if b.offset > 1 else b.data)
                   for b in buffers]
    entries = list(obj.metadata or [])
    existing = [m for m in entries if _name(m.name) == METADATA_NAME]
    new_buffer = aligned(data=payload)
    if existing:
        obj.buffers[existing[0].buffer] = new_buffer
        entries = [m for m in entries if m is existing[0] or _name(m.name) != METADATA_NAME]
    else:
        obj.buffers.append(new_buffer)
        entries.append(schema.MetadataT(name=METADATA_NAME, buffer=len(obj.buffers) - 1))
    obj.metadata = entries
    builder = flatbuffers.Builder(len(model) + len(payload) + 4096)
    builder.Finish(obj.Pack(builder), file_identifier=FILE_IDENTIFIER)
    out = bytes(builder.Output()) + _appended_zip(model)  # the TFLite metadata's label files stay
    _verify(out, doc)
    return out


def _appended_zip(model: bytes) -> bytes:
    """The zip of associated files (labels) appended to a model with TFLite metadata, or b"": from its
    first entry to the end. Its offsets may count from the file's start; a zip reader finds entries
    moved with it by the central directory's own position, so it reads the same after a new flatbuffer."""
    if b"PK\x05\x06" not in model[-65557:]:
        return b""
    try:
        with zipfile.ZipFile(io.BytesIO(model)) as zf:
            start = min((info.header_offset for info in zf.infolist()), default=-1)
    except (zipfile.BadZipFile, OSError, ValueError):
        return b""
    return model[start:] if 0 < start < len(model) and model[start:start + 4] == b"PK\x03\x04" else b""


def _name(value: str | bytes | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value or ""


def _verify(out: bytes, doc: Mapping[str, Any]) -> None:
    """Read the document back the way the device will; a mismatch is our bug, said plainly."""
    parsed = parse_tflite(out, label="the model with metadata")
    back = read_metadata(out, parsed)
    if back != json.loads(encode_metadata(doc)):
        raise ConversionError("the edgekit metadata did not read back as written; this is a bug in edgekit")


def write_metadata_file(src: str | os.PathLike[str], doc: Mapping[str, Any],
                        dst: str | os.PathLike[str] | None = None) -> Path:
    """Add (or replace) the edgekit metadata of a .tflite file, writing `dst` (default: in place).

    The file is written to a temporary name and renamed, so a reader never sees half a model.

    Raises:
        ModelError: `src` is missing or not a TFLite model.
        ConversionError: as :func:`write_metadata`, or `dst` cannot be written.
    """
    from edgekit.runtimes.validate import read_model_bytes

    data = read_model_bytes(src)
    out = write_metadata(data, doc)
    target = Path(dst if dst is not None else src)
    write_bytes_atomic(target, out)
    return target


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder.

    Raises:
        ConversionError: the folder cannot be written.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConversionError(f"cannot write {str(path)!r}: {exc.strerror or exc}. "
                              "Check that the folder exists and is writable.") from None
