"""The TFLite Support metadata that MediaPipe's and Model Maker's .tflite files carry, read on the
device with edgekit's bounds-checked flatbuffer reader (no tflite-support, no flatbuffers package).

The ``TFLITE_METADATA`` entry is a flatbuffer of TensorFlow Lite Support's ``metadata_schema.fbs``
(file identifier "M001"); only the fields edgekit uses are read, by their slots in that schema:

* ModelMetadata.subgraph_metadata (3) -> SubGraphMetadata.input/output_tensor_metadata (2, 3);
* TensorMetadata.content (3) -> Content.content_properties_type/content_properties (0, 1; union,
  ImageProperties is 2) -> ImageProperties.color_space (0: UNKNOWN 0, RGB 1, GRAYSCALE 2);
* TensorMetadata.process_units (4) -> ProcessUnit.options_type/options (0, 1; NormalizationOptions
  is 1) -> NormalizationOptions.mean/std (0, 1);
* TensorMetadata.stats (5) -> Stats.max/min (0, 1): the input's value range;
* TensorMetadata.associated_files (6) -> AssociatedFile.name (0), type (2; TENSOR_AXIS_LABELS 2).

The label files themselves sit in the zip appended to the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from edgekit.errors import ModelError
from edgekit.runtimes.flatbuffer import FlatReader
from edgekit.runtimes.metadata import SUPPORT_METADATA_NAME
from edgekit.runtimes.tflite_file import TFLiteFile

__all__ = ["SUPPORT_METADATA_NAME", "ColorSpace", "SupportMetadata", "read_support_metadata"]

_IMAGE_PROPERTIES = 2  # ContentProperties union member
_NORMALIZATION = 1  # ProcessUnitOptions union member
_AXIS_LABELS = 2  # AssociatedFileType.TENSOR_AXIS_LABELS
ColorSpace = str  # "RGB", "GRAYSCALE" or "UNKNOWN"
_COLOR_SPACES = {0: "UNKNOWN", 1: "RGB", 2: "GRAYSCALE"}
_MAX_LABELS_BYTES = 4 * 1024**2


@dataclass(frozen=True)
class SupportMetadata:
    """What the file's TFLite Support metadata states about its (first) input and its outputs;
    None where it states nothing."""

    name: str | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    color_space: ColorSpace | None = None
    value_range: tuple[float, float] | None = None  # the input's Stats (min, max)
    labels_file: str | None = None
    labels: tuple[str, ...] | None = None

    def describe(self) -> str:
        bits = [f"model {self.name!r}"] if self.name else []
        if self.mean is not None and self.std is not None:
            bits.append(f"NormalizationOptions mean {list(self.mean)} std {list(self.std)}")
        if self.color_space:
            bits.append(f"ImageProperties {self.color_space}")
        if self.value_range:
            bits.append(f"input range {list(self.value_range)}")
        if self.labels_file:
            bits.append(f"labels {self.labels_file!r}" + (f" ({len(self.labels)})" if self.labels else ""))
        return ", ".join(bits) or "present (no field edgekit reads)"


def read_support_metadata(data: bytes, parsed: TFLiteFile) -> SupportMetadata | None:
    """The file's TFLite Support metadata, if it has any.

    A damaged metadata entry reads as none: the model itself was already checked, and this is
    what its publisher says about feeding it, which a preset or the convention can still say.
    """
    index = parsed.metadata.get(SUPPORT_METADATA_NAME)
    if index is None or not 0 <= index < len(parsed.buffers) or not parsed.buffers[index].size:
        return None
    buf = parsed.buffers[index]
    try:
        return _read(FlatReader(data[buf.start:buf.start + buf.size], "the model's TFLite metadata"), data)
    except ModelError:
        return None


def _read(r: FlatReader, model: bytes) -> SupportMetadata | None:
    root = r.deref(0)
    name = r.string(root, 0) or None
    subgraphs = r.tables(root, 3)
    if not subgraphs:
        return SupportMetadata(name=name)
    inputs, outputs = r.tables(subgraphs[0], 2), r.tables(subgraphs[0], 3)
    mean = std = None
    color = None
    value_range = None
    if inputs:
        t = inputs[0]
        for unit in r.tables(t, 4):
            options = r.table(unit, 1)
            if r.scalar(unit, 0, "u8") == _NORMALIZATION and options:
                mean, std = r.ints(options, 0, "f", limit=4) or None, r.ints(options, 1, "f", limit=4) or None
                break
        content = r.table(t, 3)
        if content and r.scalar(content, 0, "u8") == _IMAGE_PROPERTIES:
            props = r.table(content, 1)
            if props:
                color = _COLOR_SPACES.get(r.scalar(props, 0, "i8"), "UNKNOWN")
        stats = r.table(t, 5)
        if stats:
            hi, lo = r.ints(stats, 0, "f", limit=4), r.ints(stats, 1, "f", limit=4)
            if hi and lo:
                value_range = (float(min(lo)), float(max(hi)))
    labels_file = None
    for tensor in outputs:
        labels_file = next((r.string(f, 0) for f in r.tables(tensor, 6) if r.scalar(f, 2, "i8") == _AXIS_LABELS),
                           None)
        if labels_file:
            break
    labels = _zip_lines(model, labels_file) if labels_file else None
    return SupportMetadata(name, tuple(map(float, mean)) if mean else None, tuple(map(float, std)) if std else None,
                           color, value_range, labels_file, labels)


def _zip_lines(model: bytes, name: str) -> tuple[str, ...] | None:
    import io
    import zipfile  # only for a file that names a label file (zipfile costs start-up time)

    try:
        with zipfile.ZipFile(io.BytesIO(model)) as zf:
            if zf.getinfo(name).file_size > _MAX_LABELS_BYTES:
                return None
            text = zf.read(name).decode("utf-8", "replace")
    except (zipfile.BadZipFile, KeyError, OSError, ValueError):
        return None
    lines = tuple(line.strip() for line in text.splitlines() if line.strip())
    return lines or None
