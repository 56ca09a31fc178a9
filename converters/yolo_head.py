"""The YOLO collapse: boxes and scores in one output share one int8 scale.

An Ultralytics-style head ends in one tensor [1, 4+C, N]: box coordinates (in input pixels,
0..640) and class scores (0..1) concatenated. Int8 gives the whole tensor one scale, about
640/255 = 2.5 here, so every score rounds to 0 or 2.5: the detector's mAP falls to near zero
without a word. The fix is to split the head before that concatenation, so that boxes and
scores are two outputs, each with its own scale; the device reads them as a pair (metadata
``detection.outputs``, see :mod:`edgekit.contract`).

Here: the audit finding (how many distinct levels the scores keep under one shared scale),
the split of an ONNX graph or a Keras model at the final concatenation, which converted output
is which, and the merge back into one [N, 4+C, A] array for comparisons with the float model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["HeadSplit", "mixed_head_levels", "collapse_warning", "split_onnx_head", "split_keras_head",
           "output_roles", "merge_split", "BOXES", "SCORES"]

BOXES, SCORES = "boxes", "scores"
MIN_LEVELS = 32  # fewer distinct score levels than this and ranking by score stops working


@dataclass(frozen=True)
class HeadSplit:
    """A YOLO head split before its final concatenation: boxes [1, 4, N] and scores [1, C, N].

    ``axis``: the axis of the original output that held 4 + C (1 for [1, 4+C, N]).
    """

    num_classes: int
    axis: int
    where: str  # the node or layer that concatenated them, for the report


def mixed_head_levels(raw: np.ndarray) -> tuple[int, float] | None:
    """For raw [n, 4+C, A] outputs (over samples) that mix boxes and scores: how many distinct
    values the scores keep when the whole tensor gets one int8 scale, and that scale.

    None when the output does not look like a mixed head (scores outside 0..1, or boxes on the
    scores' scale already: normalized boxes quantize well together with scores).
    """
    a = np.asarray(raw, np.float32)
    if a.ndim != 3 or a.shape[1] < 5 or a.shape[1] >= a.shape[2]:
        return None
    boxes, scores = a[:, :4], a[:, 4:]
    if scores.min() < -1e-3 or scores.max() > 1 + 1e-3:
        return None
    lo, hi = min(float(a.min()), 0.0), max(float(a.max()), 0.0)
    scale = (hi - lo) / 255.0
    if scale <= 0 or float(np.abs(boxes).max()) <= 4 * max(float(scores.max()), 1e-6):
        return None
    levels = np.unique(np.round((scores - lo) / scale)).size
    return int(levels), scale


def collapse_warning(raw: np.ndarray, fixed: bool) -> str | None:
    """The audit finding for a mixed head, or None when the scores keep enough levels."""
    found = mixed_head_levels(raw)
    if found is None or found[0] >= MIN_LEVELS:
        return None
    levels, scale = found
    what = (f"boxes and scores share one int8 scale: scores keep {levels} distinct levels "
            f"(one step is {scale:.3g}, scores run 0..1)")
    if fixed:
        return f"{what}; fixed: the head is split into boxes and scores outputs, each with its own scale"
    return (f"{what}, so int8 detections collapse. Drop --no-split-head to split the head into boxes and "
            "scores outputs")


# --- ONNX ------------------------------------------------------------------------------------------
_PASS_THROUGH = ("Transpose", "Identity")


def split_onnx_head(model: Any) -> tuple[Any, HeadSplit] | None:
    """A copy of the ONNX `model` whose one output [1, 4+C, N] (or [1, N, 4+C]) is replaced by
    outputs ``boxes`` and ``scores`` taken before the final Concat; None when it does not end so.

    Transposes and Identities between the Concat and the output are applied to each part.
    """
    import onnx
    from onnx import helper, shape_inference

    g = model.graph
    if len(g.output) != 1:
        return None
    dims = [d.dim_value for d in g.output[0].type.tensor_type.shape.dim]
    if len(dims) != 3:
        return None
    inferred = shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)}
    producer = {o: n for n in g.node for o in n.output}
    chain = []
    node = producer.get(g.output[0].name)
    while node is not None and node.op_type in _PASS_THROUGH:
        chain.append(node)
        node = producer.get(node.input[0])
    if node is None or node.op_type != "Concat":
        return None
    rank = len(shapes.get(node.output[0], []))
    axis = next(a.i for a in node.attribute if a.name == "axis")
    axis = axis + rank if axis < 0 else axis
    sizes = [shapes.get(i, [0] * rank)[axis] if len(shapes.get(i, [])) == rank else 0 for i in node.input]
    if rank != 3 or any(s <= 0 for s in sizes):
        return None
    cut = np.cumsum(sizes)
    if 4 not in cut or cut[-1] <= 4:
        return None
    k = int(np.where(cut == 4)[0][0]) + 1
    groups = {BOXES: list(node.input[:k]), SCORES: list(node.input[k:])}
    out_axis = axis
    for t in reversed(chain):  # the output axis the concat axis ends up on
        if t.op_type == "Transpose":
            perm = list(next(a.ints for a in t.attribute if a.name == "perm"))
            out_axis = perm.index(out_axis)
    new = onnx.ModelProto()
    new.CopyFrom(model)
    ng = new.graph
    out_name = ng.output[0].name
    del ng.output[:]
    for role, parts in groups.items():
        name = parts[0]
        if len(parts) > 1:
            name = f"edgekit_{role}_concat"
            ng.node.append(helper.make_node("Concat", parts, [name], axis=axis, name=name))
        for t in reversed(chain):
            out = f"edgekit_{role}_{t.name or t.op_type}"
            ng.node.append(helper.make_node(t.op_type, [name], [out], name=out,
                                            **{a.name: helper.get_attribute_value(a) for a in t.attribute}))
            name = out
        final = helper.make_node("Identity", [name], [role], name=f"edgekit_{role}")
        ng.node.append(final)
        size = 4 if role == BOXES else int(cut[-1]) - 4
        shape = list(dims)
        shape[out_axis] = size
        ng.output.append(helper.make_tensor_value_info(role, g.output[0].type.tensor_type.elem_type, shape))
    _prune(ng, out_name)
    return new, HeadSplit(int(cut[-1]) - 4, out_axis, f"ONNX node {node.name or 'Concat'!r}")


def _prune(graph: Any, dropped_output: str) -> None:
    """Remove nodes whose outputs nothing uses any more (the old concat and what followed it)."""
    while True:
        used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        dead = [i for i, n in enumerate(graph.node) if not any(o in used for o in n.output)]
        if not dead:
            return
        for i in reversed(dead):
            del graph.node[i]


# --- Keras -----------------------------------------------------------------------------------------
def split_keras_head(model: Any) -> tuple[Any, HeadSplit] | None:
    """A Keras model sharing `model`'s layers whose outputs are boxes and scores, taken before its
    final Concatenate layer; None when `model` does not end in one that splits 4 + C."""
    import keras  # already imported by the caller's source loader
    outputs = list(model.outputs or [])
    if len(outputs) != 1 or len(outputs[0].shape) != 3:
        return None
    last = getattr(outputs[0], "_keras_history", None)
    layer = last[0] if last else None
    if layer is None or type(layer).__name__ != "Concatenate":
        return None
    parts = list(layer.input)
    axis = layer.axis + 3 if layer.axis < 0 else layer.axis
    sizes = [int(p.shape[axis] or 0) for p in parts]
    cut = np.cumsum(sizes)
    if 4 not in cut or cut[-1] <= 4 or axis == 0:
        return None
    k = int(np.where(cut == 4)[0][0]) + 1
    join = keras.layers.Concatenate(axis=axis)
    boxes = parts[0] if k == 1 else join(parts[:k])
    scores = parts[k] if len(parts) == k + 1 else keras.layers.Concatenate(axis=axis)(parts[k:])
    split = keras.Model(model.inputs, [boxes, scores], name=f"{model.name}_split")
    return split, HeadSplit(int(cut[-1]) - 4, axis, f"Keras layer {layer.name!r}")


# --- after conversion ------------------------------------------------------------------------------
def output_roles(outputs: Sequence[np.ndarray], reference: np.ndarray, axis: int) -> tuple[str, str]:
    """Which of two converted outputs is boxes and which scores, by comparing their values with
    the float reference's rows (same input): ``("boxes", "scores")`` or ``("scores", "boxes")``.
    """
    ref = np.asarray(reference, np.float32)
    want_b, want_s = np.take(ref, range(4), axis=axis), np.take(ref, range(4, ref.shape[axis]), axis=axis)

    def err(a: np.ndarray, b: np.ndarray) -> float:
        a = np.asarray(a, np.float32)
        return float(np.mean(np.abs(a - b))) if a.shape == b.shape else float("inf")

    first, second = outputs
    straight = err(first, want_b) + err(second, want_s)
    swapped = err(first, want_s) + err(second, want_b)
    return (BOXES, SCORES) if straight <= swapped else (SCORES, BOXES)


def merge_split(arrays: Sequence[np.ndarray], roles: Sequence[str], axis: int) -> np.ndarray:
    """Boxes and scores arrays (n, 4, A) and (n, C, A) back into one (n, 4+C, A) array (or along
    the last axis, ``axis`` 2, for the transposed layout); the sample axis stands where the batch was."""
    by = dict(zip(roles, arrays))
    return np.concatenate([by[BOXES], by[SCORES]], axis=axis)
