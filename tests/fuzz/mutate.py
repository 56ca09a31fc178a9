"""Ways to break a .tflite file: byte-level damage and structural lies told in valid flatbuffers.

Byte mutations (bit flips, huge u32s, truncation, spliced chunks) mostly test the reader's
bounds checks. Structural mutations rewrite one field of an unpacked model and pack it
again, so the file is a well-formed flatbuffer whose *contents* lie: tensor indices out
of range, subgraph indices in WHILE/IF/CALL_ONCE options, shapes that disagree with their
buffers, wrong option types, absurd opcode versions. Those reach the interpreter.

Every mutator takes a ``random.Random`` and returns (bytes, description); the
description is enough to redo the mutation by hand.
"""

from __future__ import annotations

import copy
import random
import struct
from typing import Any, Callable

import numpy as np

from tests.fuzz.seeds import pack, schema

__all__ = ["mutate_bytes", "mutate_structure", "mutate", "BYTE_MUTATORS", "STRUCT_MUTATORS"]

INTERESTING_INTS = (0, 1, -1, 2, 3, 7, 8, 255, 256, 0x7FFF, 0xFFFF, 0x10000, 0x7FFFFFFF, -0x80000000,
                    0xFFFFFFFF, 1 << 20, 1 << 30)
INTERESTING_FLOATS = (0.0, -0.0, 1e-45, -1.0, 1e38, float("inf"), float("-inf"), float("nan"))


# --- bytes ------------------------------------------------------------------------------------
def _flip(rng: random.Random, buf: bytearray) -> str:
    pos = rng.randrange(8, len(buf))
    bit = rng.randrange(8)
    buf[pos] ^= 1 << bit
    return f"flip bit {bit} of byte {pos}"


def _u32(rng: random.Random, buf: bytearray) -> str:
    pos = rng.randrange(8, len(buf) - 4) & ~3
    value = rng.choice(INTERESTING_INTS + (rng.randrange(1 << 32),)) & 0xFFFFFFFF
    struct.pack_into("<I", buf, pos, value)
    return f"u32 at {pos} = {value:#x}"


def _small_index(rng: random.Random, buf: bytearray) -> str:
    pos = rng.randrange(8, len(buf) - 4) & ~3
    value = rng.randrange(0, 300)
    struct.pack_into("<I", buf, pos, value)
    return f"u32 at {pos} = {value}"


def _u16(rng: random.Random, buf: bytearray) -> str:
    pos = rng.randrange(8, len(buf) - 2) & ~1
    value = rng.choice((0, 1, 2, 4, 0x7FFF, 0xFFFF, rng.randrange(1 << 16)))
    struct.pack_into("<H", buf, pos, value)
    return f"u16 at {pos} = {value:#x}"


def _byte(rng: random.Random, buf: bytearray) -> str:
    pos = rng.randrange(8, len(buf))
    value = rng.choice((0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)))
    buf[pos] = value
    return f"byte {pos} = {value:#x}"


def _truncate(rng: random.Random, buf: bytearray) -> str:
    n = rng.choice((rng.randrange(8, len(buf)), len(buf) - rng.randrange(1, 64)))
    n = max(8, n)
    del buf[n:]
    return f"truncate to {n}"


def _splice(rng: random.Random, buf: bytearray) -> str:
    a = rng.randrange(8, len(buf))
    n = rng.randrange(1, min(256, len(buf) - a) + 1)
    chunk = bytes(buf[a:a + n])
    at = rng.randrange(8, len(buf))
    if rng.random() < 0.5:
        buf[at:at] = chunk
        return f"insert {n} bytes from {a} at {at}"
    buf[at:at + n] = chunk
    return f"overwrite {n} bytes at {at} with bytes from {a}"


def _delete(rng: random.Random, buf: bytearray) -> str:
    a = rng.randrange(8, len(buf) - 1)
    n = rng.randrange(1, min(64, len(buf) - a) + 1)
    del buf[a:a + n]
    return f"delete {n} bytes at {a}"


BYTE_MUTATORS: tuple[Callable[[random.Random, bytearray], str], ...] = (
    _flip, _u32, _small_index, _u16, _byte, _truncate, _splice, _delete)


def mutate_bytes(rng: random.Random, data: bytes, rounds: int | None = None) -> tuple[bytes, str]:
    buf = bytearray(data)
    what = []
    for _ in range(rounds or rng.randint(1, 4)):
        if len(buf) < 16:
            break
        what.append(rng.choice(BYTE_MUTATORS)(rng, buf))
    return bytes(buf), "; ".join(what)


# --- structure --------------------------------------------------------------------------------
def _lst(v: Any) -> list[Any]:
    """A field of the object API as a list: unpacking gives None, lists or numpy arrays."""
    return [] if v is None else [x.item() if hasattr(x, "item") else x for x in v]


def _some_index(rng: random.Random, n: int) -> int:
    return rng.choice((-1, -2, n, n + 1, 0x7FFFFFFF, -0x80000000, rng.randrange(max(n, 1)),
                       rng.randrange(max(n, 1))))


def _ops(m: Any) -> list[tuple[int, int, Any]]:
    return [(si, oi, op) for si, sg in enumerate(m.subgraphs) for oi, op in enumerate(sg.operators or [])]


def _tensors(m: Any) -> list[tuple[int, int, Any]]:
    return [(si, ti, t) for si, sg in enumerate(m.subgraphs) for ti, t in enumerate(sg.tensors or [])]


def _op_index(rng: random.Random, m: Any) -> str | None:
    ops = _ops(m)
    if not ops:
        return None
    si, oi, op = rng.choice(ops)
    field = rng.choice(("inputs", "outputs"))
    idx = _lst(getattr(op, field))
    nt = len(m.subgraphs[si].tensors or [])
    if idx and rng.random() < 0.8:
        k = rng.randrange(len(idx))
        idx[k] = _some_index(rng, nt)
        what = f"subgraph {si} op {oi} {field}[{k}] = {idx[k]}"
    elif idx and rng.random() < 0.5:
        idx.pop(rng.randrange(len(idx)))
        what = f"subgraph {si} op {oi} drops one of its {field}"
    else:
        idx.append(_some_index(rng, nt))
        what = f"subgraph {si} op {oi} gets an extra {field[:-1]} {idx[-1]}"
    setattr(op, field, idx)
    return what


def _op_uses_constant_as_output(rng: random.Random, m: Any) -> str | None:
    for si, oi, op in rng.sample(_ops(m), len(_ops(m))):
        consts = [ti for ti, t in enumerate(m.subgraphs[si].tensors or []) if t.buffer]
        if consts and len(_lst(op.outputs)):
            op.outputs = _lst(op.outputs)
            k = rng.randrange(len(op.outputs))
            op.outputs[k] = rng.choice(consts)
            return f"subgraph {si} op {oi} writes into constant tensor {op.outputs[k]}"
    return None


def _opcode_index(rng: random.Random, m: Any) -> str | None:
    ops = _ops(m)
    if not ops:
        return None
    si, oi, op = rng.choice(ops)
    op.opcodeIndex = rng.choice((len(m.operatorCodes), 0xFFFFFFFF, rng.randrange(len(m.operatorCodes))))
    return f"subgraph {si} op {oi} opcodeIndex = {op.opcodeIndex}"


def _opcode(rng: random.Random, m: Any) -> str | None:
    if not m.operatorCodes:
        return None
    i = rng.randrange(len(m.operatorCodes))
    oc = m.operatorCodes[i]
    choice = rng.randrange(4)
    if choice == 0:
        oc.builtinCode = rng.randrange(0, 215)
        oc.deprecatedBuiltinCode = min(oc.builtinCode, 127)
        return f"opcode {i} becomes builtin {oc.builtinCode}"
    if choice == 1:
        oc.version = rng.choice((0, -1, 2, 3, 7, 100, 0x7FFFFFFF))
        return f"opcode {i} version = {oc.version}"
    if choice == 2:
        oc.builtinCode, oc.deprecatedBuiltinCode = 32, 32
        oc.customCode = rng.choice(("TFLite_Detection_PostProcess", "edgetpu-custom-op", "FlexAddV2", "x" * 300, ""))
        return f"opcode {i} becomes custom {oc.customCode[:40]!r}"
    oc.deprecatedBuiltinCode = rng.choice((-128, -1, 127, 32))
    return f"opcode {i} deprecatedBuiltinCode = {oc.deprecatedBuiltinCode}"


_SUBGRAPH_FIELDS = ("condSubgraphIndex", "bodySubgraphIndex", "thenSubgraphIndex", "elseSubgraphIndex",
                    "initSubgraphIndex", "subgraph", "decompositionSubgraphIndex", "comparatorSubgraphIndex",
                    "updateComputationSubgraphIndex")


def _options(rng: random.Random, m: Any) -> str | None:
    """Change one integer field of an op's builtin options; subgraph indices get out-of-range values."""
    cands = [(si, oi, op) for si, oi, op in _ops(m) if op.builtinOptions is not None]
    if not cands:
        return None
    si, oi, op = rng.choice(cands)
    fields = [k for k, v in vars(op.builtinOptions).items() if isinstance(v, (int, float, list)) and v is not None]
    if not fields:
        return None
    sub = [f for f in fields if f in _SUBGRAPH_FIELDS]
    name = rng.choice(sub) if sub and rng.random() < 0.7 else rng.choice(fields)
    old = getattr(op.builtinOptions, name)
    if isinstance(old, bool):
        return None
    if isinstance(old, float):
        new: Any = rng.choice(INTERESTING_FLOATS)
    elif isinstance(old, list):
        new = [rng.choice(INTERESTING_INTS) for _ in range(rng.randint(0, 6))]
    elif name in _SUBGRAPH_FIELDS:
        new = rng.choice((0, len(m.subgraphs), len(m.subgraphs) + 5, -1, 0x7FFFFFFF, si,
                          rng.randrange(len(m.subgraphs))))
    else:
        new = rng.choice(INTERESTING_INTS)
    if isinstance(old, int) and not isinstance(old, bool) and name not in _SUBGRAPH_FIELDS:
        new = int(np.clip(new, -128, 127)) if rng.random() < 0.3 else new
    setattr(op.builtinOptions, name, new)
    return f"subgraph {si} op {oi} options {type(op.builtinOptions).__name__}.{name} = {new!r}"


def _options_type(rng: random.Random, m: Any) -> str | None:
    ops = _ops(m)
    if not ops:
        return None
    si, oi, op = rng.choice(ops)
    s = schema()
    if op.builtinOptions is None or rng.random() < 0.3:
        op.builtinOptions = rng.choice((s.WhileOptionsT(condSubgraphIndex=rng.randrange(-1, 4),
                                                        bodySubgraphIndex=rng.randrange(-1, 4)),
                                        s.Conv2DOptionsT(strideW=0, strideH=0), s.ReshapeOptionsT(newShape=[-1, -1])))
    op.builtinOptionsType = rng.randrange(0, 130)
    return f"subgraph {si} op {oi} builtinOptionsType = {op.builtinOptionsType} ({type(op.builtinOptions).__name__})"


def _shape(rng: random.Random, m: Any) -> str | None:
    ts = _tensors(m)
    si, ti, t = rng.choice(ts)
    shape = _lst(t.shape)
    choice = rng.randrange(4)
    if choice == 0 and shape:
        k = rng.randrange(len(shape))
        shape[k] = rng.choice((0, -1, 2, 0x7FFFFFFF, 1 << 16, 1 << 20, shape[k] + 1, 65535))
    elif choice == 1:
        shape.append(rng.choice((1, 2, 0, 1 << 16)))
    elif choice == 2 and shape:
        shape.pop(rng.randrange(len(shape)))
    else:
        shape = [rng.choice((1, 2, 3, 1 << 12, 0x7FFFFFFF)) for _ in range(rng.randint(0, 9))]
    t.shape = shape
    return f"subgraph {si} tensor {ti} shape = {shape}"


def _shape_signature(rng: random.Random, m: Any) -> str | None:
    si, ti, t = rng.choice(_tensors(m))
    shape = _lst(t.shape)
    t.shapeSignature = [rng.choice((-1, d, 0)) for d in shape] + ([-1] if rng.random() < 0.2 else [])
    return f"subgraph {si} tensor {ti} shapeSignature = {t.shapeSignature}"


def _dtype(rng: random.Random, m: Any) -> str | None:
    si, ti, t = rng.choice(_tensors(m))
    t.type = rng.randrange(0, 19)
    return f"subgraph {si} tensor {ti} type = {t.type}"


def _buffer_index(rng: random.Random, m: Any) -> str | None:
    si, ti, t = rng.choice(_tensors(m))
    t.buffer = rng.choice((0, len(m.buffers), rng.randrange(len(m.buffers)), rng.randrange(len(m.buffers))))
    return f"subgraph {si} tensor {ti} buffer = {t.buffer}"


def _buffer_data(rng: random.Random, m: Any) -> str | None:
    full = [i for i, b in enumerate(m.buffers) if b.data is not None and len(b.data)]
    if not full:
        return None
    i = rng.choice(full)
    b = m.buffers[i]
    choice = rng.randrange(4)
    if choice == 0:
        b.data = None
        return f"buffer {i} emptied"
    if choice == 1:
        b.data = np.asarray(b.data, np.uint8)[: rng.randrange(len(b.data))]
        return f"buffer {i} cut to {len(b.data)} bytes"
    if choice == 2:
        b.data = np.concatenate([np.asarray(b.data, np.uint8), np.zeros(rng.choice((1, 4, 64)), np.uint8)])
        return f"buffer {i} grown to {len(b.data)} bytes"
    b.data = np.frombuffer(np.random.default_rng(rng.randrange(1 << 30)).bytes(len(b.data)), np.uint8)
    return f"buffer {i} filled with random bytes"


def _quantization(rng: random.Random, m: Any) -> str | None:
    si, ti, t = rng.choice(_tensors(m))
    s = schema()
    q = t.quantization or s.QuantizationParametersT()
    choice = rng.randrange(5)
    if choice == 0:
        q.scale = [rng.choice(INTERESTING_FLOATS) for _ in range(rng.randint(0, 3))]
    elif choice == 1:
        q.zeroPoint = [rng.choice(INTERESTING_INTS) for _ in range(rng.randint(0, 3))]
    elif choice == 2:
        q.quantizedDimension = rng.choice((-1, 1, 3, 4, 100, 0x7FFFFFFF))
        n = min(max((_lst(t.shape) or [1])[0], 1), 4096)  # a mutated shape may say 2**31
        q.scale, q.zeroPoint = [0.1] * rng.choice((2, n, n + 1)), [0] * rng.choice((1, n))
    elif choice == 3:
        t.quantization = None
        return f"subgraph {si} tensor {ti} loses its quantization"
    else:
        q.scale, q.zeroPoint = [], [0]
    t.quantization = q
    return (f"subgraph {si} tensor {ti} quantization scale={q.scale} zero_point={q.zeroPoint} "
            f"dim={q.quantizedDimension}")


def _graph_io(rng: random.Random, m: Any) -> str | None:
    si = rng.randrange(len(m.subgraphs))
    sg = m.subgraphs[si]
    field = rng.choice(("inputs", "outputs"))
    idx = _lst(getattr(sg, field))
    nt = len(sg.tensors or [])
    choice = rng.randrange(3)
    if choice == 0 and idx:
        idx[rng.randrange(len(idx))] = _some_index(rng, nt)
    elif choice == 1:
        idx = [] if rng.random() < 0.5 else idx + idx
    else:
        idx.append(_some_index(rng, nt))
    setattr(sg, field, idx)
    return f"subgraph {si} {field} = {idx}"


def _reorder(rng: random.Random, m: Any) -> str | None:
    cands = [(si, sg) for si, sg in enumerate(m.subgraphs) if sg.operators and len(sg.operators) > 1]
    if not cands:
        return None
    si, sg = rng.choice(cands)
    i, j = rng.sample(range(len(sg.operators)), 2)
    sg.operators[i], sg.operators[j] = sg.operators[j], sg.operators[i]
    return f"subgraph {si} swaps ops {i} and {j} (a tensor is read before it is written)"


def _subgraphs(rng: random.Random, m: Any) -> str | None:
    if len(m.subgraphs) > 1 and rng.random() < 0.5:
        k = rng.randrange(1, len(m.subgraphs))
        del m.subgraphs[k]
        return f"subgraph {k} removed"
    k = rng.randrange(len(m.subgraphs))
    m.subgraphs.insert(0, m.subgraphs.pop(k)) if k else m.subgraphs.append(copy.deepcopy(m.subgraphs[0]))
    return f"subgraph {k} moved first" if k else "subgraph 0 duplicated"


def _sparsity(rng: random.Random, m: Any) -> str | None:
    s = schema()
    consts = [(si, ti, t) for si, ti, t in _tensors(m) if t.buffer]
    if not consts:
        return None
    si, ti, t = rng.choice(consts)
    rank = len(_lst(t.shape))
    dims = []
    for _ in range(rng.randint(0, rank + 2)):
        dm = s.DimensionMetadataT(format=rng.randrange(3), denseSize=rng.choice((0, 1, 3, 1 << 20, -1)))
        if dm.format == 1:
            dm.arraySegmentsType, dm.arraySegments = 1, s.Int32VectorT(values=[0, rng.choice((1, 5, 1 << 20))])
            dm.arrayIndicesType, dm.arrayIndices = 1, s.Int32VectorT(values=[rng.choice((0, 1, 99, -5))])
        dims.append(dm)
    t.sparsity = s.SparsityParametersT(traversalOrder=rng.sample(range(rank + 1), rank) if rng.random() < 0.8
                                       else [rng.randrange(-2, 9) for _ in range(rank)],
                                       blockMap=[rng.randrange(-1, 4)] if rng.random() < 0.3 else None,
                                       dimMetadata=dims)
    return f"subgraph {si} tensor {ti} gets sparsity with {len(dims)} dims"


def _custom_options(rng: random.Random, m: Any) -> str | None:
    ops = _ops(m)
    if not ops:
        return None
    si, oi, op = rng.choice(ops)
    raw = bytearray(op.customOptions if op.customOptions is not None else b"")
    if raw and rng.random() < 0.7:
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
    else:
        raw = bytearray(rng.randbytes(rng.randrange(0, 64)))
    op.customOptions = list(raw)
    op.customOptionsFormat = 0
    return f"subgraph {si} op {oi} custom options {bytes(raw[:16]).hex()}... ({len(raw)} bytes)"


def _variable(rng: random.Random, m: Any) -> str | None:
    si, ti, t = rng.choice(_tensors(m))
    t.isVariable = not t.isVariable
    return f"subgraph {si} tensor {ti} isVariable = {t.isVariable}"


def _signature(rng: random.Random, m: Any) -> str | None:
    s = schema()
    nt = len(m.subgraphs[0].tensors or [])
    m.signatureDefs = [s.SignatureDefT(
        inputs=[s.TensorMapT(name="x", tensorIndex=_some_index(rng, nt) & 0xFFFFFFFF)],
        outputs=[s.TensorMapT(name="y", tensorIndex=rng.randrange(max(nt, 1)))],
        signatureKey="serving_default", subgraphIndex=rng.choice((0, len(m.subgraphs), 0xFFFFFFFF)))]
    return f"signature def: {m.signatureDefs[0].inputs[0].tensorIndex} in subgraph {m.signatureDefs[0].subgraphIndex}"


def _external_buffer(rng: random.Random, m: Any) -> str | None:
    i = rng.randrange(len(m.buffers))
    b = m.buffers[i]
    b.data = None
    b.offset = rng.choice((1, 8, 0xFFFFFFFF, 1 << 40, 16))
    b.size = rng.choice((0, 4, 1 << 40, 64))
    return f"buffer {i} external at offset {b.offset} size {b.size}"


STRUCT_MUTATORS: tuple[Callable[[random.Random, Any], str | None], ...] = (
    _op_index, _op_index, _op_uses_constant_as_output, _opcode_index, _opcode, _options, _options, _options,
    _options_type, _shape, _shape, _shape_signature, _dtype, _buffer_index, _buffer_data, _quantization, _graph_io,
    _reorder, _subgraphs, _sparsity, _custom_options, _variable, _signature, _external_buffer)


def mutate_structure(rng: random.Random, model: Any, rounds: int | None = None) -> tuple[bytes, str]:
    """Apply 1-3 structural mutations to a deep copy of an unpacked model and pack it."""
    m = copy.deepcopy(model)
    what = []
    for _ in range(rounds or rng.choice((1, 1, 1, 2, 3))):
        done = rng.choice(STRUCT_MUTATORS)(rng, m)
        if done:
            what.append(done)
    try:
        return pack(m), "; ".join(what) or "no change"
    except (struct.error, TypeError, ValueError, OverflowError, AttributeError) as exc:
        # The packer refuses some values (a negative u32); fall back to the unmutated model.
        return pack(model), f"unpackable mutation skipped ({type(exc).__name__})"


def mutate(rng: random.Random, data: bytes, model: Any) -> tuple[bytes, str]:
    """A structural mutation, a byte mutation, or both."""
    r = rng.random()
    if r < 0.55:
        return mutate_structure(rng, model)
    if r < 0.85:
        return mutate_bytes(rng, data)
    out, what = mutate_structure(rng, model)
    out, more = mutate_bytes(rng, out, rounds=1)
    return out, f"{what}; {more}"
