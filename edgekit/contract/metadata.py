"""The edgekit metadata a ``.tflite`` file carries, as one typed value with one parser.

:func:`edgekit.runtimes.metadata.read_metadata` reads the JSON document out of the file (or
translates Ultralytics' own); :meth:`ModelMetadata.parse` turns it into this, once, refusing
values that make no sense with the key that holds them. Outside :mod:`edgekit.contract` nothing
reads the document's keys: it reads these fields, or :class:`~edgekit.contract.modelreading.ModelReading`
(what edgekit makes of the whole model)::

    meta = ModelMetadata.parse(model.metadata)
    meta.task, meta.output_format, meta.labels, meta.detection.score_threshold
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from edgekit.contract.enums import BoxFormat, OutputFormat, Task
from edgekit.contract.segmentation import SegmentationLayout
from edgekit.errors import ModelError

__all__ = ["DetectionMetadata", "ModelMetadata"]


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


@dataclass(frozen=True)
class ModelMetadata:
    """A model's edgekit metadata, parsed. ``raw`` is the document as the file holds it (what
    ``edgekit meta`` prints and rewrites); the contract's own readers (anchors, presets,
    preprocessing) take their tables from it."""

    raw: Mapping[str, Any] = field(default_factory=dict)
    task: Task | None = None
    output_format: OutputFormat | None = None
    labels: tuple[str, ...] = ()
    detection: DetectionMetadata = field(default_factory=DetectionMetadata)
    segmentation_layout: SegmentationLayout | None = None
    preprocessing: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None  # the source's name ("Ultralytics ...": its own metadata, translated)
    quantization: str | None = None  # the quantization mode the converter used
    edgekit_version: str | None = None

    @classmethod
    def parse(cls, doc: Mapping[str, Any] | None) -> ModelMetadata:
        """The one parser of the edgekit metadata document (None: the file has none).

        Raises:
            ModelError: a value names no known choice or is not of its kind (the message names the key).
        """
        doc = doc or {}
        task = doc.get("task")
        if task:
            try:
                task = Task.parse(str(task))
            except Exception:  # noqa: BLE001
                raise ModelError(f"unknown task {task!r}; edgekit has {', '.join(t.value for t in Task)}") from None
        fmt = doc.get("output_format")
        labels = doc.get("labels")
        seg = _table(doc, "segmentation").get("layout")
        quant = _table(doc, "quantization").get("mode")
        version = doc.get("edgekit_version")
        return cls(doc, task or None, OutputFormat.from_metadata(fmt, "output_format") if fmt else None,
                   tuple(str(x) for x in labels) if isinstance(labels, list) else (),
                   DetectionMetadata.parse(_table(doc, "detection")),
                   SegmentationLayout.from_metadata(seg, "segmentation.layout") if seg else None,
                   _table(doc, "preprocessing"), str(_table(doc, "source").get("name") or "") or None,
                   None if quant is None else str(quant), None if version is None else str(version))

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
        if self.quantization is not None:
            bits.append(f"quantization={self.quantization}")
        return "; ".join(bits) or "present (no known keys)"
