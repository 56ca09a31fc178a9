"""How a model is fed, decided once at load, with where each setting came from.

Each setting (resize, pad value, interpolation, mean/std, colour order, box mapping) is taken from
the first of these that says it:

1. the caller's option (``--resize``),
2. the model's edgekit metadata (``edgekit meta``, ``edgekit convert``; Ultralytics' own metadata
   is translated into it and says so),
3. the file's TFLite Support metadata (NormalizationOptions: mean/std, for float inputs),
4. the preset of the family the file's signature matches (:mod:`edgekit.contract.presets`),
5. edgekit's convention (stretch for detectors, letterbox for pose and segmentation models, gray 114,
   the input type's value convention, AUTO resampling): a guess, and :attr:`PreprocessingSpec.guessed`
   says so::

    pre = resolve_preprocessing(model.metadata, model.support, preset, float_input=True)
    pre.resize, pre.sources["resize"]          # ResizeMode.LETTERBOX, Provenance.PRESET
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from edgekit.contract.enums import BoxMapping, Choice, ColorOrder, Interpolation, ResizeMode, Task
from edgekit.contract.presets import Preset
from edgekit.contract.spec import LETTERBOX_PAD, Normalization
from edgekit.errors import InputError, ModelError

__all__ = ["Provenance", "PreprocessingSpec", "resolve_preprocessing", "preprocessing_for", "preprocessing_of", "SETTINGS",
           "CONVENTIONAL_RESIZE"]

SETTINGS = ("resize", "pad_value", "interpolation", "normalization", "color", "box_mapping")


class Provenance(Choice):
    """Where a preprocessing setting came from, strongest first."""

    OPTION = "option"
    EDGEKIT = "edgekit metadata"
    ULTRALYTICS = "Ultralytics metadata"
    TFLITE = "TFLite metadata"
    PRESET = "preset"
    OUTPUTS = "the outputs"  # a model reading's format, task or layout, read from its output tensors
    CONVENTION = "convention"


@dataclass(frozen=True)
class PreprocessingSpec:
    """The preprocessing a model is fed with, and for each setting (:data:`SETTINGS`) where it
    came from. ``normalization`` None: the input type's convention (see
    :func:`edgekit.preprocess.to_input`)."""

    resize: ResizeMode = ResizeMode.STRETCH
    pad_value: int = LETTERBOX_PAD
    interpolation: Interpolation = Interpolation.AUTO
    normalization: Normalization | None = None
    box_mapping: BoxMapping = BoxMapping.EXACT
    sources: Mapping[str, Provenance] = field(default_factory=dict)
    preset: str | None = None
    reference: str | None = None  # the preset's reference implementation

    @property
    def guessed(self) -> bool:
        """True when nothing the model carries, and no preset, decided any setting."""
        return all(self.sources.get(k, Provenance.CONVENTION) is Provenance.CONVENTION for k in SETTINGS)

    def describe(self) -> str:
        """One line: each setting and where it came from."""
        n = self.normalization
        values = {"resize": self.resize.value, "pad_value": str(self.pad_value),
                  "interpolation": self.interpolation.value,
                  "normalization": ("pixels as they are (a quantized input)"
                                    if self.sources.get("normalization") is Provenance.TFLITE
                                    else "the input type's convention") if n is None or n.mean is None
                  else f"mean {_short(n.mean)} std {_short(n.std)}",
                  "color": (n.color if n else ColorOrder.RGB).value, "box_mapping": self.box_mapping.value}
        text = ", ".join(f"{k} {values[k]} ({self.sources.get(k, Provenance.CONVENTION).value})" for k in SETTINGS)
        if self.preset:
            text += f"; preset {self.preset}"
        if self.guessed:
            text += "; all guesses (no metadata, no preset): check with `edgekit meta MODEL --preset NAME` or " \
                    "--mean/--std"
        return text

    def to_dict(self) -> dict[str, Any]:
        n = self.normalization
        return {"resize": self.resize.value, "pad_value": self.pad_value, "interpolation": self.interpolation.value,
                "mean": list(n.mean) if n and n.mean else None, "std": list(n.std) if n and n.std else None,
                "color": (n.color if n else ColorOrder.RGB).value, "box_mapping": self.box_mapping.value,
                "preset": self.preset, "reference": self.reference, "guessed": self.guessed,
                "sources": {k: self.sources.get(k, Provenance.CONVENTION).value for k in SETTINGS}}


def _short(values: tuple[float, ...] | None) -> str:
    vals = list(values or ())
    return f"{vals[0]:g}" if vals and all(v == vals[0] for v in vals) else str([float(f"{v:g}") for v in vals])


def resolve_preprocessing(metadata: Mapping[str, Any] | None, support: Any = None, preset: Preset | None = None, *,
                          resize: ResizeMode | str | None = None, default_resize: ResizeMode = ResizeMode.STRETCH,
                          float_input: bool = True) -> PreprocessingSpec:
    """The :class:`PreprocessingSpec` of a model, each setting from the strongest of: the
    ``resize`` option, the edgekit ``metadata``, the TFLite ``support`` metadata
    (:class:`edgekit.runtimes.support_metadata.SupportMetadata`), the ``preset``, the convention.

    The file's NormalizationOptions and a preset's value range apply to float inputs only: a
    quantized input takes the pixels as they are, which its own quantization encodes (as the
    TFLite Task Library feeds it).

    Raises:
        InputError: the ``resize`` option names no resize mode.
        ModelError: the metadata holds a value that makes no sense.
    """
    meta = metadata or {}
    pre: Mapping[str, Any] = meta["preprocessing"] if isinstance(meta.get("preprocessing"), Mapping) else {}
    own = Provenance.ULTRALYTICS if _ultralytics(meta) else Provenance.EDGEKIT
    sources: dict[str, Provenance] = {}

    def pick(key: str, options: list[tuple[Any, Provenance]], default: Any) -> Any:
        for value, where in options:
            if value is not None:
                sources[key] = where
                return value
        sources[key] = Provenance.CONVENTION
        return default

    chosen_resize = pick("resize", [(resize, Provenance.OPTION), (pre.get("resize"), own),
                                    (preset.resize if preset else None, Provenance.PRESET)], default_resize)
    pad = pick("pad_value", [(pre.get("pad_value"), own), (preset.pad_value if preset else None, Provenance.PRESET)],
               LETTERBOX_PAD)
    interp = pick("interpolation", [(pre.get("interpolation"), own),
                                    (preset.interpolation if preset else None, Provenance.PRESET)], Interpolation.AUTO)
    boxes = pick("box_mapping", [(pre.get("box_mapping"), own)], BoxMapping.EXACT)
    norm = _normalization(pre, own, support, preset, float_input, sources)
    try:
        spec = PreprocessingSpec(ResizeMode.parse(chosen_resize), _pad(pad), _enum(Interpolation, interp, "interpolation"),
                                 norm, _enum(BoxMapping, boxes, "box_mapping"), sources,
                                 preset.name if preset else None, preset.reference if preset else None)
    except InputError:
        if sources["resize"] is Provenance.OPTION:
            raise
        raise ModelError(f"the model's metadata has preprocessing.resize {chosen_resize!r}; edgekit reads "
                         f"{', '.join(m.value for m in ResizeMode)}") from None
    return spec


def _normalization(pre: Mapping[str, Any], own: Provenance, support: Any, preset: Preset | None, float_input: bool,
                   sources: dict[str, Provenance]) -> Normalization | None:
    given = Normalization.from_metadata({"preprocessing": pre}) if pre else None
    if given is not None:
        sources["normalization"] = own if given.mean is not None else Provenance.CONVENTION
        sources["color"] = own if "color" in pre else Provenance.CONVENTION
        if given.mean is not None:
            return given
    color = given.color if given is not None else ColorOrder.RGB
    sources.setdefault("color", Provenance.CONVENTION)
    mean = getattr(support, "mean", None)
    std = getattr(support, "std", None)
    if mean and std:
        sources["normalization"] = Provenance.TFLITE
        if not float_input:  # the Task Library feeds a quantized input the pixels as they are
            return given if given is not None and given.color is not ColorOrder.RGB else None
        return _norm(mean, std, color, "the file's TFLite metadata (NormalizationOptions)")
    if float_input and preset is not None and preset.mean is not None and preset.std is not None:
        sources["normalization"] = Provenance.PRESET
        return Normalization((preset.mean,) * 3, (preset.std,) * 3, color)
    sources["normalization"] = Provenance.CONVENTION
    return given if given is not None and given.color is not ColorOrder.RGB else None


def _norm(mean: tuple[float, ...], std: tuple[float, ...], color: ColorOrder, where: str) -> Normalization:
    try:
        return Normalization(tuple(mean), tuple(std), color)
    except InputError as exc:
        raise ModelError(f"{where} holds mean {list(mean)} and std {list(std)}: {exc}") from None


def _pad(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 255 or value != int(value):
        raise ModelError(f"the model's metadata has preprocessing.pad_value {value!r}; it is one pixel value, "
                         "0..255 (0 black, 114 gray)")
    return int(value)


def _enum(kind: type[Choice], value: Any, key: str) -> Any:
    return kind.from_metadata(value, f"preprocessing.{key}")


def _ultralytics(meta: Mapping[str, Any]) -> bool:
    src = meta.get("source")
    return isinstance(src, Mapping) and "Ultralytics" in str(src.get("name", ""))


# The conventional resize of each task: MoveNet and most segmenters are trained on padded, not
# squashed, images; detectors and classifiers (SSD, MobileNet) on stretched ones.
CONVENTIONAL_RESIZE = {Task.SEGMENT: ResizeMode.LETTERBOX, Task.POSE: ResizeMode.LETTERBOX}


def preprocessing_for(info: Any, *, resize: ResizeMode | str | None = None,
                      task: Task | None = None) -> PreprocessingSpec:
    """:func:`preprocessing_of` for a model described by ``info`` (a loaded
    :class:`~edgekit.runtimes.model.Model` or a :class:`~edgekit.runtimes.tensors.ModelInfo`). A
    loaded model's :meth:`~edgekit.runtimes.model.Model.reading` holds its spec already.

    Raises:
        InputError: the ``resize`` option names no resize mode.
        ModelError: the metadata holds a value that makes no sense.
    """
    info = getattr(info, "info", info)
    return preprocessing_of(info.metadata, getattr(info, "support", None), info.inputs, info.outputs,
                            tuple(info.ops or ()), task=task, resize=resize)


def preprocessing_of(metadata: Mapping[str, Any] | None, support: Any, inputs: Sequence[Any], outputs: Sequence[Any],
                     ops: Sequence[str] = (), *, task: Task | None = None,
                     resize: ResizeMode | str | None = None) -> PreprocessingSpec:
    """:func:`resolve_preprocessing` for a model with these tensors: its edgekit ``metadata``, its
    TFLite ``support`` metadata, and the preset its metadata names or its signature matches;
    ``task`` picks the conventional resize (:data:`CONVENTIONAL_RESIZE`, else stretch).

    Raises:
        InputError: the ``resize`` option names no resize mode.
        ModelError: the metadata holds a value that makes no sense.
    """
    import numpy as np

    from edgekit.contract.presets import PRESETS, match_preset

    meta = metadata or {}
    pre: Mapping[str, Any] = meta["preprocessing"] if isinstance(meta.get("preprocessing"), Mapping) else {}
    named = pre.get("preset")
    preset = PRESETS.get(str(named)) if named else match_preset(inputs, outputs, tuple(ops))
    raw = getattr(inputs[0], "dtype", None) if len(inputs) == 1 else None
    if raw is None and len(inputs) == 1:
        raw = getattr(inputs[0], "type", None)  # the converter's view of a flatbuffer tensor
    try:
        floating = raw is not None and bool(np.issubdtype(np.dtype(raw), np.floating))
    except TypeError:
        floating = False
    return resolve_preprocessing(meta, support, preset, resize=resize,
                                 default_resize=CONVENTIONAL_RESIZE.get(task, ResizeMode.STRETCH) if task else
                                 ResizeMode.STRETCH, float_input=floating)
