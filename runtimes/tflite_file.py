"""A small, bounds-checked reader of the TFLite flatbuffer.

It reads what edgekit needs before an interpreter sees the bytes (tensors, operators,
buffers, metadata) and refuses anything that points outside the file. It never
allocates by a count read from the file before checking that count against the file's
size, so a malformed file costs a :class:`~edgekit.errors.ModelError`, not memory or a
crash. Pure Python and numpy-free, so it runs anywhere the device side runs. The checked
primitive reads live in :mod:`edgekit.runtimes.flatbuffer`; this module knows the TFLite schema.
"""

from __future__ import annotations

from typing import Any

from edgekit.errors import ModelError
from edgekit.runtimes._opnames import BUILTIN_OPS
from edgekit.runtimes.flatbuffer import FlatReader
from edgekit.runtimes.flexbuffer import FlexBufferError, read_flat_map
from edgekit.runtimes.graph_check import FLEXBUFFER_CUSTOM_OPS, OPTION_FIELDS, check_graph
from edgekit.runtimes.tflite_defs import (
    FILE_IDENTIFIER,
    TENSOR_ITEMSIZE,
    TENSOR_TYPES,
    BufferDef,
    OperatorDef,
    SubgraphDef,
    TensorDef,
    TFLiteFile,
)

__all__ = [
    "FILE_IDENTIFIER",
    "TENSOR_TYPES",
    "TENSOR_ITEMSIZE",
    "TensorDef",
    "OperatorDef",
    "SubgraphDef",
    "BufferDef",
    "TFLiteFile",
    "parse_tflite",
]

_MAX_RANK = 16


def _describe_foreign(head: bytes) -> str:
    magic = {
        b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image", b"BM": "a BMP image",
        b"PK\x03\x04": "a zip archive (a Keras .keras file or a zipped model?)",
        b"\x1f\x8b": "a gzip archive (unpack it first)", b"\x7fELF": "a program (ELF binary)",
        b"\x89HDF": "an HDF5 file (a Keras .h5 model: convert it with `edgekit convert` first)",
        b"GIF8": "a GIF image", b"%PDF": "a PDF document",
    }
    for prefix, what in magic.items():
        if head.startswith(prefix):
            return what
    if head[:1] in (b"{", b"["):
        return "a JSON or text file"
    if head[:2] == b"\x08\x03" or head[:1] == b"\x0a":
        return "possibly a protobuf (a TensorFlow .pb graph? convert it with `edgekit convert` first)"
    return "not a TFLite model"


def parse_tflite(data: bytes, label: str = "the model") -> TFLiteFile:
    """Parse and check a TFLite flatbuffer held in memory.

    Raises:
        ModelError: the bytes are not a TFLite model, or any offset, count or size in
            them does not add up.
    """
    n = len(data)
    if n == 0:
        raise ModelError(f"{label} is empty (0 bytes). Copy the file again; the copy was interrupted or never written.")
    if n < 8:
        raise ModelError(f"{label} has only {n} bytes, too few for a TFLite model. Copy the file again.")
    if data[4:8] != FILE_IDENTIFIER:
        what = _describe_foreign(data[:8])
        raise ModelError(
            f"{label} is not a TFLite model: it lacks the 'TFL3' file identifier ({what}). "
            "Pass a .tflite file, e.g. one written by `edgekit convert`."
        )
    r = FlatReader(data, label)
    root = r.u32(0)
    r.check(root, 4, "the root table")

    version = r.scalar(root, 0, "u32")
    if version != 3:
        raise ModelError(f"{label} declares schema version {version}; TFLite interpreters read version 3. Re-export the model.")

    opcodes: list[str] = []
    versions: list[int] = []
    for oc in r.tables(root, 1):
        versions.append(r.scalar(oc, 2, "i32", default=1))
        deprecated = r.scalar(oc, 0, "i8")
        builtin = r.scalar(oc, 3, "i32")
        code = max(deprecated, builtin)
        if code == 32:  # CUSTOM
            opcodes.append(r.string(oc, 1) or "CUSTOM")
        elif 0 <= code < len(BUILTIN_OPS):
            opcodes.append(BUILTIN_OPS[code])
        else:
            opcodes.append(f"UNKNOWN_BUILTIN_{code}")

    buffers: list[BufferDef] = []
    external: list[int] = []
    for b in r.tables(root, 4):
        start, length = r.vector(b, 0, 1)
        if length:
            buffers.append(BufferDef(start, length))
            continue
        offset, size = r.scalar(b, 1, "u64"), r.scalar(b, 2, "u64")
        if offset > 1:  # large models keep data after the flatbuffer, offset from the file start
            r.within(offset, size, "an external tensor buffer")
            buffers.append(BufferDef(offset, size))
            external.append(len(buffers) - 1)
        else:
            buffers.append(BufferDef(0, 0))

    subgraphs = [_read_subgraph(r, sg, len(opcodes), opcodes, buffers) for sg in r.tables(root, 2)]
    if not subgraphs:
        raise r.fail("it has no subgraph (no computation)")

    metadata: dict[str, int] = {}
    for md in r.tables(root, 6):
        name, buf = r.string(md, 0), r.scalar(md, 1, "u32")
        if buf >= len(buffers):
            raise r.fail(f"metadata {name!r} points at buffer {buf} of {len(buffers)}")
        metadata[name] = buf

    sig_keys = tuple(r.string(sd, 4) for sd in r.tables(root, 7))
    description = r.string(root, 3)
    _check_external(r, buffers, external)
    _check_trailer(r)
    parsed = TFLiteFile(
        size_bytes=n, version=version, description=description, opcodes=tuple(opcodes),
        subgraphs=tuple(subgraphs), buffers=tuple(buffers), metadata=metadata, signature_keys=sig_keys,
        opcode_versions=tuple(versions),
    )
    check_graph(parsed, label)
    return parsed


def _check_external(r: FlatReader, buffers: list[BufferDef], external: list[int]) -> None:
    """Data kept outside the flatbuffer must start after it: every table this reader
    visited lies before any such buffer in a file a converter wrote."""
    for i in external:
        if buffers[i].start < r.max_end:
            raise r.fail(f"buffer {i} (external data at byte {buffers[i].start}) overlaps the model's own "
                         f"tables, which reach byte {r.max_end}")


def _check_trailer(r: FlatReader) -> None:
    """Models with TFLite metadata may carry a zip of associated files (labels) after the
    flatbuffer; a copy cut inside that zip loses its end-of-central-directory record."""
    tail = r.data[r.max_end:r.max_end + 64]
    if b"PK\x03\x04" in tail and b"PK\x05\x06" not in r.data[-65557:]:
        raise r.fail("the zip of associated files (e.g. labels) appended to the model is cut short")


def _read_subgraph(r: FlatReader, sg: int, n_opcodes: int, opcodes: list[str],
                   buffers: list[BufferDef]) -> SubgraphDef:
    tensors: list[TensorDef] = []
    for t in r.tables(sg, 0):
        shape = r.ints(t, 0, limit=_MAX_RANK, what="a tensor shape")
        if any(d < 0 for d in shape):
            raise r.fail(f"a tensor has an impossible shape {shape[:8]}")
        ttype = r.scalar(t, 1, "i8")
        if ttype not in TENSOR_TYPES:
            raise r.fail(f"a tensor has unknown element type {ttype}")
        buf = r.scalar(t, 2, "u32")
        if buf >= max(len(buffers), 1):
            raise r.fail(f"a tensor points at buffer {buf}, but the model has {len(buffers)}")
        scale: tuple[float, ...] = ()
        zero_point: tuple[int, ...] = ()
        qdim = 0
        q = r.table(t, 4)
        if q:
            scale = r.ints(q, 2, "f")
            zero_point = r.ints(q, 3, "q")
            qdim = r.scalar(q, 6, "i32")
        sparse = bool(r.field_pos(t, 6))
        variable = bool(r.scalar(t, 5, "u8"))
        tdef = TensorDef(
            name=r.string(t, 3, "a tensor name"), shape=tuple(shape), type=TENSOR_TYPES[ttype][0], buffer=buf,
            scale=tuple(scale), zero_point=tuple(zero_point), quantized_dimension=qdim,
            shape_signature=tuple(r.ints(t, 7, limit=_MAX_RANK, what="a tensor shape signature")), sparse=sparse,
            variable=variable,
        )
        _check_constant_size(r, tdef, buffers)
        tensors.append(tdef)

    nt = len(tensors)

    def check_indices(idx: tuple[int, ...], what: str, optional: bool = False) -> tuple[int, ...]:
        for i in idx:
            if i >= nt or i < (-1 if optional else 0):
                raise r.fail(f"{what} refers to tensor {i}, but the subgraph has {nt}")
        return idx

    operators: list[OperatorDef] = []
    for op in r.tables(sg, 3):
        code = r.scalar(op, 0, "u32")
        if code >= n_opcodes:
            raise r.fail(f"an operator uses opcode {code}, but the model lists {n_opcodes}")
        custom = _check_custom_options(r, op)
        name = opcodes[code]
        operators.append(OperatorDef(
            opcode=name,
            inputs=check_indices(r.ints(op, 1), "an operator input", optional=True),
            outputs=check_indices(r.ints(op, 2), "an operator output"),
            options=_read_options(r, op, name, custom),
        ))
    return SubgraphDef(
        name=r.string(sg, 4), tensors=tuple(tensors),
        inputs=check_indices(r.ints(sg, 1), "a subgraph input"),
        outputs=check_indices(r.ints(sg, 2), "a subgraph output"),
        operators=tuple(operators),
    )


def _check_custom_options(r: FlatReader, op: int) -> tuple[int, int]:
    """Custom options (an Edge TPU op keeps the whole compiled model there) must lie inside the file.

    Returns their (start, length) in the file."""
    start, length = r.vector(op, 5, 1)
    offset, size = r.scalar(op, 9, "u64"), r.scalar(op, 10, "u64")
    if offset > 1:  # large models keep them after the flatbuffer, like buffers
        r.within(offset, size, "an operator's custom options")
        return offset, size
    return start, length


def _read_options(r: FlatReader, op: int, name: str, custom: tuple[int, int]) -> tuple[tuple[str, Any], ...]:
    if name in FLEXBUFFER_CUSTOM_OPS:
        start, length = custom
        try:
            return tuple(read_flat_map(r.data[start:start + length]).items())
        except FlexBufferError as exc:
            raise r.fail(f"the options of custom op {name} are not a valid FlexBuffer map ({exc})") from None
    spec = OPTION_FIELDS.get(name)
    if spec is None:
        return ()
    type_field, union_type, fields = spec
    table = r.table(op, type_field + 1) if r.scalar(op, type_field, "u8") == union_type else 0
    out: list[tuple[str, Any]] = []
    for key, index, kind in fields:
        if kind == "i32s":
            out.append((key, tuple(r.ints(table, index)) if table else ()))
        else:
            out.append((key, r.scalar(table, index, kind) if table else 0))
    return tuple(out)


def _check_constant_size(r: FlatReader, t: TensorDef, buffers: list[BufferDef]) -> None:
    """A constant tensor's data must be exactly shape x element size."""
    if t.buffer == 0 or t.buffer >= len(buffers) or t.sparse:
        return
    have = buffers[t.buffer].size
    itemsize = TENSOR_ITEMSIZE[t.type]
    if not have or not itemsize:
        return
    count = 1
    for d in t.shape:
        count *= d
    if count * itemsize != have:
        raise r.fail(
            f"constant tensor {t.name!r} of shape {t.shape} and type {t.type} needs "
            f"{count * itemsize} bytes, its buffer holds {have}"
        )
