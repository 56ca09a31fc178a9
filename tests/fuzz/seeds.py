"""Small valid .tflite models built from the schema's object API (no TensorFlow).

Each holds the structures worth fuzzing: constant buffers, quantization, builtin options,
and the control-flow ops (WHILE, IF, CALL_ONCE) that point at other subgraphs by index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["SEEDS", "build", "pack", "unpack", "real_seeds", "schema"]


def schema() -> Any:
    """ai-edge-litert's generated TFLite schema module.

    Raises:
        ImportError: ai-edge-litert (or flatbuffers) is not installed.
    """
    from ai_edge_litert import schema_py_generated

    return schema_py_generated


def pack(model: Any) -> bytes:
    import flatbuffers

    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def unpack(data: bytes) -> Any:
    return schema().ModelT.InitFromPackedBuf(data, 0)


class _Graph:
    """Collects tensors, buffers and ops of one subgraph, and opcodes for the whole model."""

    def __init__(self, model: Any, name: str) -> None:
        s = schema()
        self.s, self.model = s, model
        self.sg = s.SubGraphT(tensors=[], inputs=[], outputs=[], operators=[], name=name)
        model.subgraphs.append(self.sg)

    def tensor(self, name: str, shape: list[int], dtype: int = 0, data: np.ndarray | None = None,
               quant: tuple[float, int] | None = None) -> int:
        t = self.s.TensorT(shape=list(shape), type=dtype, name=name, buffer=0)
        if data is not None:
            t.buffer = len(self.model.buffers)
            self.model.buffers.append(self.s.BufferT(data=np.frombuffer(np.ascontiguousarray(data).tobytes(),
                                                                         np.uint8)))
        if quant is not None:
            t.quantization = self.s.QuantizationParametersT(scale=[quant[0]], zeroPoint=[quant[1]])
        self.sg.tensors.append(t)
        return len(self.sg.tensors) - 1

    def op(self, code: int, inputs: list[int], outputs: list[int], opt_type: int = 0, options: Any = None) -> None:
        codes = self.model.operatorCodes
        idx = next((i for i, oc in enumerate(codes) if oc.builtinCode == code), None)
        if idx is None:
            codes.append(self.s.OperatorCodeT(builtinCode=code, deprecatedBuiltinCode=min(code, 127), version=1))
            idx = len(codes) - 1
        self.sg.operators.append(self.s.OperatorT(opcodeIndex=idx, inputs=inputs, outputs=outputs,
                                                  builtinOptionsType=opt_type, builtinOptions=options))


def _model() -> Any:
    s = schema()
    return s.ModelT(version=3, operatorCodes=[], subgraphs=[], buffers=[s.BufferT()], description="edgekit fuzz seed")


def add_model() -> Any:
    """y = x + c, float32 [1, 4]."""
    s, m = schema(), _model()
    g = _Graph(m, "main")
    x = g.tensor("x", [1, 4])
    c = g.tensor("c", [1, 4], data=np.arange(4, dtype=np.float32))
    y = g.tensor("y", [1, 4])
    g.op(s.BuiltinOperator.ADD, [x, c], [y], s.BuiltinOptions.AddOptions, s.AddOptionsT())
    g.sg.inputs, g.sg.outputs = [x], [y]
    return m


def conv_model() -> Any:
    """int8 CONV_2D -> RESHAPE -> FULLY_CONNECTED -> SOFTMAX, the shape of a tiny classifier."""
    s, m = schema(), _model()
    g = _Graph(m, "main")
    rng = np.random.default_rng(0)
    x = g.tensor("image", [1, 8, 8, 3], s.TensorType.INT8, quant=(1 / 128, 0))
    w = g.tensor("conv/w", [4, 3, 3, 3], s.TensorType.INT8, rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8),
                 quant=(0.01, 0))
    b = g.tensor("conv/b", [4], s.TensorType.INT32, np.zeros(4, np.int32), quant=(1 / 128 * 0.01, 0))
    h = g.tensor("conv/out", [1, 8, 8, 4], s.TensorType.INT8, quant=(0.05, -10))
    g.op(s.BuiltinOperator.CONV_2D, [x, w, b], [h], s.BuiltinOptions.Conv2DOptions,
         s.Conv2DOptionsT(padding=s.Padding.SAME, strideW=1, strideH=1,
                          fusedActivationFunction=s.ActivationFunctionType.RELU))
    shape = g.tensor("flat/shape", [2], s.TensorType.INT32, np.array([1, 256], np.int32))
    flat = g.tensor("flat", [1, 256], s.TensorType.INT8, quant=(0.05, -10))
    g.op(s.BuiltinOperator.RESHAPE, [h, shape], [flat], s.BuiltinOptions.ReshapeOptions,
         s.ReshapeOptionsT(newShape=[1, 256]))
    fw = g.tensor("fc/w", [5, 256], s.TensorType.INT8, rng.integers(-127, 128, (5, 256)).astype(np.int8),
                  quant=(0.002, 0))
    fb = g.tensor("fc/b", [5], s.TensorType.INT32, np.zeros(5, np.int32), quant=(0.05 * 0.002, 0))
    logits = g.tensor("logits", [1, 5], s.TensorType.INT8, quant=(0.1, 0))
    g.op(s.BuiltinOperator.FULLY_CONNECTED, [flat, fw, fb], [logits], s.BuiltinOptions.FullyConnectedOptions,
         s.FullyConnectedOptionsT())
    probs = g.tensor("probs", [1, 5], s.TensorType.INT8, quant=(1 / 256, -128))
    g.op(s.BuiltinOperator.SOFTMAX, [logits], [probs], s.BuiltinOptions.SoftmaxOptions, s.SoftmaxOptionsT(beta=1.0))
    g.sg.inputs, g.sg.outputs = [x], [probs]
    return m


def while_model() -> Any:
    """i = x; while i < 10: i = i + 1 (subgraph 1 the condition, 2 the body)."""
    s, m = schema(), _model()
    g = _Graph(m, "main")
    x = g.tensor("x", [1])
    y = g.tensor("y", [1])
    g.op(s.BuiltinOperator.WHILE, [x], [y], s.BuiltinOptions.WhileOptions,
         s.WhileOptionsT(condSubgraphIndex=1, bodySubgraphIndex=2))
    g.sg.inputs, g.sg.outputs = [x], [y]
    cond = _Graph(m, "cond")
    ci = cond.tensor("i", [1])
    lim = cond.tensor("limit", [1], data=np.array([10], np.float32))
    out = cond.tensor("less", [1], s.TensorType.BOOL)
    cond.op(s.BuiltinOperator.LESS, [ci, lim], [out])
    cond.sg.inputs, cond.sg.outputs = [ci], [out]
    body = _Graph(m, "body")
    bi = body.tensor("i", [1])
    one = body.tensor("one", [1], data=np.array([1], np.float32))
    bo = body.tensor("next", [1])
    body.op(s.BuiltinOperator.ADD, [bi, one], [bo], s.BuiltinOptions.AddOptions, s.AddOptionsT())
    body.sg.inputs, body.sg.outputs = [bi], [bo]
    return m


def if_model() -> Any:
    """y = x + 1 if flag else x * 2 (subgraph 1 then, 2 else)."""
    s, m = schema(), _model()
    g = _Graph(m, "main")
    flag = g.tensor("flag", [1], s.TensorType.BOOL)
    x = g.tensor("x", [1, 3])
    y = g.tensor("y", [1, 3])
    g.op(s.BuiltinOperator.IF, [flag, x], [y], s.BuiltinOptions.IfOptions,
         s.IfOptionsT(thenSubgraphIndex=1, elseSubgraphIndex=2))
    g.sg.inputs, g.sg.outputs = [flag, x], [y]
    for name, code, opt_type, options, value in (
            ("then", s.BuiltinOperator.ADD, s.BuiltinOptions.AddOptions, s.AddOptionsT(), 1.0),
            ("else", s.BuiltinOperator.MUL, s.BuiltinOptions.MulOptions, s.MulOptionsT(), 2.0)):
        br = _Graph(m, name)
        bi = br.tensor("x", [1, 3])
        c = br.tensor("c", [1, 3], data=np.full((1, 3), value, np.float32))
        bo = br.tensor("y", [1, 3])
        br.op(code, [bi, c], [bo], opt_type, options)
        br.sg.inputs, br.sg.outputs = [bi], [bo]
    return m


def call_once_model() -> Any:
    """CALL_ONCE of an initializer subgraph, then y = relu(x); the shape TF gives models with state."""
    s, m = schema(), _model()
    g = _Graph(m, "main")
    x = g.tensor("x", [1, 4])
    y = g.tensor("y", [1, 4])
    g.op(s.BuiltinOperator.CALL_ONCE, [], [], s.BuiltinOptions.CallOnceOptions,
         s.CallOnceOptionsT(initSubgraphIndex=1))
    g.op(s.BuiltinOperator.RELU, [x], [y])
    g.sg.inputs, g.sg.outputs = [x], [y]
    _Graph(m, "init")
    return m


def gather_model() -> Any:
    """y = params[indices] with int32 indices fed by the caller, and a STRIDED_SLICE after it."""
    s, m = schema(), _model()
    g = _Graph(m, "main")
    params = g.tensor("params", [5, 3], data=np.arange(15, dtype=np.float32).reshape(5, 3))
    idx = g.tensor("indices", [2], s.TensorType.INT32)
    gathered = g.tensor("gathered", [2, 3])
    g.op(s.BuiltinOperator.GATHER, [params, idx], [gathered], s.BuiltinOptions.GatherOptions,
         s.GatherOptionsT(axis=0))
    begin = g.tensor("begin", [2], s.TensorType.INT32, np.array([0, 1], np.int32))
    end = g.tensor("end", [2], s.TensorType.INT32, np.array([2, 3], np.int32))
    strides = g.tensor("strides", [2], s.TensorType.INT32, np.array([1, 1], np.int32))
    y = g.tensor("y", [2, 2])
    g.op(s.BuiltinOperator.STRIDED_SLICE, [gathered, begin, end, strides], [y], s.BuiltinOptions.StridedSliceOptions,
         s.StridedSliceOptionsT())
    g.sg.inputs, g.sg.outputs = [idx], [y]
    return m


SEEDS: dict[str, Callable[[], Any]] = {
    "add": add_model, "conv": conv_model, "while": while_model, "if": if_model,
    "call_once": call_once_model, "gather": gather_model,
}


def build(name: str) -> bytes:
    """The bytes of one seed model."""
    return pack(SEEDS[name]())


def real_seeds(folder: Path | None, names: tuple[str, ...] = (
        "mobilenet_v1_0.25_128_quant.tflite", "ssd_mobilenet_v1_coco_quant.tflite")) -> dict[str, bytes]:
    """The shared real models that exist in `folder` (none when it is None)."""
    if folder is None:
        return {}
    return {n.removesuffix(".tflite"): (folder / n).read_bytes() for n in names if (folder / n).exists()}
