"""Checks on what a model's graph says, after the reader has checked where things are.

Every offset of a file can lie inside it and the file still crash the interpreter: an
operator with too few inputs (the kernel reads past the list), an absent input (-1) where
the kernel expects a tensor, a WHILE whose condition is the main graph (endless recursion),
a SPLIT whose options promise more outputs than it has, a tensor of 2**31 elements (int
overflow in kernels). Each rule here was found by fuzzing ai-edge-litert's interpreter
(tests/fuzz) and refuses only what no converter writes.
"""

from __future__ import annotations

import math
from typing import Any

from edgekit.errors import ModelError
from edgekit.runtimes._opnames import BUILTIN_OPS

from edgekit.runtimes.tflite_defs import TENSOR_ITEMSIZE, OperatorDef, SubgraphDef, TFLiteFile

__all__ = ["check_graph", "ARITY", "OPTION_FIELDS", "FLEXBUFFER_CUSTOM_OPS", "MAX_TENSOR_ELEMENTS", "MAX_TENSOR_BYTES"]

# Kernels count elements in int (32 bits); beyond this they overflow.
MAX_TENSOR_ELEMENTS = 2**31 - 1
MAX_TENSOR_BYTES = 2 * 1024**3
_N = 1 << 30  # "any number"

_UNARY = ("ABS", "CEIL", "COS", "ELU", "EXP", "FLOOR", "GELU", "HARD_SWISH", "LOG", "LOGISTIC", "LOGICAL_NOT",
          "NEG", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "ROUND", "RSQRT", "SIN", "SQRT", "SQUARE", "TANH",
          "SIGN", "DEQUANTIZE", "QUANTIZE", "CAST", "ZEROS_LIKE", "L2_NORMALIZATION", "LEAKY_RELU",
          "LOCAL_RESPONSE_NORMALIZATION", "SOFTMAX", "LOG_SOFTMAX", "FAKE_QUANT", "SQUEEZE", "IMAG", "REAL",
          "COMPLEX_ABS", "AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH", "SHAPE",
          "RANK", "MATRIX_DIAG", "WHERE", "BITCAST", "BUCKETIZE", "DENSIFY", "READ_VARIABLE", "FLOOR")
_BINARY = ("ADD", "SUB", "MUL", "DIV", "POW", "MAXIMUM", "MINIMUM", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
           "EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "FLOOR_DIV", "FLOOR_MOD", "SQUARED_DIFFERENCE",
           "ATAN2", "PRELU", "BITWISE_XOR", "RIGHT_SHIFT", "EXPAND_DIMS", "TRANSPOSE", "TILE", "GATHER", "GATHER_ND",
           "BROADCAST_TO", "BROADCAST_ARGS", "MIRROR_PAD", "MEAN", "SUM", "REDUCE_PROD", "REDUCE_MAX", "REDUCE_MIN",
           "REDUCE_ANY", "REDUCE_ALL", "ARG_MAX", "ARG_MIN", "CUMSUM", "FILL", "RESIZE_BILINEAR",
           "RESIZE_NEAREST_NEIGHBOR", "REVERSE_V2", "REVERSE_SEQUENCE", "MATRIX_SET_DIAG", "SEGMENT_SUM",
           "EMBEDDING_LOOKUP", "RFFT2D", "BATCH_MATMUL", "MULTINOMIAL")

# op -> (min inputs, max inputs, min outputs, max outputs), as the TFLite kernels expect them.
ARITY: dict[str, tuple[int, int, int, int]] = {
    **{op: (1, 1, 1, 1) for op in _UNARY},
    **{op: (2, 2, 1, 1) for op in _BINARY},
    "CONV_2D": (2, 3, 1, 1), "DEPTHWISE_CONV_2D": (2, 3, 1, 1), "FULLY_CONNECTED": (2, 3, 1, 2),
    "TRANSPOSE_CONV": (3, 4, 1, 1), "CONV_3D": (2, 3, 1, 1), "CONV_3D_TRANSPOSE": (3, 4, 1, 1),
    "RESHAPE": (1, 2, 1, 1), "PAD": (2, 3, 1, 1), "PADV2": (3, 3, 1, 1), "SLICE": (3, 3, 1, 1),
    "STRIDED_SLICE": (4, 4, 1, 1), "SPLIT": (2, 2, 1, _N), "SPLIT_V": (3, 3, 1, _N), "SPACE_TO_BATCH_ND": (3, 3, 1, 1),
    "BATCH_TO_SPACE_ND": (3, 3, 1, 1), "SELECT": (3, 3, 1, 1), "SELECT_V2": (3, 3, 1, 1), "ONE_HOT": (4, 4, 1, 1),
    "RANGE": (3, 3, 1, 1), "SCATTER_ND": (3, 3, 1, 1), "DYNAMIC_UPDATE_SLICE": (3, 3, 1, 1),
    "UNSORTED_SEGMENT_PROD": (3, 3, 1, 1), "UNSORTED_SEGMENT_MAX": (3, 3, 1, 1),
    "UNSORTED_SEGMENT_MIN": (3, 3, 1, 1), "UNSORTED_SEGMENT_SUM": (3, 3, 1, 1), "SPARSE_TO_DENSE": (4, 4, 1, 1),
    "CONCATENATION": (1, _N, 1, 1), "PACK": (1, _N, 1, 1), "ADD_N": (1, _N, 1, 1), "UNPACK": (1, 1, 1, _N),
    "TOPK_V2": (2, 2, 2, 2), "UNIQUE": (1, 1, 2, 2), "NON_MAX_SUPPRESSION_V4": (5, 5, 2, 2),
    "NON_MAX_SUPPRESSION_V5": (6, 6, 3, 3), "VAR_HANDLE": (0, 0, 1, 1), "ASSIGN_VARIABLE": (2, 2, 0, 0),
    "CALL_ONCE": (0, 0, 0, 0), "IF": (1, _N, 0, _N), "WHILE": (0, _N, 0, _N), "DILATE": (3, 3, 1, 1),
    "REDUCE_WINDOW": (5, 5, 1, 1), "RANDOM_UNIFORM": (1, 1, 1, 1), "RANDOM_STANDARD_NORMAL": (1, 1, 1, 1),
    "TFLite_Detection_PostProcess": (3, 3, 4, 4), "Mfcc": (2, 2, 1, 1), "AudioSpectrogram": (1, 1, 1, 1),
    "NumericVerify": (2, 2, 0, 1),
}

# Inputs a kernel accepts as absent (index -1): biases, PAD's constant, the many optional LSTM tensors.
_OPTIONAL_INPUTS: dict[str, frozenset[int]] = {
    "CONV_2D": frozenset({2}), "DEPTHWISE_CONV_2D": frozenset({2}), "FULLY_CONNECTED": frozenset({2}),
    "TRANSPOSE_CONV": frozenset({3}), "CONV_3D": frozenset({2}), "CONV_3D_TRANSPOSE": frozenset({3}),
    "PAD": frozenset({2}), "PADV2": frozenset({2}), "SVDF": frozenset({3}),
}
_ANY_BUT_FIRST_OPTIONAL = frozenset({"LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM", "BIDIRECTIONAL_SEQUENCE_LSTM",
                                     "BIDIRECTIONAL_SEQUENCE_RNN"})

# Options naming other subgraphs, and the subgraph arity each op needs.
_CALLS = {
    "WHILE": ("cond_subgraph", "body_subgraph"), "IF": ("then_subgraph", "else_subgraph"),
    "CALL_ONCE": ("init_subgraph",), "CALL": ("subgraph",), "STABLEHLO_WHILE": ("cond_subgraph", "body_subgraph"),
    "STABLEHLO_SORT": ("comparator_subgraph",), "STABLEHLO_REDUCE": ("body_subgraph",),
    "STABLEHLO_SCATTER": ("update_subgraph",), "STABLEHLO_REDUCE_WINDOW": ("body_subgraph",),
    "STABLEHLO_COMPOSITE": ("decomposition_subgraph",), "STABLEHLO_CASE": ("branch_subgraphs",),
}

# The option values the checks need, which the reader extracts: op -> (union type field of
# Operator, union type it must hold, ((name, field index, kind), ...)). An op whose options
# are absent or of another type gets TFLite's defaults (0), as the interpreter does.
OPTION_FIELDS: dict[str, tuple[int, int, tuple[tuple[str, int, str], ...]]] = {
    "WHILE": (3, 93, (("cond_subgraph", 0, "i32"), ("body_subgraph", 1, "i32"))),
    "IF": (3, 92, (("then_subgraph", 0, "i32"), ("else_subgraph", 1, "i32"))),
    "CALL_ONCE": (3, 103, (("init_subgraph", 0, "i32"),)),
    "CALL": (3, 16, (("subgraph", 0, "u32"),)),
    "SPLIT": (3, 35, (("num_splits", 0, "i32"),)),
    "SPLIT_V": (3, 79, (("num_splits", 0, "i32"),)),
    "UNPACK": (3, 64, (("num", 0, "i32"),)),
    "PACK": (3, 59, (("values_count", 0, "i32"),)),
    "STABLEHLO_WHILE": (11, 15, (("cond_subgraph", 0, "i32"), ("body_subgraph", 1, "i32"))),
    "STABLEHLO_SORT": (11, 14, (("comparator_subgraph", 2, "i32"),)),
    "STABLEHLO_REDUCE": (11, 6, (("body_subgraph", 1, "i32"),)),
    "STABLEHLO_SCATTER": (11, 7, (("update_subgraph", 6, "i32"),)),
    "STABLEHLO_REDUCE_WINDOW": (11, 13, (("body_subgraph", 5, "i32"),)),
    "STABLEHLO_COMPOSITE": (11, 21, (("decomposition_subgraph", 1, "i32"),)),
    "STABLEHLO_CASE": (11, 23, (("branch_subgraphs", 0, "i32s"),)),
}


# Custom ops the interpreter registers itself, whose options it parses as a FlexBuffer map.
FLEXBUFFER_CUSTOM_OPS = frozenset({"TFLite_Detection_PostProcess", "Mfcc", "AudioSpectrogram", "NumericVerify"})
_DETECTION_LIMITS = {"max_detections": (1, 100_000), "max_classes_per_detection": (1, 100_000),
                     "num_classes": (1, 100_000), "detections_per_class": (1, 100_000)}
_DETECTION_FLOATS = ("nms_score_threshold", "nms_iou_threshold", "y_scale", "x_scale", "h_scale", "w_scale")


class _Fail:
    def __init__(self, label: str) -> None:
        self.label = label

    def __call__(self, what: str) -> ModelError:
        return ModelError(f"{self.label} is malformed: {what}. The file is damaged or was not written by a TFLite "
                          "converter; copy it again from its source, or re-export it.")


def check_graph(model: TFLiteFile, label: str = "the model") -> None:
    """Refuse graphs an interpreter would crash on or that no converter writes.

    Raises:
        ModelError: naming the subgraph, operator or tensor and what is wrong with it.
    """
    fail = _Fail(label)
    for i, (name, version) in enumerate(zip(model.opcodes, model.opcode_versions)):
        if not 1 <= version <= 1000:
            raise fail(f"operator code {i} ({name}) has version {version}; versions start at 1")
    for si, sg in enumerate(model.subgraphs):
        _check_tensors(sg, si, fail)
        for oi, op in enumerate(sg.operators):
            _check_op(op, f"operator {oi} ({op.opcode}) of subgraph {si}", fail)
        _check_dataflow(model, sg, si, fail)
    _check_calls(model, fail)


def _check_tensors(sg: SubgraphDef, si: int, fail: _Fail) -> None:
    for ti, t in enumerate(sg.tensors):
        count = math.prod(t.shape)
        if count > MAX_TENSOR_ELEMENTS or count * max(TENSOR_ITEMSIZE[t.type], 1) > MAX_TENSOR_BYTES:
            raise fail(f"tensor {ti} ({t.name!r}) of subgraph {si} has shape {t.shape}: {count:,} elements, more "
                       f"than an interpreter can hold ({MAX_TENSOR_ELEMENTS:,} elements, {MAX_TENSOR_BYTES >> 30} GiB)")
        if any(not math.isfinite(s) or s < 0 for s in t.scale):
            raise fail(f"tensor {ti} ({t.name!r}) of subgraph {si} has quantization scale {t.scale[:4]}; "
                       "scales are finite and not negative")
        if len(t.scale) > 1:
            qd = t.quantized_dimension
            if not 0 <= qd < len(t.shape) or t.shape[qd] != len(t.scale):
                raise fail(f"tensor {ti} ({t.name!r}) of subgraph {si} has {len(t.scale)} per-channel scales "
                           f"along dimension {qd} of its shape {t.shape}")
        if len(t.zero_point) > 1 and len(t.zero_point) != len(t.scale):
            raise fail(f"tensor {ti} ({t.name!r}) of subgraph {si} has {len(t.scale)} scales but "
                       f"{len(t.zero_point)} zero points")


def _check_op(op: OperatorDef, where: str, fail: _Fail) -> None:
    name, nin, nout = op.opcode, len(op.inputs), len(op.outputs)
    if name in ARITY:
        lo, hi, olo, ohi = ARITY[name]
        if not lo <= nin <= hi or not olo <= nout <= ohi:
            raise fail(f"{where} has {_count(nin, 'input')} and {_count(nout, 'output')}; {name} takes "
                       f"{_span(lo, hi)} inputs and {_span(olo, ohi)} outputs")
    # A custom op we do not know may take absent inputs; it fails to resolve anyway unless registered.
    if name in BUILTIN_OPS or name in ARITY:
        allowed = _OPTIONAL_INPUTS.get(name, frozenset())
        for k, t in enumerate(op.inputs):
            if t < 0 and k not in allowed and not (name in _ANY_BUT_FIRST_OPTIONAL and k > 0):
                raise fail(f"{where} leaves input {k} absent (-1), which {name} requires")
    counts = {"SPLIT": ("num_splits", nout), "SPLIT_V": ("num_splits", nout), "UNPACK": ("num", nout),
              "PACK": ("values_count", nin)}
    if name in counts:
        key, have = counts[name]
        if op.option(key, 0) != have:
            raise fail(f"{where} says {key}={op.option(key, 0)} but has {have} "
                       f"{'outputs' if name != 'PACK' else 'inputs'}")
    if name == "TFLite_Detection_PostProcess":
        _check_detection_options(op, where, fail)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _span(lo: int, hi: int) -> str:
    if hi >= _N:
        return f"at least {lo}"
    return str(lo) if lo == hi else f"{lo} to {hi}"


def _check_detection_options(op: OperatorDef, where: str, fail: _Fail) -> None:
    opts = dict(op.options)
    for key, (lo, hi) in _DETECTION_LIMITS.items():
        value = opts.get(key)
        if value is None and key == "detections_per_class":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise fail(f"{where} has option {key}={value!r}; expected a whole number from {lo} to {hi}")
    for key in _DETECTION_FLOATS:
        if not isinstance(opts.get(key), (int, float)) or isinstance(opts.get(key), bool):
            raise fail(f"{where} has option {key}={opts.get(key)!r}; expected a number")


def _check_dataflow(model: TFLiteFile, sg: SubgraphDef, si: int, fail: _Fail) -> None:
    """Every tensor an operator reads exists by then; none is written twice, nor a constant or an input."""
    constant = {i for i, t in enumerate(sg.tensors)
                if t.buffer and t.buffer < len(model.buffers) and model.buffers[t.buffer].size}
    inputs = set(sg.inputs)
    ready = inputs | constant | {i for i, t in enumerate(sg.tensors) if t.variable or 0 in t.shape}
    written: set[int] = set()
    for oi, op in enumerate(sg.operators):
        for t in op.inputs:
            if t >= 0 and t not in ready:
                raise fail(f"operator {oi} ({op.opcode}) of subgraph {si} reads tensor {t} "
                           f"({sg.tensors[t].name!r}) before any operator writes it")
        for t in op.outputs:
            what = ("a constant" if t in constant else "an input of the subgraph" if t in inputs
                    else "a tensor another operator writes" if t in written else "")
            if what:
                raise fail(f"operator {oi} ({op.opcode}) of subgraph {si} writes into tensor {t} "
                           f"({sg.tensors[t].name!r}), {what}")
            written.add(t)
            ready.add(t)


def _callees(op: OperatorDef) -> list[int]:
    out: list[int] = []
    for key in _CALLS.get(op.opcode, ()):
        value: Any = op.option(key, 0)
        out.extend(value if isinstance(value, tuple) else (value,))
    return out


def _check_calls(model: TFLiteFile, fail: _Fail) -> None:
    n = len(model.subgraphs)
    graph: dict[int, set[int]] = {}
    for si, sg in enumerate(model.subgraphs):
        graph[si] = set()
        for oi, op in enumerate(sg.operators):
            for callee in _callees(op):
                if not 1 <= callee < n:
                    raise fail(f"operator {oi} ({op.opcode}) of subgraph {si} calls subgraph {callee}; the model "
                               f"has {n} and the main one (0) cannot be called")
                graph[si].add(callee)
            _check_call_arity(model, op, si, f"operator {oi} ({op.opcode}) of subgraph {si}", fail)
    state: dict[int, int] = {}  # 1 visiting, 2 done

    def visit(node: int, path: list[int]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = " -> ".join(map(str, [*path[path.index(nxt):], nxt]))
                raise fail(f"subgraphs call each other in a cycle ({cycle}): loading would recurse forever")
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in range(n):
        if node not in state:
            visit(node, [node])


def _types(sg: SubgraphDef, indices: tuple[int, ...]) -> list[str]:
    return [sg.tensors[i].type if i >= 0 else "absent" for i in indices]


def _check_call_arity(model: TFLiteFile, op: OperatorDef, si: int, where: str, fail: _Fail) -> None:
    """WHILE and IF copy values between their tensors and the called subgraphs' tensors
    as raw bytes: the counts and element types must agree, or the copy runs past a buffer."""
    sgs = model.subgraphs
    nin, nout = len(op.inputs), len(op.outputs)
    caller = sgs[si]
    if op.opcode == "WHILE":
        cond, body = sgs[op.option("cond_subgraph", 0)], sgs[op.option("body_subgraph", 0)]
        if not (nin == nout == len(cond.inputs) == len(body.inputs) == len(body.outputs)) or len(cond.outputs) != 1:
            raise fail(f"{where} carries {nin} values in and {nout} out, its condition takes {len(cond.inputs)} and "
                       f"gives {len(cond.outputs)}, its body takes {len(body.inputs)} and gives {len(body.outputs)}")
        types = {"the loop's inputs": _types(caller, op.inputs), "its outputs": _types(caller, op.outputs),
                 "the condition's inputs": _types(cond, cond.inputs), "the body's inputs": _types(body, body.inputs),
                 "the body's outputs": _types(body, body.outputs)}
    elif op.opcode == "IF":
        types = {"the values it passes": _types(caller, op.inputs[1:]), "its outputs": _types(caller, op.outputs)}
        for key in ("then_subgraph", "else_subgraph"):
            br, name = sgs[op.option(key, 0)], key.split("_")[0]
            if len(br.inputs) != nin - 1 or len(br.outputs) != nout:
                raise fail(f"{where} passes {nin - 1} values and expects {nout}, but its {name} "
                           f"branch takes {len(br.inputs)} and gives {len(br.outputs)}")
            types[f"the {name} branch's inputs"] = _types(br, br.inputs)
            types[f"the {name} branch's outputs"] = _types(br, br.outputs)
        # inputs pair with inputs, outputs with outputs
        _same_types(where, {k: v for k, v in types.items() if "output" not in k}, fail)
        types = {k: v for k, v in types.items() if "output" in k}
    else:
        if op.opcode == "CALL_ONCE":
            init = sgs[op.option("init_subgraph", 0)]
            if init.inputs or init.outputs:
                raise fail(f"{where} runs a subgraph with {len(init.inputs)} inputs and {len(init.outputs)} "
                           "outputs; an initializer has none")
        return
    _same_types(where, types, fail)


def _same_types(where: str, types: dict[str, list[str]], fail: _Fail) -> None:
    (first, expected), *rest = types.items()
    for name, got in rest:
        if got != expected:
            raise fail(f"{where}: {first} are {expected} but {name} are {got}")
