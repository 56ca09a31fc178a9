"""The TFLite flatbuffer's tables as plain values (what :mod:`edgekit.runtimes.tflite_file` reads
and :mod:`edgekit.runtimes.graph_check` checks); pure Python, no reading here.

The file and its tensors, operators and buffers are immutable NamedTuples (pycoral's kind of
record): a frozen dataclass costs 0.8 ms to create at import (its methods are compiled from
source), a NamedTuple 0.1 ms, and an instance of one is made 3x faster, for every tensor and
buffer of a file on each load.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

from edgekit.runtimes._opnames import BUILTIN_OPS

__all__ = ["FILE_IDENTIFIER", "EDGETPU_CUSTOM_OP", "TENSOR_TYPES", "TENSOR_ITEMSIZE", "TensorDef", "OperatorDef",
           "SubgraphDef", "BufferDef", "TFLiteFile"]

FILE_IDENTIFIER = b"TFL3"
EDGETPU_CUSTOM_OP = "edgetpu-custom-op"

# TensorType code -> (name, bytes per element or 0 when not fixed)
TENSOR_TYPES: dict[int, tuple[str, int]] = {
    0: ("float32", 4), 1: ("float16", 2), 2: ("int32", 4), 3: ("uint8", 1), 4: ("int64", 8),
    5: ("string", 0), 6: ("bool", 1), 7: ("int16", 2), 8: ("complex64", 8), 9: ("int8", 1),
    10: ("float64", 8), 11: ("complex128", 16), 12: ("uint64", 8), 13: ("resource", 0),
    14: ("variant", 0), 15: ("uint32", 4), 16: ("uint16", 2), 17: ("int4", 0), 18: ("bfloat16", 2),
}

TENSOR_ITEMSIZE: dict[str, int] = {name: size for name, size in TENSOR_TYPES.values()}


class TensorDef(NamedTuple):
    """One tensor of a subgraph: shape, element type, buffer and quantization."""

    name: str
    shape: tuple[int, ...]
    type: str
    buffer: int
    scale: tuple[float, ...] = ()
    zero_point: tuple[int, ...] = ()
    quantized_dimension: int = 0
    shape_signature: tuple[int, ...] = ()
    sparse: bool = False
    variable: bool = False


class OperatorDef(NamedTuple):
    """One operator: its op name, its tensors and the options edgekit checks."""

    opcode: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    # The option values edgekit checks (subgraph indices, split counts, a custom op's
    # FlexBuffer options), as (name, value) pairs; absent options read as TFLite's defaults.
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, name: str, default: Any = None) -> Any:
        return next((v for k, v in self.options if k == name), default)


class SubgraphDef(NamedTuple):
    """One subgraph: its tensors, inputs, outputs and operators."""

    name: str
    tensors: tuple[TensorDef, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    operators: tuple[OperatorDef, ...]


class BufferDef(NamedTuple):
    """Where one buffer's data lies in the file."""

    start: int  # absolute offset of the data in the file, 0 when empty
    size: int


_NO_METADATA: Mapping[str, int] = MappingProxyType({})


class TFLiteFile(NamedTuple):
    """What the flatbuffer says, checked against the file's size."""

    size_bytes: int
    version: int
    description: str
    opcodes: tuple[str, ...]
    subgraphs: tuple[SubgraphDef, ...]
    buffers: tuple[BufferDef, ...]
    metadata: Mapping[str, int] = _NO_METADATA  # name -> buffer index
    signature_keys: tuple[str, ...] = ()
    opcode_versions: tuple[int, ...] = ()

    @property
    def edgetpu_compiled(self) -> bool:
        return EDGETPU_CUSTOM_OP in self.opcodes

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for sg in self.subgraphs:
            for op in sg.operators:
                counts[op.opcode] = counts.get(op.opcode, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def custom_ops(self) -> list[str]:
        return sorted({op.opcode for sg in self.subgraphs for op in sg.operators
                       if op.opcode not in BUILTIN_OPS})
