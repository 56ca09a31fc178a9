"""Model outputs -> typed results: SSD post-processed boxes, raw YOLO with NMS, classification.

Small pure functions over dequantized output arrays; :func:`decoder_for` builds the one a
model's reading (:mod:`edgekit.contract.modelreading`: its format, layout, labels and decoder
options, decided once) needs; :func:`make_decoder` reads bare tensors and metadata first::

    decoder = decoder_for(model.reading().with_options(threshold=0.5))
    dets = decoder([model.output(i) for i in range(len(model.outputs))], transform)

Boxes come back in the source frame's pixels through the preprocessing's
:class:`~edgekit.contract.spec.Transform` (stretch or letterbox, exactly inverted). The
converter's accuracy gate calls these same functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from edgekit.contract.enums import BoxFormat, OutputFormat, YoloLayout
from edgekit.contract.modelreading import DEFAULT_IOU, DEFAULT_MAX_DETECTIONS, DEFAULT_THRESHOLD, ModelReading, \
    read_tensors
from edgekit.contract.recognize import YoloOutputs, ssd_order, yolo_outputs
from edgekit.contract.spec import TensorLike, Transform
from edgekit.errors import ModelError
from edgekit.labels import label_for
from edgekit.results import Classes, Detections

if TYPE_CHECKING:
    from edgekit.contract.anchors import AnchorDecoder

__all__ = ["DEFAULT_IOU", "DEFAULT_THRESHOLD", "DEFAULT_MAX_DETECTIONS", "MAX_NMS_CANDIDATES", "Decoder", "decoder_for", "make_decoder", "nms", "batched_nms", "to_xyxy",
           "decode_ssd", "decode_yolo", "decode_classes"]

# Ultralytics' max_nms: the best-scoring candidates NMS looks at. NMS stops at max_detections
# kept boxes, so a long candidate list costs little.
MAX_NMS_CANDIDATES = 30000


def to_xyxy(boxes: np.ndarray, fmt: BoxFormat) -> np.ndarray:
    """(N, 4) boxes in ``fmt`` -> (N, 4) float32 x1, y1, x2, y2."""
    b = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    if fmt is BoxFormat.XYXY:
        return b
    if fmt is BoxFormat.YXYX:
        return b[:, [1, 0, 3, 2]]
    half = b[:, 2:] / 2
    return np.concatenate([b[:, :2] - half, b[:, :2] + half], axis=1)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float = DEFAULT_IOU,
        max_output: int | None = None) -> np.ndarray:
    """Greedy non-maximum suppression: indices of the boxes kept, best score first.

    A box is dropped when its IoU with a better-scoring kept box is above ``iou_threshold``.
    ``boxes`` are (N, 4) x1, y1, x2, y2.
    """
    b = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    order = np.argsort(-np.asarray(scores, dtype=np.float32), kind="stable")
    x1, y1, x2, y2 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    areas = np.maximum(x2 - x1, 0) * np.maximum(y2 - y1, 0)
    keep: list[int] = []
    while order.size and (max_output is None or len(keep) < max_output):
        i, rest = order[0], order[1:]
        keep.append(int(i))
        w = np.maximum(np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]), 0)
        h = np.maximum(np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]), 0)
        inter = w * h
        union = areas[i] + areas[rest] - inter
        iou = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        order = rest[iou <= iou_threshold]
    return np.asarray(keep, dtype=np.int64)


def batched_nms(boxes: np.ndarray, scores: np.ndarray, class_ids: np.ndarray,
                iou_threshold: float = DEFAULT_IOU, max_output: int | None = None) -> np.ndarray:
    """Class-wise NMS: boxes of different classes never suppress each other."""
    b = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)
    if not len(b):
        return np.zeros(0, dtype=np.int64)
    # Shifting each class to its own region makes one NMS pass equal to one pass per class.
    span = float(np.abs(b).max()) + 1.0
    shifted = b + (np.asarray(class_ids, dtype=np.float32) * span)[:, None]
    return nms(shifted, scores, iou_threshold, max_output)


def _detections(xyxy: np.ndarray, scores: np.ndarray, ids: np.ndarray,
                labels: Sequence[str] | None) -> Detections:
    ids = ids.astype(np.int32)
    # Boxes that fall wholly outside the frame (e.g. in letterbox padding) clip to nothing.
    real = (xyxy[:, 2] > xyxy[:, 0]) & (xyxy[:, 3] > xyxy[:, 1])
    xyxy, scores, ids = xyxy[real], scores[real], ids[real]
    return Detections(xyxy, scores, ids, tuple(label_for(labels, int(i)) for i in ids))


def decode_ssd(boxes: np.ndarray, classes: np.ndarray, scores: np.ndarray, count: np.ndarray,
               transform: Transform, *, labels: Sequence[str] | None = None, threshold: float = 0.5) -> Detections:
    """The four outputs of ``TFLite_Detection_PostProcess`` -> detections in source pixels.

    ``boxes`` (1, N, 4) are ymin, xmin, ymax, xmax normalized to the model input.
    """
    n = int(np.clip(np.asarray(count).reshape(-1)[0], 0, np.asarray(scores).size))
    s = np.asarray(scores, dtype=np.float32).reshape(-1)[:n]
    keep = s >= threshold
    yxyx = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)[:n][keep]
    xyxy = transform.normalized_to_source(to_xyxy(yxyx, BoxFormat.YXYX)).astype(np.float32)
    ids = np.rint(np.asarray(classes, dtype=np.float32).reshape(-1)[:n][keep])
    return _detections(xyxy, s[keep], ids, labels)


def _yolo_candidates(outputs: Sequence[np.ndarray], where: YoloOutputs,
                     threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boxes (K, 4) in the model's box format, scores (K,) and class ids (K,) scoring above threshold
    (strictly, as Ultralytics' ``non_max_suppression``: quantized scores often sit exactly on it)."""
    if where.split:
        b = np.asarray(outputs[where.boxes], dtype=np.float32)
        c = np.asarray(outputs[where.scores], dtype=np.float32)
        b, c = b.reshape(b.shape[-2:]), c.reshape(c.shape[-2:])
        if where.transposed:
            b, c = b.T, c.T
        if where.objectness:  # YOLOv5 split after its boxes: objectness, then class scores
            return _with_objectness(b.T, c.T, threshold)
        ids, scores = c.argmax(axis=0), c.max(axis=0)
        keep = np.flatnonzero(scores > threshold)
        return b[:, keep].T, scores[keep], ids[keep]
    a = np.asarray(outputs[where.boxes], dtype=np.float32)
    a = a.reshape(a.shape[-2:])
    if where.layout is YoloLayout.V8:
        cls = a[4:]
        ids, scores = cls.argmax(axis=0), cls.max(axis=0)
        keep = np.flatnonzero(scores > threshold)
        return a[:4, keep].T, scores[keep], ids[keep]
    return _with_objectness(a[:, :4], a[:, 4:], threshold)


def _with_objectness(boxes: np.ndarray, scores: np.ndarray,
                     threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """YOLOv5 rows: boxes (N, 4), then objectness and class scores (N, 1+C); score = objectness * best class."""
    rows = np.flatnonzero(scores[:, 0] > threshold)  # class scores are <= 1, so objectness bounds the score
    cls = scores[rows, 1:]
    ids = cls.argmax(axis=1)
    conf = scores[rows, 0] * cls[np.arange(len(rows)), ids]
    keep = np.flatnonzero(conf > threshold)
    return boxes[rows[keep]], conf[keep], ids[keep]


def decode_yolo(output: np.ndarray | Sequence[np.ndarray], transform: Transform, *,
                layout: YoloLayout | YoloOutputs | None = None, labels: Sequence[str] | None = None,
                threshold: float = 0.25, iou_threshold: float = DEFAULT_IOU,
                box_format: BoxFormat = BoxFormat.CXCYWH, normalized: bool | None = None,
                max_detections: int = 100) -> Detections:
    """A raw YOLO head (dequantized), or its boxes and scores outputs, -> detections in source
    pixels after class-wise NMS.

    Score is the best class score ([1, 4+C, N], or boxes/scores outputs) or objectness times it
    ([1, N, 5+C]); candidates score above ``threshold``. As Ultralytics' ``non_max_suppression``
    then ``scale_boxes``: the best ``MAX_NMS_CANDIDATES``, class-wise NMS (IoU above
    ``iou_threshold`` suppresses) on the boxes in model-input coordinates, at most
    ``max_detections`` kept, then mapped back and clipped.
    ``normalized`` None infers it: boxes whose coordinates stay within 1.5 are taken as
    fractions of the input, others as input pixels.

    Raises:
        ModelError: the output shapes are not a YOLO head (see ``yolo_outputs``).
    """
    outs: list[Any] = list(output) if isinstance(output, (list, tuple)) else [output]
    if isinstance(layout, YoloOutputs):
        where = layout
    else:
        where = yolo_outputs([_Shape(np.shape(o)) for o in outs], None, len(labels) if labels else None)
        if layout is not None and not where.split:
            where = YoloOutputs(0, 0, layout)
    boxes, scores, ids = _yolo_candidates(outs, where, threshold)
    if len(scores) > MAX_NMS_CANDIDATES:
        best = np.argpartition(-scores, MAX_NMS_CANDIDATES)[:MAX_NMS_CANDIDATES]
        boxes, scores, ids = boxes[best], scores[best], ids[best]
    xyxy = to_xyxy(boxes, box_format)
    if normalized is None:
        normalized = not len(xyxy) or float(np.abs(xyxy).max()) <= 1.5
    kept = batched_nms(xyxy, scores, ids, iou_threshold, max_detections)
    xyxy, scores, ids = xyxy[kept], scores[kept], ids[kept]
    mapped = transform.normalized_to_source(xyxy) if normalized else transform.boxes_to_source(xyxy)
    return _detections(mapped.astype(np.float32), scores, ids, labels)


class _Shape:
    """A tensor's shape and name, for a decoder made from shapes alone (a plain class: a
    dataclass costs ~0.7 ms at every import, and only a YOLO decoder from shapes makes one)."""

    __slots__ = ("shape", "name")

    def __init__(self, shape: tuple[int, ...], name: str = "") -> None:
        self.shape = shape
        self.name = name


def decode_classes(scores: np.ndarray, *, labels: Sequence[str] | None = None, top_k: int = 5,
                   threshold: float = 0.0) -> Classes:
    """One score per class -> the ``top_k`` classes scoring at least ``threshold``, best first.

    Scores are reported as the model gives them (dequantized), like ``edgekit classify``:
    a model without a final softmax gives logits, not probabilities.
    """
    s = np.asarray(scores, dtype=np.float32).reshape(-1)
    k = max(0, min(top_k, s.size))
    # Best first; ties: lower id first, on every machine and numpy version. argpartition alone
    # picks *some* of the classes tied at the k-th score (which ones depends on numpy's SIMD
    # path), so every class scoring at least the k-th best is kept (in id order) and sorted stably.
    cand = np.flatnonzero(s >= np.partition(s, s.size - k)[s.size - k]) if 0 < k < s.size else np.arange(s.size)
    top = cand[np.argsort(-s[cand], kind="stable")][:k]
    top = top[s[top] >= threshold]
    return Classes(top, s[top], tuple(label_for(labels, int(i)) for i in top))


@dataclass(frozen=True)
class Decoder:
    """A model's outputs -> :class:`Detections` or :class:`Classes`; built by :func:`make_decoder`."""

    format: OutputFormat
    labels: tuple[str, ...] = ()
    threshold: float = 0.5
    iou_threshold: float = DEFAULT_IOU
    max_detections: int = 100
    top_k: int = 5
    box_format: BoxFormat = BoxFormat.CXCYWH
    normalized: bool | None = None
    yolo: YoloOutputs | None = None
    ssd_order: tuple[int, int, int, int] = (0, 1, 2, 3)  # boxes, classes, scores, count

    def __call__(self, outputs: Sequence[np.ndarray], transform: Transform) -> Detections | Classes:
        if self.format is OutputFormat.CLASSES:
            return decode_classes(outputs[0], labels=self.labels, top_k=self.top_k, threshold=self.threshold)
        if self.format is OutputFormat.YOLO:
            return decode_yolo(list(outputs), transform, layout=self.yolo, labels=self.labels,
                               threshold=self.threshold, iou_threshold=self.iou_threshold,
                               box_format=self.box_format, normalized=self.normalized,
                               max_detections=self.max_detections)
        ib, ic, isc, icount = self.ssd_order
        if ic < 0:  # the output names did not say which is which
            ic, isc = _classes_then_scores(outputs, [i for i in range(4) if i not in (ib, icount)])
        return decode_ssd(outputs[ib], outputs[ic], outputs[isc], outputs[icount], transform,
                          labels=self.labels, threshold=self.threshold)

    def class_count(self, outputs: Sequence[TensorLike]) -> int | None:
        """How many classes a YOLO head of these outputs scores (as :func:`decode_yolo` reads it: the
        rows after the 4 box values, after YOLOv5's objectness too); None for other formats, whose
        outputs do not say (an SSD's count is its postprocess op's ``num_classes``)."""
        if self.format is not OutputFormat.YOLO or self.yolo is None:
            return None
        where = self.yolo
        if where.split:
            s = tuple(int(d) for d in outputs[where.scores].shape)[-2:]
            return (s[1] if where.transposed else s[0]) - int(where.objectness)
        a, b = tuple(int(d) for d in outputs[where.boxes].shape)[-2:]
        return a - 4 if where.layout is YoloLayout.V8 else b - 5


def _classes_then_scores(outputs: Sequence[np.ndarray], pair: list[int]) -> tuple[int, int]:
    # Class ids are whole numbers; scores (almost) never all are.
    whole = [i for i in pair if np.all(np.asarray(outputs[i]) == np.rint(outputs[i]))]
    if len(whole) == 1:
        return whole[0], next(i for i in pair if i != whole[0])
    return pair[0], pair[1]


def make_decoder(outputs: Sequence[TensorLike], metadata: Mapping[str, Any] | None, *,
                 labels: Sequence[str] | None = None, threshold: float | None = None,
                 iou_threshold: float | None = None, max_detections: int | None = None,
                 top_k: int = 5) -> Decoder | AnchorDecoder:
    """The decoder for a model with these outputs and edgekit metadata (None for third-party models):
    :func:`decoder_for` their :func:`~edgekit.contract.modelreading.read_tensors`, with these options.

    ``labels``, ``threshold``, ``iou_threshold`` and ``max_detections`` of None come from the metadata
    (``labels``, ``detection.score_threshold``, ``iou_threshold``, ``max_det``), else none, 0.5, 0.45 and 100.

    Raises:
        ModelError: the output format is unknown or the outputs do not fit it, or the metadata's
            values are not numbers.
        InputError: a threshold is outside [0, 1], or max_detections below 1.
    """
    reading = read_tensors(outputs, metadata).with_options(
        labels=labels, threshold=threshold, iou_threshold=iou_threshold, max_detections=max_detections, top_k=top_k)
    return decoder_for(reading)


def decoder_for(reading: ModelReading) -> Decoder | AnchorDecoder:
    """The decoder of a model's reading: its format, output layout, labels and decoder options.

    Raises:
        ModelError: the format gives no boxes or classes (segmentation, keypoints), the outputs do
            not fit it, or a raw anchor model has no anchor options.
    """
    fmt, d, labs, outputs = reading.format, reading.decoder, reading.labels, reading.outputs
    if fmt is OutputFormat.SSD:
        return Decoder(fmt, labs, d.threshold, max_detections=d.max_detections,
                       ssd_order=reading.ssd_order or ssd_order(outputs))
    if fmt is OutputFormat.YOLO:
        return Decoder(fmt, labs, d.threshold, d.iou_threshold, d.max_detections, box_format=d.box_format,
                       normalized=d.normalized, yolo=reading.yolo)
    if fmt is OutputFormat.ANCHORS:  # raw anchor-based SSD (MediaPipe): options from metadata or a preset
        from edgekit.contract.anchors import anchor_decoder
        from edgekit.contract.readings import EXACT, Reading, anchor_spec
        from edgekit.contract.preprocessing import Provenance

        spec = anchor_spec(Reading(fmt, EXACT, reading.why, reading.preset), reading.metadata.raw)
        given = reading.sources.get("iou_threshold", Provenance.CONVENTION) is not Provenance.CONVENTION
        return anchor_decoder(outputs, spec, labels=labs, threshold=d.threshold,
                              iou_threshold=d.iou_threshold if given else None, max_detections=d.max_detections)
    if fmt in (OutputFormat.SEGMENTATION, OutputFormat.KEYPOINTS):
        other = "Segmenter (`edgekit segment`)" if fmt is OutputFormat.SEGMENTATION else "PoseEstimator (`edgekit pose`)"
        raise ModelError(f"a {fmt.value} model gives no boxes or classes: read it with {other}")
    if len(outputs) != 1:
        raise ModelError(f"a {fmt.value} model has one output; this one has {len(outputs)}: "
                         f"{[list(o.shape) for o in outputs]}")
    return Decoder(fmt, labs, d.threshold, top_k=d.top_k)
