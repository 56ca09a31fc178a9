"""Where a detector's boxes lose precision in int8: the decode tail, and the op groups to keep in float.

A YOLO head ends in a few cheap ops that turn the last convolutions' logits into boxes in
pixels: a sigmoid (or YOLOv8's DFL softmax and its fixed 0..15 convolution), the anchor add,
the stride multiply. In int8 each of their tensors has one scale over its whole range: the
logits of the box and score channels share one (their scores' wide range makes it coarse),
and a normalized box in 0..1 gets 1/256 of the image, half a pixel at 128 px, 2.5 px at 640.
Keeping that tail in float, from the convolutions that produce the box logits on, costs two
1x1 convolutions and a few element-wise ops; it is the cheapest candidate the fallback tries
(:func:`tail_groups`), before the layers the per-layer error ranks worst.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from edgekit.runtimes.tflite_file import parse_tflite

__all__ = ["TailGroup", "decode_tail", "tail_groups"]

WEIGHTED = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "BATCH_MATMUL"})
# A weighted op right after one of these is part of the decode (YOLOv8's DFL: a softmax over 16 bins,
# then a fixed convolution by 0..15), not the head's own layer: the walk goes on through it.
DECODE_ENTRY = frozenset({"SOFTMAX"})


@dataclass(frozen=True)
class TailGroup:
    """Ops to keep in float together: a label for the report, their output tensor names."""

    label: str
    tensors: tuple[str, ...]


def decode_tail(model: bytes, output: int) -> tuple[str, ...]:
    """The output tensor names of the ops from model output `output` back to, and including, the
    last weighted ops feeding it (through a DFL softmax's fixed convolution), in graph order."""
    sg = parse_tflite(model, label="the float model").subgraphs[0]
    producer = {t: k for k, op in enumerate(sg.operators) for t in op.outputs}
    todo, seen = [sg.outputs[output]], set()
    while todo:
        t = todo.pop()
        k = producer.get(t)
        if k is None or k in seen:
            continue
        seen.add(k)
        op = sg.operators[k]
        feeds = [i for i in op.inputs if i >= 0 and i in producer]
        if op.opcode in WEIGHTED and not any(sg.operators[producer[i]].opcode in DECODE_ENTRY for i in feeds):
            continue  # the head's own layer: kept, its inputs are the body's
        todo += feeds
    return tuple(sg.tensors[t].name for k in sorted(seen) for t in sg.operators[k].outputs)


def tail_groups(model: bytes, roles: Sequence[str] | None) -> list[TailGroup]:
    """The decode tails to try in float, boxes first: one per output named by `roles` ("boxes",
    "scores"), or the one output of an unsplit head."""
    outputs = len(parse_tflite(model, label="the float model").subgraphs[0].outputs)
    order = ([roles.index("boxes")] + [i for i, r in enumerate(roles) if r != "boxes"]) \
        if roles is not None and "boxes" in roles else list(range(outputs))
    groups: list[TailGroup] = []
    for i in order:
        label = f"{roles[i]} decode tail" if roles is not None else "decode tail"
        groups.append(TailGroup(label, decode_tail(model, i)))
    return groups
