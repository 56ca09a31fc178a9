"""How a model's outputs read, with the evidence, and a refusal where two readings stay possible.

Shapes alone misread: DeepLab's int64 [1, 513, 513] arg-max map has the shape of a raw YOLO
head, MoveNet's multi-pose [1, 6, 56] too. Every reading here is weighed on the outputs' shapes
*and* types (integers that are not quantized are ids, never scores or boxes), the model's input
size and labels where known, and the graph's ops::

    reading = read_outputs(model.outputs, model.metadata, inputs=model.inputs, labels=labels)
    reading.format, reading.why        # OutputFormat.SEGMENTATION, "arg-max map int64[1, 513, 513]"

A reading that fits the outputs exactly (strength 2) beats one that is only possible (1); two
of the same strength are refused with the metadata value (``edgekit meta``) that settles it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from edgekit.contract.enums import OutputFormat, Task
from edgekit.contract.keypoints import PoseLayout, pose_layout, pose_layout_of
from edgekit.contract.recognize import SSD_OP, _split_pair, task_of, yolo_layout
from edgekit.contract.segmentation import SegmentationLayout, segmentation_layout
from edgekit.contract.spec import TensorLike
from edgekit.errors import ModelError

if TYPE_CHECKING:
    from edgekit.contract.anchors import AnchorSpec

__all__ = ["Reading", "AmbiguousOutputsError", "candidates", "read_outputs", "recognize_format", "detect_format",
           "anchor_spec", "implausible", "EXACT", "POSSIBLE"]

EXACT, POSSIBLE = 2, 1
YOLO_STRIDES = ((8, 16, 32), (8, 16, 32, 64))  # P5 and P6 heads


class AmbiguousOutputsError(ModelError):
    """The outputs read two ways equally well; the metadata must say which (exit 2)."""


class Reading(NamedTuple):
    """One way to read a model's outputs, and why."""

    format: OutputFormat
    strength: int  # EXACT or POSSIBLE
    why: str
    preset: str | None = None  # the anchor preset a raw anchor model matched


def _shape(o: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in o.shape)


def _dtype(o: Any) -> np.dtype | None:
    """A tensor's numpy type: TensorSpec's ``dtype``, or a flatbuffer TensorDef's ``type`` name."""
    raw = getattr(o, "dtype", None)
    if raw is None:
        raw = getattr(o, "type", None)
    try:
        return None if raw is None else np.dtype(raw)
    except TypeError:
        return None


def _quantized(o: Any) -> bool:
    q = getattr(o, "quantized", None)
    if q is not None:
        return bool(q)
    return any(float(x) != 0.0 for x in (getattr(o, "scale", ()) or ()))


def _integer_ids(o: Any) -> bool:
    """Integers that are not quantized: class ids or counts, never scores or boxes."""
    dtype = _dtype(o)
    return dtype is not None and bool(np.issubdtype(dtype, np.integer)) and not _quantized(o)


def _spec(o: Any) -> str:
    dtype = _dtype(o)
    return f"{dtype.name if dtype is not None else ''}{list(_shape(o))}"


def _grid_rows(inputs: Sequence[Any]) -> set[int]:
    """Row counts a YOLO head of this input size has: grid cells summed over its strides (x1, x3 anchors)."""
    if len(inputs) != 1:
        return set()
    s = _shape(inputs[0])
    if len(s) != 4:
        return set()
    h, w = (s[1], s[2]) if s[3] in (1, 3) else (s[2], s[3])
    rows = set()
    for strides in YOLO_STRIDES:
        n = sum(-(-h // st) * -(-w // st) for st in strides)
        rows |= {n, 3 * n}
    return rows


def _map_fits(hw: tuple[int, ...], inputs: Sequence[Any]) -> bool:
    """A per-pixel map keeps the input's proportions (within 1.5x; within 4x when the input is unknown)."""
    h, w = hw
    aspect = w / h
    ins = _shape(inputs[0]) if len(inputs) == 1 else ()
    if len(ins) == 4:
        ih, iw = (ins[1], ins[2]) if ins[3] in (1, 3) else (ins[2], ins[3])
        return 1 / 1.5 <= aspect / (iw / ih) <= 1.5
    return 1 / 4 <= aspect <= 4


def _yolo_single(o: Any, labels: int | None, inputs: Sequence[Any]) -> Reading | None:
    s = _shape(o)
    if len(s) != 3 or s[0] != 1 or min(s[1:]) < 5 or _integer_ids(o):
        return None
    small, large = min(s[1:]), max(s[1:])
    if labels and (s[1] == 4 + labels or s[2] in (4 + labels, 5 + labels)):
        return Reading(OutputFormat.YOLO, EXACT, f"YOLO layout {list(s)} ({labels} labels: 4+C or 5+C values a box)")
    if large in _grid_rows(inputs):
        return Reading(OutputFormat.YOLO, EXACT, f"YOLO layout {list(s)} ({large} rows: the grid cells of the input)")
    if large >= 2 * small:  # boxes outnumber the values per box
        return Reading(OutputFormat.YOLO, POSSIBLE, f"YOLO layout {list(s)}")
    return None


def _anchors(outputs: Sequence[Any], meta: Mapping[str, Any], inputs: Sequence[Any]) -> Reading | None:
    if len(outputs) != 2 or any(_integer_ids(o) for o in outputs):
        return None
    shapes = [_shape(o) for o in outputs]
    if any(len(s) != 3 or s[0] != 1 for s in shapes) or shapes[0][1] != shapes[1][1]:
        return None
    boxes, scores = sorted(shapes, key=lambda s: -s[2])
    n = boxes[1]
    if meta.get("anchors") is not None:
        return Reading(OutputFormat.ANCHORS, EXACT, f"raw anchors {list(boxes)} + scores {list(scores)}, "
                       "anchor options in the metadata")
    from edgekit.contract.anchors import ANCHOR_PRESETS  # here: a model of two such outputs is rare, the presets cost

    for name, spec in ANCHOR_PRESETS.items():
        if n == len(spec.anchor_boxes) and boxes[2] == spec.decode.num_coords and scores[2] == 1:
            return Reading(OutputFormat.ANCHORS, EXACT, f"MediaPipe anchors {list(boxes)} + {list(scores)} "
                           f"({name}: {n} anchors)", name)
    if boxes[2] > 4 and scores[2] < boxes[2] and not _split_pair(shapes):  # box + keypoints per anchor
        return Reading(OutputFormat.ANCHORS, POSSIBLE, f"raw anchors {list(boxes)} + scores {list(scores)}")
    rows = _grid_rows(inputs)
    if boxes[2] == 4 and rows and n not in rows:  # boxes and scores, but not one row per YOLO grid cell
        return Reading(OutputFormat.ANCHORS, POSSIBLE, f"raw anchors {list(boxes)} + scores {list(scores)} "
                       f"({n} rows: no YOLO grid of the input)")
    return None


def candidates(outputs: Sequence[Any], metadata: Mapping[str, Any] | None = None, *, inputs: Sequence[Any] = (),
               ops: Iterable[str] = (), labels: int | None = None) -> list[Reading]:
    """Every way the outputs could be read, strongest first (the metadata's ``output_format`` is not consulted)."""
    meta = metadata or {}
    shapes = [_shape(o) for o in outputs]
    out: list[Reading] = []
    if SSD_OP in set(ops):
        out.append(Reading(OutputFormat.SSD, EXACT, f"SSD postprocess op ({SSD_OP})"))
    elif len(shapes) == 4 and sum(len(s) == 3 and s[-1] == 4 for s in shapes) == 1 \
            and sum(int(np.prod(s)) == 1 for s in shapes) == 1:
        out.append(Reading(OutputFormat.SSD, EXACT, "four outputs: boxes [1, N, 4], classes, scores, count"))
    if len(outputs) == 1:
        o, s = outputs[0], shapes[0]
        seg = segmentation_layout(s, _dtype(o) or np.float32, _quantized(o))
        if seg is not None and _map_fits(s[1:3], inputs):
            why = {SegmentationLayout.CLASS_MAP: "arg-max map", SegmentationLayout.SCORES: "per-class scores",
                   SegmentationLayout.FOREGROUND: "foreground scores"}[seg]
            out.append(Reading(OutputFormat.SEGMENTATION, EXACT, f"{why} {_spec(o)}"))
        pose = pose_layout(s)
        if pose is not None and not _integer_ids(o):
            kind = "single pose" if pose is PoseLayout.SINGLE else "multi pose"
            out.append(Reading(OutputFormat.KEYPOINTS, EXACT, f"MoveNet {kind} {list(s)}"))
        yolo = _yolo_single(o, labels, inputs)
        if yolo is not None:
            out.append(yolo)
        if len(s) >= 1 and (int(np.prod(s)) == max(s) > 1 or (len(s) == 2 and s[0] == 1)) and not _integer_ids(o):
            out.append(Reading(OutputFormat.CLASSES, EXACT, f"one row of {int(np.prod(s))} class scores {list(s)}"))
    if pose_layout_of(shapes) is PoseLayout.HAND and not any(_integer_ids(o) for o in outputs):
        out.append(Reading(OutputFormat.KEYPOINTS, EXACT, "MediaPipe hand landmarks [1, 63] + presence [1, 1] + "
                           "handedness [1, 1] + world [1, 63]"))
    if _split_pair(shapes) and not any(_integer_ids(o) for o in outputs):
        grid = max(max(s[1:]) for s in shapes) in _grid_rows(inputs)
        out.append(Reading(OutputFormat.YOLO, EXACT if grid else POSSIBLE,
                           f"YOLO boxes and scores {[list(s) for s in shapes]}"
                           + (" (one row per grid cell of the input)" if grid else "")))
    anchors = _anchors(outputs, meta, inputs)
    if anchors is not None:
        out.append(anchors)
    out.sort(key=lambda r: -r.strength)
    return out


def read_outputs(outputs: Sequence[Any], metadata: Mapping[str, Any] | None = None, *, inputs: Sequence[Any] = (),
                 ops: Iterable[str] = (), labels: int | None = None, task: Task | str | None = None) -> Reading:
    """The one reading of a model's outputs: the metadata's ``output_format`` when it names one,
    else the strongest candidate among those serving ``task`` (or the metadata's ``task``).

    Raises:
        ModelError: the metadata names an unknown format or task, or no reading fits the outputs.
        AmbiguousOutputsError: two readings fit equally well (the message names the metadata
            value and the command that settle it).
    """
    meta = metadata or {}
    shapes = [list(_shape(o)) for o in outputs]
    named = meta.get("output_format")
    if named:
        fmt = OutputFormat.from_metadata(named, "output_format")
        return Reading(fmt, EXACT, f"metadata output_format {fmt.value!r}")
    wanted = task if task is not None else meta.get("task")
    if wanted is not None:
        try:
            wanted = Task.parse(str(getattr(wanted, "value", wanted)))
        except Exception:  # noqa: BLE001
            raise ModelError(f"unknown task {wanted!r}; edgekit has {', '.join(t.value for t in Task)}") from None
    found = candidates(outputs, meta, inputs=inputs, ops=ops, labels=labels)
    fitting = [r for r in found if wanted is None or task_of(r.format) is wanted]
    if not fitting:
        if found and wanted is not None:
            best = found[0]
            raise ModelError(f"this model is not a {_TASK_NOUN[wanted]}: its outputs {shapes} read as "
                             f"{best.format.value} ({best.why}); use `edgekit {_COMMAND[task_of(best.format)]}`")
        raise ModelError(f"cannot tell how to read this model's outputs {[_spec(o) for o in outputs]}: edgekit reads "
                         "SSD (boxes, classes, scores, count), raw YOLO ([1, 4+C, N] or [1, N, 5+C], float or "
                         "quantized), classification ([1, C]), segmentation ([1, H, W] class ids or [1, H, W, C] "
                         "scores), MoveNet keypoints ([1, 1, K, 3], [1, P, 56]), MediaPipe hand landmarks and raw anchors "
                         "([1, N, 4+2K] + [1, N, C]). Set \"output_format\" in its metadata: "
                         "`edgekit meta MODEL --output-format FORMAT`.")
    top = [r for r in fitting if r.strength == fitting[0].strength]
    formats = {r.format for r in top}
    if len(formats) > 1:
        ways = " or ".join(f"{r.format.value} ({r.why})" for r in top)
        fixes = " / ".join(f"--output-format {r.format.value}" for r in top)
        raise AmbiguousOutputsError(f"this model's outputs {shapes} read two ways: {ways}. edgekit will not guess; "
                                    f"say which with `edgekit meta MODEL {fixes}` (or the metadata's "
                                    "\"output_format\").")
    return top[0]


def recognize_format(outputs: Sequence[TensorLike], metadata: Mapping[str, Any] | None = None, *,
                     ops: Iterable[str] = (), inputs: Sequence[TensorLike] = ()) -> OutputFormat | None:
    """The output format named in the metadata, else the one the outputs' shapes (and the
    graph's ``ops``, when known) show; None when they fit none.

    SSD: four outputs, one (1, N, 4) and one with a single value (the count), or the
    ``TFLite_Detection_PostProcess`` op. YOLO: one output (1, A, B) with A and B at least 5,
    or two outputs, boxes (1, 4, N) and scores (1, C, N) (either transposed). CLASSES: one
    output holding one row of scores ([1, C], [C], [1, 1, 1, C]; [1, 1] is one sigmoid). And
    SEGMENTATION, KEYPOINTS, ANCHORS; integer outputs that are not quantized are ids, never
    scores or boxes; a model that reads two ways equally well is None (see
    :func:`read_outputs`, which says why). For users' scripts: edgekit itself reads a model once,
    with :func:`edgekit.contract.modelreading.read_model`.

    Raises:
        ModelError: the metadata names a format edgekit does not read.
    """
    named = (metadata or {}).get("output_format")
    if named:
        return OutputFormat.from_metadata(named, "output_format")
    try:  # a model that reads two ways, or none, is no format here
        return read_outputs(outputs, metadata, ops=ops, inputs=inputs).format
    except ModelError:
        return None


def detect_format(outputs: Sequence[TensorLike], metadata: Mapping[str, Any] | None = None, *,
                  ops: Iterable[str] = (), inputs: Sequence[TensorLike] = ()) -> OutputFormat:
    """:func:`recognize_format`, for a model that must have a known format.

    Raises:
        ModelError: the metadata names an unknown format, or the outputs match none.
        AmbiguousOutputsError: (a ModelError) the outputs read two ways equally well.
    """
    return read_outputs(outputs, metadata, ops=ops, inputs=inputs).format  # says why: no reading fits, or two do


_TASK_NOUN = {Task.CLASSIFY: "classifier", Task.DETECT: "detector", Task.SEGMENT: "segmenter", Task.POSE: "pose model"}
_COMMAND = {Task.CLASSIFY: "classify", Task.DETECT: "detect", Task.SEGMENT: "segment", Task.POSE: "pose"}


def anchor_spec(reading: Reading, metadata: Mapping[str, Any] | None) -> AnchorSpec:
    """The anchor options a raw anchor model is read with: its metadata's, else the preset it matched.

    Raises:
        ModelError: neither (the message says how to write them).
    """
    from edgekit.contract.anchors import ANCHOR_PRESETS, AnchorSpec

    spec = AnchorSpec.from_metadata(metadata)
    if spec is not None:
        return spec
    if reading.preset is not None:
        return ANCHOR_PRESETS[reading.preset]
    raise ModelError(f"this model has raw anchor outputs ({reading.why}) but no anchor options; write them with "
                     f"`edgekit meta MODEL --anchors PRESET|FILE.json` (presets: {', '.join(ANCHOR_PRESETS)})")


def implausible(fmt: OutputFormat, outputs: Sequence[np.ndarray], *, quantized: bool = False) -> str | None:
    """Why these output values (dequantized, from a real inference) cannot be ``fmt``'s, or None.

    Shapes and types can agree by chance; values seldom do: a float YOLO head's class scores are
    in [0, 1] (a quantized one may hold them in its boxes' scale, which the converter warns of),
    MoveNet's keypoints are fractions of the input with scores in [0, 1], a class map holds ids
    >= 0, and nothing is NaN.
    """
    arrays = [np.asarray(a) for a in outputs]
    if any(a.dtype.kind == "f" and not np.all(np.isfinite(a)) for a in arrays):
        return "the outputs hold NaN or infinite values"
    if fmt is OutputFormat.YOLO and len(arrays) == 1 and arrays[0].ndim == 3 and not quantized:
        from edgekit.contract.enums import YoloLayout

        a = arrays[0][0].astype(np.float32)
        scores = a[4:] if yolo_layout(arrays[0].shape) is YoloLayout.V8 else a[:, 4:]
        if scores.size and (scores.min() < -0.01 or scores.max() > 1.01):
            return (f"its scores run from {scores.min():.3g} to {scores.max():.3g}, where a YOLO head's are "
                    "0..1 (after the sigmoid)")
    if fmt is OutputFormat.KEYPOINTS and pose_layout_of([a.shape for a in arrays]) is PoseLayout.HAND:
        presence = arrays[1].astype(np.float32)
        if presence.min() < -0.01 or presence.max() > 1.01:
            return f"its hand presence is {presence.min():.3g}, not a probability as MediaPipe's"
    elif fmt is OutputFormat.KEYPOINTS and arrays:
        a = arrays[0].astype(np.float32)
        if a.ndim == 4:  # [1, 1, K, 3]: y, x, score
            yx, scores = a[..., :2], a[..., 2]
        else:  # [1, P, 56]: 17 x (y, x, score), box, score
            k = a[..., :51].reshape(-1, 17, 3)
            yx, scores = k[..., :2], np.concatenate([k[..., 2].ravel(), a[..., 55].ravel()])
        if scores.size and (scores.min() < -0.01 or scores.max() > 1.01):
            return f"keypoint scores run from {scores.min():.3g} to {scores.max():.3g}, not 0..1 as MoveNet's"
        if yx.size and (yx.min() < -1.0 or yx.max() > 2.0):
            return f"keypoint coordinates run from {yx.min():.3g} to {yx.max():.3g}, not fractions of the input"
    if fmt is OutputFormat.SEGMENTATION and arrays and arrays[0].dtype.kind in "iu" and arrays[0].size:
        if int(arrays[0].min()) < 0:
            return f"a class map holds class ids >= 0; this one holds {int(arrays[0].min())}"
    return None
