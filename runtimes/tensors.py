"""What a .tflite file's tensors hold, read from the file alone: TensorSpec (with its
quantization arithmetic), ModelInfo and inspect_model. No interpreter is involved."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from edgekit.runtimes.metadata import SUPPORT_METADATA_NAME, other_metadata_names, read_metadata
from edgekit.runtimes.tflite_file import TensorDef, TFLiteFile
from edgekit.runtimes.validate import validate_model_file

if TYPE_CHECKING:  # its reader loads for a file that carries it (see _support): start-up
    from edgekit.runtimes.support_metadata import SupportMetadata

__all__ = ["TensorSpec", "ModelInfo", "inspect_model", "model_info"]

_NON_NUMPY_TYPES = frozenset({"string", "resource", "variant", "int4", "bfloat16"})


@dataclass(frozen=True)
class TensorSpec:
    """What one input or output tensor holds. ``scale == 0`` means not quantized."""

    name: str
    index: int
    shape: tuple[int, ...]
    dtype: np.dtype
    scale: float = 0.0
    zero_point: int = 0

    @property
    def quantized(self) -> bool:
        return self.scale != 0.0 and np.issubdtype(self.dtype, np.integer)

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """Real values -> this tensor's integer type: round(x / scale) + zero_point, clipped."""
        if not self.quantized:
            return np.asarray(x, dtype=self.dtype)
        info = np.iinfo(self.dtype)
        q = np.round(np.asarray(x, dtype=np.float32) / np.float32(self.scale)) + self.zero_point
        out: np.ndarray = np.clip(q, info.min, info.max).astype(self.dtype)  # (numpy types astype(dtype) Any)
        return out

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        """This tensor's integers -> real values: scale * (q - zero_point), widened first."""
        if not self.quantized:
            return np.asarray(q)
        real: np.ndarray = np.float32(self.scale) * (q.astype(np.int32) - np.int32(self.zero_point))
        return real.astype(np.float32)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "index": self.index, "shape": list(self.shape),
                "dtype": np.dtype(self.dtype).name, "scale": float(self.scale),
                "zero_point": int(self.zero_point)}

    @classmethod
    def from_details(cls, d: Mapping[str, Any]) -> TensorSpec:
        scale, zero_point = d.get("quantization", (0.0, 0))
        return cls(name=str(d["name"]), index=int(d["index"]), shape=tuple(int(s) for s in d["shape"]),
                   dtype=np.dtype(d["dtype"]), scale=float(scale), zero_point=int(zero_point))

    @classmethod
    def from_tensordef(cls, t: TensorDef, index: int) -> TensorSpec:
        # numpy has no int4 or bfloat16, and string/resource/variant are not arrays of numbers.
        dtype = np.dtype(object) if t.type in _NON_NUMPY_TYPES else np.dtype(t.type)
        return cls(name=t.name, index=index, shape=t.shape, dtype=dtype,
                   scale=float(t.scale[0]) if len(t.scale) == 1 else 0.0,
                   zero_point=int(t.zero_point[0]) if len(t.zero_point) == 1 else 0)

    def __str__(self) -> str:
        q = f" q(scale={self.scale:.6g}, zero_point={self.zero_point})" if self.quantized else ""
        return f"{self.name} {np.dtype(self.dtype).name}{list(self.shape)}{q}"


@dataclass(frozen=True)
class ModelInfo:
    """What a .tflite file holds, read from the file alone (no interpreter)."""

    path: str
    size_bytes: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    ops: dict[str, int]
    edgetpu_compiled: bool
    custom_ops: tuple[str, ...]
    subgraphs: int
    metadata: dict[str, Any] | None
    other_metadata: tuple[str, ...] = ()
    signatures: tuple[str, ...] = ()
    # The classes a detection post-processing op declares (SSD's TFLite_Detection_PostProcess
    # num_classes, background not counted); None when the file does not say.
    num_classes: int | None = None
    support: SupportMetadata | None = None  # the file's own TFLite Support metadata (MediaPipe, Model Maker)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["inputs"] = [s.to_dict() for s in self.inputs]
        d["outputs"] = [s.to_dict() for s in self.outputs]
        d["custom_ops"] = list(self.custom_ops)
        d["other_metadata"] = list(self.other_metadata)
        d["signatures"] = list(self.signatures)
        return d


def model_info(path: str, data: bytes, parsed: TFLiteFile) -> ModelInfo:
    """The :class:`ModelInfo` of a file already read and checked by :func:`validate_model_file`."""
    main = parsed.subgraphs[0]
    return ModelInfo(
        path=path, size_bytes=parsed.size_bytes,
        inputs=tuple(TensorSpec.from_tensordef(main.tensors[i], i) for i in main.inputs),
        outputs=tuple(TensorSpec.from_tensordef(main.tensors[i], i) for i in main.outputs),
        ops=parsed.op_counts(), edgetpu_compiled=parsed.edgetpu_compiled,
        custom_ops=tuple(parsed.custom_ops()), subgraphs=len(parsed.subgraphs),
        metadata=read_metadata(data, parsed), other_metadata=tuple(other_metadata_names(parsed)),
        signatures=parsed.signature_keys, num_classes=_postprocess_classes(parsed),
        support=_support(data, parsed),
    )


def _support(data: bytes, parsed: TFLiteFile) -> SupportMetadata | None:
    """The file's TFLite Support metadata; its reader is imported only for a file that has the entry
    (MediaPipe, Model Maker; not a Coral SSD): 1 ms of every other load's start-up."""
    if SUPPORT_METADATA_NAME not in parsed.metadata:
        return None
    from edgekit.runtimes.support_metadata import read_support_metadata

    return read_support_metadata(data, parsed)


def _postprocess_classes(parsed: TFLiteFile) -> int | None:
    for sg in parsed.subgraphs:
        for op in sg.operators:
            if op.opcode == "TFLite_Detection_PostProcess":
                n = op.option("num_classes")
                return int(n) if isinstance(n, (int, float)) and n > 0 else None
    return None


def inspect_model(path: str | os.PathLike[str]) -> ModelInfo:
    """Describe a .tflite file without creating an interpreter (safe on any file).

    Raises:
        ModelError: the file is missing, not a TFLite model, truncated or inconsistent.
    """
    data, parsed = validate_model_file(path)
    return model_info(os.fspath(path), data, parsed)
