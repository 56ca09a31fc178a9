"""Raw anchor-based SSD outputs (MediaPipe style) -> boxes and keypoints (numpy only).

Models such as MediaPipe's face and palm detectors end before their post-processing: one
output holds, per anchor, box offsets and keypoints (``[1, N, num_coords]``), another the class
scores (``[1, N, C]``). Reading them needs the anchors, generated as MediaPipe's
``SsdAnchorsCalculator`` does (:class:`SsdAnchorOptions`), and the decoding settings of its
``TensorsToDetectionsCalculator`` and ``NonMaxSuppressionCalculator``
(:class:`AnchorDecodeOptions`). Both travel in the model's edgekit metadata under
``"anchors"`` (:meth:`AnchorSpec.to_metadata`)::

    spec = AnchorSpec.from_metadata(model.metadata) or ANCHOR_PRESETS["face-short-range"]
    decoded = decode_anchors(raw_boxes, raw_scores, spec, transform)
    decoded.xyxy, decoded.scores, decoded.keypoints      # in the source frame's pixels
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, NamedTuple

import numpy as np

from edgekit.contract._mapping import PixelMapping, normalized_points_to_source
from edgekit.contract.enums import Choice, OutputFormat
from edgekit.errors import InputError, ModelError

if TYPE_CHECKING:
    from edgekit.results import Detections

__all__ = ["BoxCoding", "NmsAlgorithm", "SsdAnchorOptions", "AnchorDecodeOptions", "AnchorSpec", "AnchorDecoded",
           "ANCHOR_PRESETS", "generate_anchors", "decode_anchor_boxes", "anchor_scores", "suppress",
           "decode_anchors", "AnchorDecoder", "anchor_decoder"]


class BoxCoding(Choice):
    """The order of a raw box (and keypoint) in the location tensor (MediaPipe's ``box_format``)."""

    YXHW = "yxhw"  # y_center, x_center, h, w; keypoints y, x (MediaPipe's default)
    XYWH = "xywh"  # x_center, y_center, w, h; keypoints x, y (``reverse_output_order: true``)
    XYXY = "xyxy"  # xmin, ymin, xmax, ymax as offsets from the anchor; keypoints x, y


class NmsAlgorithm(Choice):
    PLAIN = "plain"  # keep the best box, drop those overlapping it
    WEIGHTED = "weighted"  # the best box becomes the score-weighted mean of those overlapping it


@dataclass(frozen=True)
class SsdAnchorOptions:
    """MediaPipe's ``SsdAnchorsCalculatorOptions`` (the fields for generated anchors).

    Raises:
        InputError: a field is out of range, or neither strides nor feature-map sizes are given.
    """

    input_size_width: int
    input_size_height: int
    min_scale: float
    max_scale: float
    num_layers: int
    strides: tuple[int, ...] = ()
    feature_map_width: tuple[int, ...] = ()
    feature_map_height: tuple[int, ...] = ()
    aspect_ratios: tuple[float, ...] = (1.0,)
    anchor_offset_x: float = 0.5
    anchor_offset_y: float = 0.5
    reduce_boxes_in_lowest_layer: bool = False
    interpolated_scale_aspect_ratio: float = 1.0
    fixed_anchor_size: bool = False

    def __post_init__(self) -> None:
        for name in ("strides", "feature_map_width", "feature_map_height", "aspect_ratios"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if self.input_size_width < 1 or self.input_size_height < 1 or self.num_layers < 1:
            raise InputError(f"anchor options need a positive input size and num_layers, got "
                             f"{self.input_size_width}x{self.input_size_height}, {self.num_layers} layers")
        # Strides group the layers (consecutive equal strides share a grid) even where
        # feature-map sizes are given, as in MediaPipe.
        if len(self.strides) != self.num_layers or min(self.strides, default=0) < 1:
            raise InputError(f"anchor options need one positive stride per layer ({self.num_layers}), got "
                             f"{list(self.strides)}")
        if self.feature_map_height and (len(self.feature_map_height) != self.num_layers
                                        or len(self.feature_map_width) != self.num_layers):
            raise InputError(f"anchor options give {len(self.feature_map_width)} x {len(self.feature_map_height)} "
                             f"feature-map sizes for {self.num_layers} layers")
        if not self.reduce_boxes_in_lowest_layer and not self.aspect_ratios:
            raise InputError("anchor options need at least one aspect ratio")


@dataclass(frozen=True)
class AnchorDecodeOptions:
    """MediaPipe's ``TensorsToDetectionsCalculatorOptions`` and NMS settings, as edgekit reads them.

    Raises:
        InputError: a scale is not positive, or a threshold is outside [0, 1].
    """

    x_scale: float
    y_scale: float
    w_scale: float
    h_scale: float
    box_coding: BoxCoding = BoxCoding.YXHW
    box_coord_offset: int = 0
    num_keypoints: int = 0
    keypoint_coord_offset: int = 4
    num_values_per_keypoint: int = 2
    apply_exponential_on_box_size: bool = False
    sigmoid_score: bool = True
    score_clipping_thresh: float | None = None
    min_score_thresh: float = 0.5
    nms: NmsAlgorithm = NmsAlgorithm.WEIGHTED
    iou_threshold: float = 0.3
    max_results: int = 100

    def __post_init__(self) -> None:
        object.__setattr__(self, "box_coding", BoxCoding.parse(self.box_coding))
        object.__setattr__(self, "nms", NmsAlgorithm.parse(self.nms))
        if min(self.x_scale, self.y_scale, self.w_scale, self.h_scale) <= 0:
            raise InputError("x_scale, y_scale, w_scale and h_scale must be positive (the input size, for "
                             "MediaPipe's detectors)")
        for name in ("min_score_thresh", "iou_threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InputError(f"{name} must be between 0 and 1, got {getattr(self, name)}")

    @property
    def num_coords(self) -> int:
        """The least values per anchor the location tensor must hold."""
        return max(self.box_coord_offset + 4,
                   self.keypoint_coord_offset + self.num_keypoints * self.num_values_per_keypoint
                   if self.num_keypoints else 0)


@dataclass(frozen=True)
class AnchorSpec:
    """Everything needed to read a raw anchor-based detector."""

    anchors: SsdAnchorOptions
    decode: AnchorDecodeOptions
    _cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @property
    def anchor_boxes(self) -> np.ndarray:
        """float32 (N, 4) x_center, y_center, w, h normalized to the input (generated once)."""
        if "anchors" not in self._cache:
            self._cache["anchors"] = generate_anchors(self.anchors)
        return self._cache["anchors"]

    def to_metadata(self) -> dict[str, Any]:
        """JSON-ready: ``{"ssd": {...}, "decode": {...}}``, the value of the metadata's ``"anchors"``."""
        return {"ssd": _plain(dataclasses.asdict(self.anchors)), "decode": _plain(dataclasses.asdict(self.decode))}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> AnchorSpec:
        """The inverse of :meth:`to_metadata`.

        Raises:
            ModelError: a field is unknown, missing or out of range (the message names it).
        """
        try:
            ssd, dec = doc["ssd"], doc["decode"]
            return cls(_build(SsdAnchorOptions, ssd), _build(AnchorDecodeOptions, dec))
        except (KeyError, TypeError, InputError) as exc:
            raise ModelError(f"the model's anchor options are invalid ({exc}); edgekit reads "
                             "{\"ssd\": {SsdAnchorOptions fields}, \"decode\": {AnchorDecodeOptions fields}}. "
                             "Write them again with `edgekit meta MODEL --anchors PRESET`.") from None

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any] | None) -> AnchorSpec | None:
        """The spec in a model's edgekit metadata (key ``"anchors"``), or None when it has none.

        Raises:
            ModelError: the entry is there but invalid.
        """
        doc = (meta or {}).get("anchors")
        if doc is None:
            return None
        if not isinstance(doc, Mapping):
            raise ModelError(f"the model's metadata \"anchors\" is {type(doc).__name__}, not an object")
        return cls.from_dict(doc)


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.value if isinstance(v, Choice) else list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def _build(kind: type, doc: Mapping[str, Any]) -> Any:
    known = {f.name for f in dataclasses.fields(kind)}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise InputError(f"unknown {kind.__name__} field(s) {unknown}; known: {sorted(known)}")
    return kind(**doc)


def _scale(min_scale: float, max_scale: float, index: int, count: int) -> float:
    if count == 1:
        return (min_scale + max_scale) * 0.5
    return min_scale + (max_scale - min_scale) * index / (count - 1.0)


def generate_anchors(o: SsdAnchorOptions) -> np.ndarray:
    """The anchors MediaPipe's ``SsdAnchorsCalculator`` generates: float32 (N, 4) x_center,
    y_center, w, h normalized to the input; consecutive layers of one stride share a grid."""
    out: list[np.ndarray] = []
    layer = 0
    while layer < o.num_layers:
        ratios: list[float] = []
        scales: list[float] = []
        last = layer
        while last < len(o.strides) and o.strides[last] == o.strides[layer]:
            scale = _scale(o.min_scale, o.max_scale, last, len(o.strides))
            if last == 0 and o.reduce_boxes_in_lowest_layer:
                ratios += [1.0, 2.0, 0.5]
                scales += [0.1, scale, scale]
            else:
                ratios += list(o.aspect_ratios)
                scales += [scale] * len(o.aspect_ratios)
                if o.interpolated_scale_aspect_ratio > 0.0:
                    nxt = 1.0 if last == len(o.strides) - 1 else _scale(o.min_scale, o.max_scale, last + 1,
                                                                        len(o.strides))
                    scales.append(math.sqrt(scale * nxt))
                    ratios.append(o.interpolated_scale_aspect_ratio)
            last += 1
        if o.feature_map_height:
            fh, fw = o.feature_map_height[layer], o.feature_map_width[layer]
        else:
            fh = math.ceil(o.input_size_height / o.strides[layer])
            fw = math.ceil(o.input_size_width / o.strides[layer])
        root = np.sqrt(np.asarray(ratios, dtype=np.float32))
        sizes = np.stack([np.asarray(scales, np.float32) * root, np.asarray(scales, np.float32) / root], axis=1)
        if o.fixed_anchor_size:
            sizes[:] = 1.0
        ys, xs = np.meshgrid((np.arange(fh, dtype=np.float32) + o.anchor_offset_y) / fh,
                             (np.arange(fw, dtype=np.float32) + o.anchor_offset_x) / fw, indexing="ij")
        cells = np.stack([xs.ravel(), ys.ravel()], axis=1)  # row-major: y outer, x inner
        a = len(sizes)
        out.append(np.concatenate([np.repeat(cells, a, axis=0), np.tile(sizes, (len(cells), 1))], axis=1))
        layer = last
    return np.concatenate(out).astype(np.float32)


def decode_anchor_boxes(raw: np.ndarray, anchors: np.ndarray, o: AnchorDecodeOptions) -> tuple[np.ndarray, np.ndarray]:
    """Raw locations (N, num_coords) -> boxes float32 (N, 4) x1, y1, x2, y2 and keypoints float32
    (N, K, 2) x, y, all normalized to the input (MediaPipe's ``DecodeBoxes``)."""
    r = np.asarray(raw, dtype=np.float32)
    b: np.ndarray = r[:, o.box_coord_offset:o.box_coord_offset + 4]  # float32, or its sizes' exp float64
    ax, ay, aw, ah = anchors[:, 0], anchors[:, 1], anchors[:, 2], anchors[:, 3]
    if o.box_coding is BoxCoding.YXHW:
        y, x, h, w = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    elif o.box_coding is BoxCoding.XYWH:
        x, y, w, h = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    else:
        x, y = (b[:, 2] - b[:, 0]) / 2, (b[:, 3] - b[:, 1]) / 2
        w, h = b[:, 2] + b[:, 0], b[:, 3] + b[:, 1]
    xc = x / o.x_scale * aw + ax
    yc = y / o.y_scale * ah + ay
    if o.apply_exponential_on_box_size:
        with np.errstate(over="ignore"):  # an overflowing size is an infinite box, dropped as not sane
            h, w = np.exp(h / o.h_scale) * ah, np.exp(w / o.w_scale) * aw
    else:
        h, w = h / o.h_scale * ah, w / o.w_scale * aw
    boxes = np.stack([xc - w / 2, yc - h / 2, xc + w / 2, yc + h / 2], axis=1)
    k = o.num_keypoints
    kp = r[:, o.keypoint_coord_offset:o.keypoint_coord_offset + k * o.num_values_per_keypoint]
    kp = kp.reshape(len(r), k, o.num_values_per_keypoint)[:, :, :2]
    if o.box_coding is BoxCoding.YXHW:
        kp = kp[:, :, ::-1]
    kx = kp[:, :, 0] / o.x_scale * aw[:, None] + ax[:, None]
    ky = kp[:, :, 1] / o.y_scale * ah[:, None] + ay[:, None]
    return boxes.astype(np.float32), np.stack([kx, ky], axis=2).astype(np.float32)


def anchor_scores(raw: np.ndarray, o: AnchorDecodeOptions) -> tuple[np.ndarray, np.ndarray]:
    """Raw scores (N, C) -> (best score float32 (N,), its class int32 (N,)): clipped to
    +-``score_clipping_thresh`` and through a sigmoid when ``sigmoid_score``."""
    s = np.asarray(raw, dtype=np.float32).reshape(len(raw), -1)
    if o.sigmoid_score:
        if o.score_clipping_thresh is not None:
            s = np.clip(s, -o.score_clipping_thresh, o.score_clipping_thresh)
        # exp(-s) of a large negative score overflows float32 to inf, and 1 / (1 + inf) is the 0 it
        # should be; the sigmoid is computed without the overflow (and its RuntimeWarning on stderr).
        s = 0.5 * (1.0 + np.tanh(0.5 * s))
    ids = s.argmax(axis=1)
    return s[np.arange(len(s)), ids].astype(np.float32), ids.astype(np.int32)


def _iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    w = np.maximum(np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0]), 0)
    h = np.maximum(np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1]), 0)
    inter = w * h
    union = (box[2] - box[0]) * (box[3] - box[1]) + (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]) - inter
    iou: np.ndarray = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
    return iou


def suppress(boxes: np.ndarray, scores: np.ndarray, keypoints: np.ndarray, *, iou_threshold: float,
             algorithm: NmsAlgorithm, max_results: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MediaPipe's NonMaxSuppressionCalculator (IoU, class-agnostic): the boxes, scores and
    keypoints kept, best first. WEIGHTED replaces each kept box and its keypoints by the
    score-weighted mean of every remaining box overlapping it by more than ``iou_threshold``
    (itself included); PLAIN keeps the box as it is."""
    order = np.argsort(-scores, kind="stable")
    kept_b: list[np.ndarray] = []
    kept_s: list[float] = []
    kept_k: list[np.ndarray] = []
    while order.size and len(kept_b) < max_results:
        top = order[0]
        near = _iou(boxes[top], boxes[order]) > iou_threshold
        near[0] = True
        group = order[near]
        if algorithm is NmsAlgorithm.WEIGHTED:
            w = scores[group][:, None]
            kept_b.append((boxes[group] * w).sum(axis=0) / w.sum())
            kept_k.append((keypoints[group] * w[:, :, None]).sum(axis=0) / w.sum())
        else:
            kept_b.append(boxes[top])
            kept_k.append(keypoints[top])
        kept_s.append(float(scores[top]))
        order = order[~near]
    k = keypoints.shape[1] if keypoints.ndim == 3 else 0
    if not kept_b:
        return np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros((0, k, 2), np.float32)
    return (np.asarray(kept_b, np.float32), np.asarray(kept_s, np.float32),
            np.asarray(kept_k, np.float32).reshape(len(kept_b), k, 2))


class AnchorDecoded(NamedTuple):
    """Detections of an anchor-based model in source-frame pixels (boxes x1, y1, x2, y2)."""

    xyxy: np.ndarray  # float32 (N, 4)
    scores: np.ndarray  # float32 (N,)
    class_ids: np.ndarray  # int32 (N,)
    keypoints: np.ndarray  # float32 (N, K, 2) x, y


def decode_anchors(raw_boxes: np.ndarray, raw_scores: np.ndarray, spec: AnchorSpec, transform: PixelMapping, *,
                   threshold: float | None = None) -> AnchorDecoded:
    """The two raw outputs ([1, N, num_coords], [1, N, C]; dequantized) -> detections in source pixels.

    ``threshold`` None takes the spec's ``min_score_thresh``.

    Raises:
        ModelError: the outputs do not hold one row per anchor, or fewer values than the spec reads.
    """
    anchors, o = spec.anchor_boxes, spec.decode
    b = np.asarray(raw_boxes, dtype=np.float32)
    s = np.asarray(raw_scores, dtype=np.float32)
    n = len(anchors)
    if b.ndim != 3 or b.shape[:2] != (1, n) or b.shape[2] < o.num_coords or s.ndim != 3 or s.shape[:2] != (1, n):
        raise ModelError(f"the anchor options give {n} anchors and {o.num_coords} values each: the outputs must be "
                         f"[1, {n}, >={o.num_coords}] and [1, {n}, C], got {list(b.shape)} and {list(s.shape)}. "
                         "Check the model's anchor options (`edgekit meta --anchors`).")
    scores, ids = anchor_scores(s[0], o)
    keep = np.flatnonzero(scores >= (o.min_score_thresh if threshold is None else threshold))
    boxes, kps = decode_anchor_boxes(b[0, keep], anchors[keep], o)
    # A prediction can decode to a negative or NaN size; MediaPipe drops those before NMS.
    sane = (boxes[:, 2] >= boxes[:, 0]) & (boxes[:, 3] >= boxes[:, 1])
    keep, boxes, kps = keep[sane], boxes[sane], kps[sane]
    # NMS per class on the normalized boxes, as MediaPipe does before projecting them.
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # boxes, scores, keypoints, ids
    for c in np.unique(ids[keep]):
        m = ids[keep] == c
        kb, ks, kk = suppress(boxes[m], scores[keep][m], kps[m], iou_threshold=o.iou_threshold,
                              algorithm=o.nms, max_results=o.max_results)
        found.append((kb, ks, kk, np.full(len(ks), c, np.int32)))
    if not found:
        k = o.num_keypoints
        return AnchorDecoded(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int32),
                             np.zeros((0, k, 2), np.float32))
    kb, ks, kk, ki = (np.concatenate(x) for x in zip(*found))
    order = np.argsort(-ks, kind="stable")[:o.max_results]
    corners = normalized_points_to_source(kb[order].reshape(-1, 2, 2), transform).reshape(-1, 4)
    return AnchorDecoded(corners, ks[order], ki[order], normalized_points_to_source(kk[order], transform))


def _face(size: int, strides: tuple[int, ...], interpolated: float, threshold: float) -> AnchorSpec:
    return AnchorSpec(
        SsdAnchorOptions(size, size, 0.1484375, 0.75, len(strides), strides=strides,
                         interpolated_scale_aspect_ratio=interpolated, fixed_anchor_size=True),
        AnchorDecodeOptions(float(size), float(size), float(size), float(size), BoxCoding.XYWH, num_keypoints=6,
                            score_clipping_thresh=100.0, min_score_thresh=threshold))


# Options of MediaPipe's published detectors, from its graphs (mediapipe/modules/*/ *.pbtxt).
ANCHOR_PRESETS: dict[str, AnchorSpec] = {
    "face-short-range": _face(128, (8, 16, 16, 16), 1.0, 0.5),  # 896 anchors, 16 coords
    "face-full-range": _face(192, (4,), 0.0, 0.6),  # 2304 anchors
    "palm": AnchorSpec(
        SsdAnchorOptions(192, 192, 0.1484375, 0.75, 4, strides=(8, 16, 16, 16), fixed_anchor_size=True),
        AnchorDecodeOptions(192.0, 192.0, 192.0, 192.0, BoxCoding.XYWH, num_keypoints=7, score_clipping_thresh=100.0,
                            min_score_thresh=0.5)),  # 2016 anchors, 18 coords
    # mediapipe/modules/pose_detection/pose_detection_cpu.pbtxt
    "pose-detector": AnchorSpec(
        SsdAnchorOptions(224, 224, 0.1484375, 0.75, 5, strides=(8, 16, 32, 32, 32), fixed_anchor_size=True),
        AnchorDecodeOptions(224.0, 224.0, 224.0, 224.0, BoxCoding.XYWH, num_keypoints=4, score_clipping_thresh=100.0,
                            min_score_thresh=0.5)),  # 2254 anchors, 12 coords
}


@dataclass(frozen=True)
class AnchorDecoder:
    """A raw anchor model's two outputs -> :class:`~edgekit.results.Detections` in source pixels
    (what :func:`edgekit.contract.make_decoder` gives for the ANCHORS format). The keypoints are
    left out of Detections; :func:`decode_anchors` keeps them."""

    spec: AnchorSpec
    boxes_index: int = 0
    scores_index: int = 1
    labels: tuple[str, ...] = ()
    threshold: float | None = None  # None: the spec's min_score_thresh

    format: ClassVar[OutputFormat] = OutputFormat.ANCHORS

    def __call__(self, outputs: Any, transform: PixelMapping) -> Detections:
        from edgekit.labels import label_for
        from edgekit.results import Detections

        d = decode_anchors(outputs[self.boxes_index], outputs[self.scores_index], self.spec, transform,
                           threshold=self.threshold)
        real = (d.xyxy[:, 2] > d.xyxy[:, 0]) & (d.xyxy[:, 3] > d.xyxy[:, 1])  # not wholly in the padding
        ids = d.class_ids[real]
        return Detections(d.xyxy[real], d.scores[real], ids, tuple(label_for(self.labels, int(i)) for i in ids))


def anchor_decoder(outputs: Any, spec: AnchorSpec, *, labels: Any = (), threshold: float | None = None,
                   iou_threshold: float | None = None, max_detections: int | None = None) -> AnchorDecoder:
    """The decoder of a raw anchor model whose two ``outputs`` (tensor specs) fit ``spec``; the
    box tensor is the one with more values per anchor. ``iou_threshold``/``max_detections``
    override the spec's.

    Raises:
        ModelError: the outputs are not two [1, N, *] tensors with one row per anchor.
    """
    shapes = [tuple(int(d) for d in o.shape) for o in outputs]
    n = len(spec.anchor_boxes)
    if len(shapes) != 2 or any(len(s) != 3 or s[:2] != (1, n) for s in shapes):
        raise ModelError(f"an anchor model has two outputs [1, {n}, 4+2K] and [1, {n}, C] for its {n} anchors; "
                         f"this one has {[list(s) for s in shapes]}. Check its anchor options (`edgekit meta`).")
    boxes = 0 if shapes[0][2] >= shapes[1][2] else 1
    decode = spec.decode
    if iou_threshold is not None:
        decode = dataclasses.replace(decode, iou_threshold=iou_threshold)
    if max_detections is not None:
        decode = dataclasses.replace(decode, max_results=max_detections)
    if decode is not spec.decode:
        spec = AnchorSpec(spec.anchors, decode)
    return AnchorDecoder(spec, boxes, 1 - boxes, tuple(labels or ()), threshold)
