"""Where a format's numbers sit among a model's outputs: SSD's output order, YOLO's raw layout and
boxes/scores roles, and the task a format serves.

Which format a model has is read in :mod:`edgekit.contract.readings` (``read_outputs``,
``recognize_format``, ``detect_format``), once per model by :mod:`edgekit.contract.modelreading`.
Pure numpy; tensors are anything with ``name`` and ``shape`` (:class:`edgekit.runtimes.TensorSpec`,
or the converter's view of a flatbuffer).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, NamedTuple, Sequence, overload

import numpy as np

from edgekit.contract.enums import OutputFormat, Task, YoloLayout
from edgekit.contract.spec import TensorLike
from edgekit.errors import ModelError

__all__ = ["SSD_OP", "task_of", "ssd_order", "yolo_layout", "YoloOutputs", "yolo_outputs"]

SSD_OP = "TFLite_Detection_PostProcess"


def _shapes(outputs: Sequence[TensorLike]) -> list[tuple[int, ...]]:
    return [tuple(int(d) for d in o.shape) for o in outputs]


def _split_pair(shapes: list[tuple[int, ...]]) -> bool:
    """Two outputs, boxes (1, 4, N) and scores (1, C, N), or (1, N, 4) and (1, N, C)."""
    if len(shapes) != 2 or any(len(s) != 3 or s[0] != 1 for s in shapes):
        return False
    a, b = shapes
    return (a[2] == b[2] and 4 in (a[1], b[1]) and a[2] > 4) or (a[1] == b[1] and 4 in (a[2], b[2]) and a[1] > 4)


@overload
def task_of(fmt: OutputFormat) -> Task: ...
@overload
def task_of(fmt: None) -> None: ...
def task_of(fmt: OutputFormat | None) -> Task | None:
    """The task a format serves (None for None)."""
    if fmt is None:
        return None
    return {OutputFormat.CLASSES: Task.CLASSIFY, OutputFormat.SEGMENTATION: Task.SEGMENT,
            OutputFormat.KEYPOINTS: Task.POSE}.get(fmt, Task.DETECT)


def ssd_order(outputs: Sequence[TensorLike]) -> tuple[int, int, int, int]:
    """Indices of boxes, classes, scores and count among four SSD outputs; classes and scores
    are -1 when the names do not tell them apart (the values will, see the decoder).

    Raises:
        ModelError: the outputs are not four, with one (1, N, 4) and one single value.
    """
    shapes = _shapes(outputs)
    boxes = [i for i, s in enumerate(shapes) if len(s) == 3 and s[-1] == 4]
    count = [i for i, s in enumerate(shapes) if int(np.prod(s)) == 1]
    if len(shapes) != 4 or len(boxes) != 1 or len(count) != 1:
        raise ModelError(f"an SSD model has 4 outputs: boxes [1, N, 4], classes [1, N], scores [1, N] and "
                         f"count [1]; this one has {[list(s) for s in shapes]}")
    b, c = boxes[0], count[0]
    rest = [i for i in range(4) if i not in (b, c)]
    # The TF1 op names its outputs NAME, NAME:1, NAME:2, NAME:3 = boxes, classes, scores, count.
    suffix = {i: int(m.group(1)) for i in rest if (m := re.search(r":(\d+)$", outputs[i].name))}
    if len(suffix) == len(rest):
        rest.sort(key=lambda i: suffix[i])
        return b, rest[0], rest[1], c
    return b, -1, -1, c


def yolo_layout(shape: Sequence[int], num_labels: int | None = None) -> YoloLayout:
    """Which raw YOLO layout an output of ``shape`` holds.

    The label count settles it when it fits exactly one reading; otherwise the longer axis
    is the N boxes (thousands, against tens of classes).

    Raises:
        ModelError: the shape is not (1, A, B) with room for a box and one class.
    """
    s = tuple(int(d) for d in shape)
    if len(s) == 2:
        s = (1, *s)
    v8, v5 = len(s) == 3 and s[1] >= 5, len(s) == 3 and s[2] >= 6
    if s[0] != 1 or not (v8 or v5):
        raise ModelError(f"a raw YOLO output must be [1, 4+C, N] or [1, N, 5+C], got {list(shape)}")
    if num_labels and (s[1] == 4 + num_labels) != (s[2] == 5 + num_labels):
        v8, v5 = s[1] == 4 + num_labels, s[2] == 5 + num_labels
    if v8 != v5:
        return YoloLayout.V8 if v8 else YoloLayout.V5
    return YoloLayout.V8 if s[1] < s[2] else YoloLayout.V5


class YoloOutputs(NamedTuple):
    """Where a YOLO model's numbers are: one raw head (``boxes == scores``), or two outputs.

    ``layout`` is the raw head's; for two outputs ``transposed`` says they are (1, N, 4) and
    (1, N, C) rather than (1, 4, N) and (1, C, N), and ``objectness`` that the scores output
    starts with YOLOv5's objectness (a [1, N, 5+C] head split after its boxes).
    """

    boxes: int
    scores: int
    layout: YoloLayout = YoloLayout.V8
    transposed: bool = False
    objectness: bool = False

    @property
    def split(self) -> bool:
        return self.boxes != self.scores


def yolo_outputs(outputs: Sequence[TensorLike], metadata: Mapping[str, Any] | None = None,
                 num_labels: int | None = None) -> YoloOutputs:
    """Which output holds what, for a YOLO model.

    Two outputs are boxes and scores: the metadata's ``detection.outputs`` (``["boxes",
    "scores"]`` in output order) says which is which; else the one whose short side is 4 is
    the boxes (the first, when both are). The scores start with an objectness score when the
    metadata's ``detection.objectness`` is true, or when they are one longer than the labels.

    Raises:
        ModelError: the outputs are neither one raw head nor a boxes/scores pair.
    """
    shapes = _shapes(outputs)
    if len(shapes) == 1:
        return YoloOutputs(0, 0, yolo_layout(shapes[0], num_labels))
    if not _split_pair(shapes):
        raise ModelError(f"a yolo model has one output ([1, 4+C, N] or [1, N, 5+C]) or two (boxes [1, 4, N] and "
                         f"scores [1, C, N]); this one has {len(shapes)}: {[list(s) for s in shapes]}")
    transposed = not (shapes[0][2] == shapes[1][2] and 4 in (shapes[0][1], shapes[1][1]) and shapes[0][2] > 4)
    side = 2 if transposed else 1
    det = (metadata or {}).get("detection")
    roles = det.get("outputs") if isinstance(det, Mapping) else None
    if isinstance(roles, (list, tuple)) and sorted(map(str, roles)) == ["boxes", "scores"]:
        boxes = [str(r) for r in roles].index("boxes")
    else:
        boxes = 0 if shapes[0][side] == 4 else 1
    named = det.get("objectness") if isinstance(det, Mapping) else None
    objectness = bool(named) if named is not None else bool(num_labels and shapes[1 - boxes][side] == num_labels + 1)
    return YoloOutputs(boxes, 1 - boxes, YoloLayout.V8, transposed, objectness)
