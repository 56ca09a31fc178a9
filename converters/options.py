"""What a conversion is asked to do: the mode, the data budget, the gate, the preprocessing.

Choices are enums; the CLI maps its strings to them in one place (:meth:`Mode.parse`
and friends), the library never compares loose strings. Task, OutputFormat, ColorOrder and
ResizeMode are the model contract's (:mod:`edgekit.contract.enums`), shared with the device.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from edgekit.contract.enums import Choice, ColorOrder, Layout, OutputFormat, ResizeMode, Task
from edgekit.converters.targets import GateTargets
from edgekit.errors import InputError

__all__ = [
    "Mode",
    "Task",
    "OutputFormat",
    "ColorOrder",
    "ResizeMode",
    "ConvertOptions",
    "PreprocessingOverrides",
]


class Mode(Choice):
    """How the model is stored and computed after conversion.

    FLOAT32: no quantization (the reference). FLOAT16: float16 weights, float compute.
    DYNAMIC: int8 weights, float activations (no calibration). WEIGHT_ONLY: int8 weights
    dequantized to float before each op (smaller file, float compute and accuracy; done by
    ai-edge-quantizer). INT8: int8 everywhere,
    int8 input and output. UINT8: int8 inside, uint8 input and output (what the Edge TPU
    takes). INT8_FLOAT_IO: int8 inside, float input and output. INT16X8: int16
    activations, int8 weights (more accurate, not accelerated by XNNPACK). EDGETPU: UINT8
    then edgetpu_compiler.
    """

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    DYNAMIC = "dynamic"
    WEIGHT_ONLY = "weight-only"
    INT8 = "int8"
    UINT8 = "uint8"
    INT8_FLOAT_IO = "int8-float-io"
    INT16X8 = "int16x8"
    EDGETPU = "edgetpu"

    @property
    def needs_calibration(self) -> bool:
        return self in (Mode.INT8, Mode.UINT8, Mode.INT8_FLOAT_IO, Mode.INT16X8, Mode.EDGETPU)

    @property
    def int8_body(self) -> bool:
        """Fully int8 computation: the modes the per-layer debugger and fallback apply to."""
        return self in (Mode.INT8, Mode.UINT8, Mode.INT8_FLOAT_IO, Mode.EDGETPU)

    @property
    def io_dtype(self) -> str:
        """The input/output tensor type the mode promises."""
        return {Mode.INT8: "int8", Mode.UINT8: "uint8", Mode.EDGETPU: "uint8"}.get(self, "float32")


@dataclass(frozen=True)
class PreprocessingOverrides:
    """What the user states about preprocessing; None means 'infer from the model'.

    mean/std: real input = (pixel - mean) / std, per channel or one value for all.
    scale: real input = pixel * scale (the same as mean 0, std 1/scale).
    """

    input_size: tuple[int, int] | None = None  # (width, height)
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    scale: float | None = None
    color: ColorOrder | None = None
    resize: ResizeMode | None = None

    def __post_init__(self) -> None:
        if self.color is not None:
            object.__setattr__(self, "color", ColorOrder.parse(self.color))
        if self.resize is not None:
            object.__setattr__(self, "resize", ResizeMode.parse(self.resize))
        if self.scale is not None and (self.mean is not None or self.std is not None):
            raise InputError("give either scale or mean/std, not both (scale s is mean 0, std 1/s)")
        if self.scale is not None and self.scale <= 0:
            raise InputError(f"scale must be positive, got {self.scale}")
        if self.std is not None and any(s == 0 for s in self.std):
            raise InputError(f"std must not contain 0, got {list(self.std)}")
        if self.input_size is not None and (len(self.input_size) != 2 or min(self.input_size) < 1):
            raise InputError(f"input_size must be (width, height) of positive integers, got {self.input_size}")

    @property
    def given(self) -> bool:
        return self.mean is not None or self.std is not None or self.scale is not None


@dataclass(frozen=True)
class ConvertOptions:
    """Everything :func:`edgekit.converters.engines.tflite_converter` can be told, with its defaults.

    max_drop: the accuracy gate in points (accuracy against labels when the data has
        labels, otherwise top-1 agreement with the float model, or mAP@0.5 against the
        float model's detections). None: no gate.
    min_box_iou, max_score_error, max_extra_boxes: a detector's fidelity to the float model
        (:class:`edgekit.converters.gate.GateTargets`, which checks them); None: not gated on.
    auto_fallback: when the gate fails, keep the most sensitive layers in float and try
        again, up to `max_fallback_layers` layers.
    """

    mode: Mode = Mode.INT8
    num_calibration: int = 300
    num_validation: int = 500
    seed: int = 0
    holdout: float = 0.2
    max_drop: float | None = None
    min_box_iou: float | None = None
    max_score_error: float | None = None
    max_extra_boxes: int | None = None
    auto_fallback: bool = False
    max_fallback_layers: int = 8
    diagnose: bool = True
    labels: Sequence[str] | str | os.PathLike[str] | None = None
    preprocessing: PreprocessingOverrides = field(default_factory=PreprocessingOverrides)
    task: Task | None = None
    output_format: OutputFormat | None = None
    report_dir: Path | None = None
    extra_metadata: Mapping[str, Any] | None = None  # merged into the edgekit metadata, its keys winning
    # Per-layer recipe (ai-edge-quantizer): op types (CONCATENATION) or pieces of op output names
    # kept in float, and layers given int16 activations.
    keep_float: Sequence[str] = ()
    int16: Sequence[str] = ()
    verbose: bool = False
    progress: bool = True
    # ONNX in: the input layout when its shape reads both ways (Layout, or "nchw" | "nhwc"); and whether
    # to split a YOLO head whose one output mixes boxes and scores (the int8 collapse) before converting.
    layout: Layout | None = None
    split_head: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", Mode.parse(self.mode))
        if self.task is not None:
            object.__setattr__(self, "task", Task.parse(self.task))
        if self.output_format is not None:
            object.__setattr__(self, "output_format", OutputFormat.parse(self.output_format))
        if self.layout is not None:
            object.__setattr__(self, "layout", Layout.parse(self.layout))
        if self.report_dir is not None:
            object.__setattr__(self, "report_dir", Path(self.report_dir))
        for name in ("num_calibration", "num_validation"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 < self.holdout < 1.0:
            raise InputError(f"holdout must be a fraction between 0 and 1, got {self.holdout}")
        targets = self.gate_targets  # its checks say what a bad limit is
        if self.auto_fallback and not targets.given:
            raise InputError("auto_fallback needs a gate to aim for: give max_drop (--max-drop POINTS) or a "
                             "detector's min_box_iou / max_score_error / max_extra_boxes (--min-box-iou 0.95)")
        if self.auto_fallback and not self.mode.int8_body:
            raise InputError(f"auto_fallback keeps int8 layers in float; mode {self.mode.value!r} has none. "
                             "Use --mode int8, uint8, int8-float-io or edgetpu")
        if self.max_fallback_layers < 1:
            raise InputError(f"max_fallback_layers must be at least 1, got {self.max_fallback_layers}")
        for name in ("keep_float", "int16"):  # one name or several; a lone string is one name, not its letters
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(str(v) for v in value))
        if (self.keep_float or self.int16) and self.mode in (Mode.FLOAT32, Mode.FLOAT16):
            raise InputError(f"keep_float/int16 (--keep-float, --int16) choose how layers are quantized; mode "
                             f"{self.mode.value!r} quantizes none. Use --mode int8 (or dynamic, weight-only)")

    @property
    def gate_targets(self) -> GateTargets:
        """The gate's limits (validated there)."""
        return GateTargets(self.max_drop, self.min_box_iou, self.max_score_error, self.max_extra_boxes)
