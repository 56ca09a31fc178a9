"""Per-layer quantization error of two .tflite files: every intermediate tensor, float against quantized.

Both models run on the same inputs with all tensors kept; each op output of the quantized
model is dequantized and compared with the float model's tensor of the same name. The error
a quantized model shows at a layer includes what earlier layers passed on, so each layer is
charged only with what it adds: its RMSE minus the relative error it received (the largest
relative error among its inputs, carried through at its own output's scale). In quantization
steps that is about 0.29 for a layer that only rounds, and large for a layer whose range or
weights int8 does not fit, as with TensorFlow's QuantizationDebugger, without TensorFlow.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Protocol, Sequence

import numpy as np

from edgekit.converters.engines.base import LayerError
from edgekit.runtimes.tensors import TensorSpec
from edgekit.runtimes.tflite_file import TensorDef, TFLiteFile, parse_tflite

__all__ = ["TensorStats", "tensor_stats", "layer_errors"]


@dataclass
class TensorStats:
    """Running sums over the samples for one tensor."""

    n: int = 0
    sq_err: float = 0.0
    sum_f: float = 0.0
    sq_f: float = 0.0
    max_abs: float = 0.0

    def add(self, f: np.ndarray, q: np.ndarray) -> None:
        f64, d = f.astype(np.float64), q.astype(np.float64) - f.astype(np.float64)
        self.n += f64.size
        self.sq_err += float(np.sum(d * d))
        self.sum_f += float(np.sum(f64))
        self.sq_f += float(np.sum(f64 * f64))
        self.max_abs = max(self.max_abs, float(np.max(np.abs(d))) if d.size else 0.0)

    @property
    def rmse(self) -> float:
        return float(np.sqrt(self.sq_err / self.n)) if self.n else float("nan")

    @property
    def std(self) -> float:
        if not self.n:
            return float("nan")
        mean = self.sum_f / self.n
        return float(np.sqrt(max(self.sq_f / self.n - mean * mean, 0.0)))

    @property
    def relative(self) -> float:
        """RMSE over the float tensor's spread (0 for an exact copy)."""
        return self.rmse / self.std if self.std > 0 else 0.0


class _Interpreter(Protocol):
    """What this module calls of ai_edge_litert's Interpreter (which has no type hints)."""

    def get_input_details(self) -> list[dict[str, Any]]: ...
    def get_tensor_details(self) -> list[dict[str, Any]]: ...
    def set_tensor(self, index: int, value: np.ndarray) -> None: ...
    def get_tensor(self, index: int) -> np.ndarray: ...
    def invoke(self) -> None: ...


def _interpreter(model: bytes) -> _Interpreter:
    from ai_edge_litert.interpreter import Interpreter

    with warnings.catch_warnings():  # "intended for debugging purposes only": that is what this is
        warnings.simplefilter("ignore", UserWarning)
        interp = Interpreter(model_content=model, experimental_preserve_all_tensors=True)
    interp.allocate_tensors()
    return interp


def _feed(interp: _Interpreter, x: np.ndarray) -> None:
    d = interp.get_input_details()[0]
    x = TensorSpec.from_details(d).quantize(x).reshape(d["shape"])
    interp.set_tensor(d["index"], x)
    interp.invoke()


def _values(interp: _Interpreter, detail: dict) -> np.ndarray:
    value = interp.get_tensor(detail["index"])
    scales = detail["quantization_parameters"]["scales"]
    if value.dtype.kind in "iu" and len(scales) == 1:
        zero = int(detail["quantization_parameters"]["zero_points"][0])
        return (float(scales[0]) * (value.astype(np.int32) - zero)).astype(np.float32)
    return value.astype(np.float32)


def _constant(parsed: TFLiteFile, t: TensorDef) -> bool:
    return 0 <= t.buffer < len(parsed.buffers) and parsed.buffers[t.buffer].size > 0


def tensor_stats(float_model: bytes, quant_model: bytes, inputs: Iterable[np.ndarray],
                 names: Sequence[str]) -> dict[str, TensorStats]:
    """Error statistics of the named tensors (present in both models) over `inputs` (float model inputs)."""
    fi, qi = _interpreter(float_model), _interpreter(quant_model)
    f_index = {d["name"]: d for d in fi.get_tensor_details()}
    q_index = {d["name"]: d for d in qi.get_tensor_details()}
    wanted = [n for n in names if n in f_index and n in q_index]
    stats = {n: TensorStats() for n in wanted}
    for x in inputs:
        _feed(fi, x)
        _feed(qi, x)
        for n in wanted:
            f, q = _values(fi, f_index[n]), _values(qi, q_index[n])
            if f.shape == q.shape:
                stats[n].add(f, q)
    return stats


def layer_errors(float_model: bytes, quant_model: bytes, inputs: Iterable[np.ndarray]) -> list[LayerError]:
    """One LayerError per op output that the quantized model holds in integers, in graph order.

    ``rmse`` is the error the layer adds (see the module docstring), ``scale`` its output's
    quantization step, ``max_abs_error`` the largest error seen at its output.
    """
    from edgekit.converters.debug import _short_name

    parsed = parse_tflite(float_model, label="the float model")
    fsg = parsed.subgraphs[0]
    qsg = parse_tflite(quant_model, label="the quantized model").subgraphs[0]
    q_by_name = {t.name: t for t in qsg.tensors}
    # Only activations carry error into a layer; its weights' error is its own.
    ops = [(op.opcode, [fsg.tensors[i].name for i in op.inputs if i >= 0 and not _constant(parsed, fsg.tensors[i])],
            [fsg.tensors[i].name for i in op.outputs if i >= 0]) for op in fsg.operators]
    names = sorted({n for _, ins, outs in ops for n in (*ins, *outs)})
    stats = tensor_stats(float_model, quant_model, inputs, names)
    out = []
    for opcode, ins, outs in ops:
        received = max((stats[n].relative for n in ins if n in stats), default=0.0)
        for name in outs:
            t, s = q_by_name.get(name), stats.get(name)
            if t is None or s is None or len(t.scale) != 1 or t.type not in ("int8", "uint8", "int16"):
                continue
            added = max(0.0, s.rmse - received * s.std)
            out.append(LayerError(name=_short_name(name), tensor_name=name, op=opcode, rmse=added,
                                  scale=float(t.scale[0]), max_abs_error=s.max_abs, elements=int(np.prod(t.shape))))
    return out
