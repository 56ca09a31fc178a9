"""`edgekit convert MODEL --mode MODE -o OUT.tflite`: quantize, check against float, gate, write.

This module is imported on devices (the CLI builds every subcommand's parser), so it
must not import TensorFlow: the converter is imported inside :func:`run`.

Exit status: 0 written and within the gate; 3 the gate failed (the model is written as
OUT.FAILED-GATE.tflite, OUT.tflite is not); 2 bad input or a failed conversion.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from edgekit.commands._common import add_verbose_argument, positive_int
from edgekit.commands._defaults import FieldDefault
from edgekit.contract.enums import ColorOrder, Layout, OutputFormat, ResizeMode, Task
from edgekit.errors import ConversionError
from edgekit.outputs import output_file_arg, output_folder_arg

__all__ = ["register", "run", "build_options"]

# What `edgekit convert` reads a model as (the other tasks and formats are the device's own).
CONVERTED_TASKS = (Task.CLASSIFY, Task.DETECT)
CONVERTED_FORMATS = (OutputFormat.CLASSES, OutputFormat.SSD, OutputFormat.YOLO)
INSTALL = "pip install 'edgekit-tflite[convert]'"



def _OPTION(name: str) -> FieldDefault:  # noqa: N802 - reads as the constant it stands for
    """The flag's default is ConvertOptions' own (looked up when needed: no converter import here)."""
    return FieldDefault("edgekit.converters.options:ConvertOptions", name)

def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter
    from edgekit.converters.options import Mode  # only `edgekit convert` registers this (commands load lazily)

    p = subparsers.add_parser(
        "convert", help="convert a Keras/SavedModel/ONNX/float .tflite model to a checked int8/float16 .tflite",
        description="Convert a Keras (.keras/.h5), SavedModel, ONNX (.onnx, through onnx2tf; NCHW inputs "
                    "become NHWC) or float .tflite model (quantized by ai-edge-quantizer, itself the float reference) "
                    "to .tflite, calibrated on your data, "
                    "measured against the float model by the interpreter that runs on the device, with "
                    "per-layer diagnosis, an accuracy gate (exit 3) and edgekit metadata inside the file. "
                    f"Needs TensorFlow: {INSTALL}.",
        epilog="examples:\n"
               "  edgekit convert model.keras --mode int8 --calibration images/ -o model_int8.tflite\n"
               "  edgekit convert saved_model/ --mode uint8 --calibration cal.npz --max-drop 1 -o m.tflite\n"
               "  edgekit convert model.keras --compare-modes --calibration images/\n"
               "  edgekit convert yolov8n_float32.tflite --mode int8 --calibration images/ --resize letterbox "
               "--keep-float CONCATENATION -o yolo_int8.tflite\n"
               "  edgekit convert yolov8n.onnx --mode int8 --calibration data.yaml --max-drop 1 -o yolo_int8.tflite",
        formatter_class=HelpFormatter)
    p.add_argument("model", metavar="MODEL",
                   help="input kinds: a Keras file (.keras/.h5), a SavedModel folder, an ONNX file (.onnx) or a "
                        "float32 .tflite")
    p.add_argument("-o", "--output", type=output_file_arg, help="the .tflite to write (required unless --compare-modes)")
    p.add_argument("--mode", choices=[m.value for m in Mode], default=_OPTION("mode"), help="quantization mode")
    data = p.add_argument_group("data")
    data.add_argument("--calibration", metavar="PATH",
                      help="image folder (recursive; class sub-folders give labels), .npy or .npz")
    data.add_argument("--num-calibration", type=positive_int, default=_OPTION("num_calibration"), metavar="N",
                      help="calibration samples, drawn reproducibly with --seed")
    data.add_argument("--validation", metavar="PATH",
                      help="data to measure accuracy on; without it a random 20%% of --calibration is held out")
    data.add_argument("--num-validation", type=positive_int, default=_OPTION("num_validation"), metavar="N",
                      help="validation samples")
    data.add_argument("--seed", type=int, default=_OPTION("seed"), help="seed for sampling")
    data.add_argument("--labels", metavar="FILE", help="labels file (one per line); stored in the model")
    gate = p.add_argument_group("accuracy gate")
    gate.add_argument("--max-drop", type=float, metavar="POINTS",
                      help="fail (exit 3) when accuracy against labels (else top-1 agreement with the float "
                           "model, or detection mAP@0.5 against it) drops by more than this many points")
    gate.add_argument("--min-box-iou", type=float, metavar="IOU",
                      help="detectors: fail when the boxes matched with the float model's overlap them by less "
                           "than this mean IoU (e.g. 0.95)")
    gate.add_argument("--max-score-error", type=float, metavar="E",
                      help="detectors: fail when the matched boxes' scores differ from the float model's by more "
                           "than this on average (e.g. 0.02)")
    gate.add_argument("--max-extra-boxes", type=int, metavar="N",
                      help="detectors: fail when more than N boxes at the score threshold are not the float "
                           "model's (0: none)")
    gate.add_argument("--auto-fallback", action="store_true",
                      help="when the gate fails, keep the most sensitive layers in float and try again")
    gate.add_argument("--max-fallback-layers", type=positive_int, default=_OPTION("max_fallback_layers"), metavar="N",
                      help="at most this many layers kept in float")
    recipe = p.add_argument_group("per-layer recipe (ai-edge-quantizer; a float .tflite uses it always)")
    recipe.add_argument("--keep-float", action="append", metavar="OP_OR_NAME",
                        help="keep these ops in float: an op type (CONCATENATION, LOGISTIC) or a piece of an op's "
                             "output name; repeat the flag for more")
    recipe.add_argument("--int16", action="append", metavar="NAME",
                        help="int16 activations for the ops whose output name contains NAME (int8 modes); repeat")
    gate.add_argument("--no-diagnose", action="store_true",
                      help="skip the per-layer error analysis (QuantizationDebugger) of int8 modes")
    pre = p.add_argument_group("preprocessing (default: inferred from the model, e.g. a Rescaling layer)")
    pre.add_argument("--input-size", "--imgsz", dest="input_size", metavar="WxH",
                     help="input size for models whose size is not fixed (ONNX with dynamic height/width)")
    pre.add_argument("--layout", choices=sorted(v.value.lower() for v in Layout),
                     help="ONNX input layout, when its shape reads both ways (default: from the shape)")
    gate.add_argument("--no-split-head", action="store_true",
                      help="keep a YOLO head whose one output mixes boxes and scores as it is (by default it is "
                           "split into boxes and scores outputs, each with its own int8 scale)")
    pre.add_argument("--mean", metavar="M[,M,M]", help="real input = (pixel - mean) / std")
    pre.add_argument("--std", metavar="S[,S,S]", help="see --mean")
    pre.add_argument("--scale", type=float, metavar="S", help="real input = pixel * S (e.g. 0.00392157)")
    pre.add_argument("--color", choices=[c.value.lower() for c in ColorOrder],
                     help="channel order the model was trained on (unset: rgb, or what the model name implies)")
    pre.add_argument("--resize", choices=[m.value for m in ResizeMode],
                     help="how images fit the input (unset: stretch)")
    pre.add_argument("--task", choices=[t.value for t in CONVERTED_TASKS], help="default: from the outputs")
    pre.add_argument("--output-format", choices=[f.value for f in CONVERTED_FORMATS], help="default: from the outputs")
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    out.add_argument("--report-dir", "--report", dest="report_dir", metavar="DIR", type=output_folder_arg,
                     help="write report.json, report.md and the plots here")
    out.add_argument("--compare-modes", action="store_true",
                     help="convert in every mode and print size, latency, accuracy and agreement side by side")
    add_verbose_argument(out, help="show TensorFlow's and the converter's own log")
    out.add_argument("-q", "--quiet", action="store_true", help="no progress bars, no warnings")
    p.set_defaults(func=run)


def _floats(text: str | None, flag: str) -> tuple[float, ...] | None:
    from edgekit.errors import InputError

    if text is None:
        return None
    try:
        values = tuple(float(t) for t in text.replace(" ", ",").split(",") if t)
    except ValueError:
        raise InputError(f"{flag} takes one number or three separated by commas, got {text!r}") from None
    if len(values) not in (1, 3):
        raise InputError(f"{flag} takes one number or three separated by commas, got {text!r}")
    return values


def _size(text: str | None) -> tuple[int, int] | None:
    from edgekit.errors import InputError

    if text is None:
        return None
    parts = text.lower().replace(",", "x").split("x")
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        nums = []
    if len(nums) == 1:
        nums = nums * 2
    if len(nums) != 2 or min(nums) < 1:
        raise InputError(f"--input-size takes WIDTHxHEIGHT or one number, e.g. 224x224 or 224; got {text!r}")
    return nums[0], nums[1]


def build_options(args: argparse.Namespace) -> Any:
    """The ConvertOptions the flags describe (string choices mapped to enums here, once)."""
    from edgekit.converters import (
        ColorOrder,
        ConvertOptions,
        Mode,
        OutputFormat,
        PreprocessingOverrides,
        ResizeMode,
        Task,
    )

    pre = PreprocessingOverrides(
        input_size=_size(args.input_size), mean=_floats(args.mean, "--mean"), std=_floats(args.std, "--std"),
        scale=args.scale, color=ColorOrder.parse(args.color) if args.color else None,
        resize=ResizeMode.parse(args.resize) if args.resize else None)
    return ConvertOptions(
        mode=Mode.parse(args.mode), num_calibration=args.num_calibration, num_validation=args.num_validation,
        seed=args.seed, max_drop=args.max_drop, min_box_iou=args.min_box_iou, max_score_error=args.max_score_error,
        max_extra_boxes=args.max_extra_boxes, auto_fallback=args.auto_fallback,
        max_fallback_layers=args.max_fallback_layers, diagnose=not args.no_diagnose, labels=args.labels,
        preprocessing=pre, task=Task.parse(args.task) if args.task else None,
        output_format=OutputFormat.parse(args.output_format) if args.output_format else None,
        report_dir=Path(args.report_dir) if args.report_dir else None, verbose=args.verbose,
        layout=args.layout, split_head=not args.no_split_head,
        keep_float=tuple(args.keep_float or ()), int16=tuple(args.int16 or ()), progress=not args.quiet)


def _require_tensorflow() -> None:
    if importlib.util.find_spec("tensorflow") is None:
        raise ConversionError(f"`edgekit convert` needs TensorFlow, which is not installed here. Run: {INSTALL} "
                              "(on a workstation; devices only need the runtime)")


def _require_quantizer() -> None:
    if importlib.util.find_spec("ai_edge_quantizer") is None:
        raise ConversionError(f"quantizing a float .tflite (and --keep-float/--int16) needs ai-edge-quantizer, which "
                              f"is not installed here. Run: {INSTALL}")


def run(args: argparse.Namespace) -> int:
    if args.output is None and not args.compare_modes:
        from edgekit.errors import InputError

        raise InputError("give the output file with -o OUT.tflite (or use --compare-modes)")
    _require_tensorflow()
    from edgekit.converters.sources import ModelKind, model_kind

    kind = model_kind(args.model)
    if kind is ModelKind.ONNX:
        from edgekit.converters.sources.onnx import require_onnx

        require_onnx()
    if kind is ModelKind.FLOAT_TFLITE or args.keep_float or args.int16:
        _require_quantizer()
    opts = build_options(args)
    if args.compare_modes:
        return _compare(args, opts)
    from edgekit.converters import convert
    from edgekit.converters.report import summary_lines

    result = convert(args.model, args.output, calibration=args.calibration, validation=args.validation,
                     options=opts)
    doc = result.to_dict()
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print("\n".join(summary_lines(doc)))
        for path in result.report_paths:
            print(f"report: {path}")
    if not args.quiet:
        for w in result.warnings:
            print(f"edgekit convert: warning: {w}", file=sys.stderr)
    result.raise_for_status()
    return 0


def _compare(args: argparse.Namespace, opts: Any) -> int:
    from edgekit.converters import compare_modes, format_comparison

    rows = compare_modes(args.model, calibration=args.calibration, validation=args.validation, options=opts)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
    else:
        print(format_comparison(rows))
    return 0
