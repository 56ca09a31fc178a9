"""The edgekit metadata a ``.tflite`` file carries, as one typed value with one parser and one writer.

:func:`edgekit.runtimes.metadata.read_metadata` reads the JSON document out of the file (or
translates Ultralytics' own); :meth:`ModelMetadata.parse` turns it into this, once, refusing
values that make no sense with the key that holds them. :meth:`ModelMetadata.to_document` is the
inverse: the document ``edgekit convert`` and ``edgekit meta`` write (through
:func:`edgekit.converters.metadata_writer.write_metadata`). Outside :mod:`edgekit.contract` nothing
reads or writes the document's keys: it reads and builds these fields, or reads
:class:`~edgekit.contract.modelreading.ModelReading` (what edgekit makes of the whole model)::

    meta = ModelMetadata.parse(model.metadata)
    meta.task, meta.output_format, meta.labels, meta.detection.score_threshold
    doc = meta.with_values(task=Task.DETECT).to_document()
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Mapping, NamedTuple, TypeVar

from edgekit.contract.enums import BoxFormat, OutputFormat, Task
from edgekit.contract.segmentation import SegmentationLayout
from edgekit.errors import ModelError

__all__ = ["DOCUMENT_KEYS", "DetectionMetadata", "ModelMetadata", "QuantizationMetadata"]

# The document's top-level keys, each the value of one field of ModelMetadata (see edgekit.contract's
# docstring for what they hold). Any other key is kept as it came, in ModelMetadata.extra.
DOCUMENT_KEYS = ("edgekit_version", "task", "labels", "output_format", "anchors", "segmentation", "preprocessing",
                 "detection", "quantization", "source", "accuracy", "edgetpu")
T = TypeVar("T")


def _table(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, Mapping) else {}


def _number(table: Mapping[str, Any], key: str, kind: type) -> Any:
    value = table.get(key)
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise TypeError
        return kind(value)
    except (TypeError, ValueError):
        raise ModelError(f"the model's metadata has detection.{key} {value!r}; it must be a number "
                         "(`edgekit meta MODEL` rewrites it)") from None


@dataclass(frozen=True)
class DetectionMetadata:
    """The metadata's ``detection`` table: how a detector's outputs are decoded (None: not said)."""

    score_threshold: float | None = None
    iou_threshold: float | None = None
    max_det: int | None = None
    box_format: BoxFormat | None = None
    normalized: bool | None = None
    outputs: tuple[str, ...] | None = None  # the roles of a two-output YOLO head, in output order
    objectness: bool | None = None

    @classmethod
    def parse(cls, table: Mapping[str, Any]) -> DetectionMetadata:
        """Raises ModelError: a value is not of its kind."""
        box = table.get("box_format")
        roles = table.get("outputs")
        norm, obj = table.get("normalized"), table.get("objectness")
        return cls(_number(table, "score_threshold", float), _number(table, "iou_threshold", float),
                   _number(table, "max_det", int),
                   BoxFormat.from_metadata(box, "detection.box_format") if box is not None else None,
                   None if norm is None else bool(norm),
                   tuple(str(r) for r in roles) if isinstance(roles, (list, tuple)) else None,
                   None if obj is None else bool(obj))

    def to_table(self) -> dict[str, Any]:
        """The ``detection`` table (the inverse of :meth:`parse`; values not said are left out)."""
        return _said(score_threshold=self.score_threshold, iou_threshold=self.iou_threshold, max_det=self.max_det,
                     box_format=None if self.box_format is None else self.box_format.value,
                     normalized=self.normalized, outputs=None if self.outputs is None else list(self.outputs),
                     objectness=self.objectness)


def _said(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _optional(value: Any, kind: Callable[[Any], T]) -> T | None:
    """``value`` as ``kind`` when it is one (a record's figure; the device decides nothing by it)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        return None


class QuantizationMetadata(NamedTuple):
    """The metadata's ``quantization`` table: how the converter made the file (a record; None: not said)."""

    mode: str | None = None
    engine: str | None = None
    engine_version: str | None = None
    calibration_samples: int | None = None
    seed: int | None = None
    layers_in_float: tuple[str, ...] = ()  # the layers the fallback kept in float

    @classmethod
    def parse(cls, table: Mapping[str, Any]) -> QuantizationMetadata:
        layers = table.get("layers_in_float")
        return cls(_optional(table.get("mode"), str), _optional(table.get("engine"), str),
                   _optional(table.get("engine_version"), str), _optional(table.get("calibration_samples"), int),
                   _optional(table.get("seed"), int),
                   tuple(str(x) for x in layers) if isinstance(layers, (list, tuple)) else ())

    def to_table(self) -> dict[str, Any]:
        return _said(mode=self.mode, engine=self.engine, engine_version=self.engine_version,
                     calibration_samples=self.calibration_samples, seed=self.seed,
                     layers_in_float=list(self.layers_in_float) or None)



_FIELD_KEYS = {"segmentation_layout": "segmentation", "source_sha256": "source"}  # where a field's key is not its name


def _kept(doc: Mapping[str, Any], key: str, read: Callable[[], T], bad: dict[str, Any] | None) -> T | None:
    """``read()``; when it refuses the value and ``bad`` collects them, the value is kept there as it came."""
    try:
        return read()
    except ModelError:
        if bad is None:
            raise
        bad[key] = doc[key]
        return None


def _task(value: Any) -> Task | None:
    if not value:
        return None
    try:
        return Task.parse(str(value))
    except Exception:  # noqa: BLE001
        raise ModelError(f"unknown task {value!r}; edgekit has {', '.join(t.value for t in Task)}") from None


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class ModelMetadata:
    """A model's edgekit metadata, parsed. ``raw`` is the document as it was parsed (what
    ``edgekit meta`` prints; empty for a value built in Python); the contract's own readers
    (anchors, presets, preprocessing) take their tables from it. :meth:`to_document` writes the
    fields, never ``raw``: build a value, or change one with :meth:`with_values`, and write that."""

    raw: Mapping[str, Any] = field(default_factory=dict)
    task: Task | None = None
    output_format: OutputFormat | None = None
    labels: tuple[str, ...] = ()
    detection: DetectionMetadata = field(default_factory=DetectionMetadata)
    segmentation_layout: SegmentationLayout | None = None
    preprocessing: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None  # the source's name ("Ultralytics ...": its own metadata, translated)
    quantization: QuantizationMetadata | None = None  # how the converter quantized the file
    edgekit_version: str | None = None
    source_sha256: str | None = None
    anchors: Mapping[str, Any] | None = None  # {"ssd": ..., "decode": ...}: read by edgekit.contract.anchors
    accuracy: Mapping[str, Any] | None = None  # the converter's measured figures and its gate's verdict
    edgetpu: Mapping[str, Any] | None = None  # edgetpu_compiler's report of a compiled file
    extra: Mapping[str, Any] = field(default_factory=dict)  # keys outside DOCUMENT_KEYS, kept as they came

    @classmethod
    def parse(cls, doc: Mapping[str, Any] | None, *, keep_bad: bool = False) -> ModelMetadata:
        """The one parser of the edgekit metadata document (None: the file has none). ``keep_bad``
        keeps a value that makes no sense in :attr:`extra`, as it came, instead of refusing it (for
        ``edgekit meta``, which rewrites a file so it reads).

        Raises:
            ModelError: a value names no known choice or is not of its kind (the message names the key).
        """
        doc = doc or {}
        bad: dict[str, Any] | None = {} if keep_bad else None
        fmt, labels, source = doc.get("output_format"), doc.get("labels"), _table(doc, "source")
        seg = _table(doc, "segmentation").get("layout")
        quant, version = _mapping(doc.get("quantization")), doc.get("edgekit_version")
        meta = cls(
            doc, _kept(doc, "task", lambda: _task(doc.get("task")), bad),
            _kept(doc, "output_format", lambda: OutputFormat.from_metadata(fmt, "output_format") if fmt else None, bad),
            tuple(str(x) for x in labels) if isinstance(labels, list) else (),
            _kept(doc, "detection", lambda: DetectionMetadata.parse(_table(doc, "detection")), bad)
            or DetectionMetadata(),
            _kept(doc, "segmentation",
                  lambda: SegmentationLayout.from_metadata(seg, "segmentation.layout") if seg else None, bad),
            _table(doc, "preprocessing"), str(source.get("name") or "") or None,
            None if quant is None else QuantizationMetadata.parse(quant), None if version is None else str(version),
            _optional(source.get("sha256"), str), _mapping(doc.get("anchors")), _mapping(doc.get("accuracy")),
            _mapping(doc.get("edgetpu")))
        return replace(meta, extra={**{k: v for k, v in doc.items() if k not in DOCUMENT_KEYS}, **(bad or {})})

    def to_document(self) -> dict[str, Any]:
        """The JSON document (the inverse of :meth:`parse`): the fields that say something, then :attr:`extra`."""
        source = _said(name=self.source, sha256=self.source_sha256)
        doc = _said(
            edgekit_version=self.edgekit_version, task=None if self.task is None else self.task.value,
            labels=list(self.labels) or None,
            output_format=None if self.output_format is None else self.output_format.value,
            anchors=None if self.anchors is None else dict(self.anchors),
            segmentation=None if self.segmentation_layout is None else {"layout": self.segmentation_layout.value},
            preprocessing=dict(self.preprocessing) or None, detection=self.detection.to_table() or None,
            quantization=None if self.quantization is None else self.quantization.to_table(),
            source=source or None, accuracy=None if self.accuracy is None else dict(self.accuracy),
            edgetpu=None if self.edgetpu is None else dict(self.edgetpu))
        return {**doc, **self.extra}

    def with_values(self, **changes: Any) -> ModelMetadata:
        """This metadata with ``changes`` (field names and their typed values); a value kept in
        :attr:`extra` under the same key gives way."""
        keys = {_FIELD_KEYS.get(name, name) for name in changes}
        unknown = set(changes) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"ModelMetadata has no field {', '.join(sorted(unknown))}")
        return replace(self, extra={k: v for k, v in self.extra.items() if k not in keys}, **changes)

    @property
    def ultralytics(self) -> bool:
        """The document is Ultralytics' own metadata, translated (see :mod:`edgekit.contract.ultralytics`)."""
        return "Ultralytics" in (self.source or "")

    def summary(self) -> str:
        """One line for ``edgekit info``: the keys it holds that say what the model is."""
        if not self.raw:
            return "none (see tflite meta and preprocessing)"
        bits = [f"{k}={v}" for k, v in (("task", self.raw.get("task")), ("output_format", self.raw.get("output_format")),
                                        ("edgekit_version", self.edgekit_version)) if k in self.raw]
        if isinstance(self.raw.get("labels"), list):
            bits.append(f"{len(self.labels)} labels")
        if isinstance(self.raw.get("preprocessing"), dict):
            bits.append("preprocessing " + ", ".join(f"{k}={v}" for k, v in self.preprocessing.items()))
        if self.quantization is not None and self.quantization.mode is not None:
            bits.append(f"quantization={self.quantization.mode}")
        return "; ".join(bits) or "present (no known keys)"
