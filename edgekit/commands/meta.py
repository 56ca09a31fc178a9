"""`edgekit meta MODEL ...`: write what edgekit needs to read a model into its edgekit metadata.

For models that come without it (a MediaPipe detector, a public DeepLab): a model family's preset
(its reference preprocessing and decoding options), the anchor options of a raw anchor-based
detector, the task and output format that settle a model whose outputs read two ways, labels, and
the preprocessing (resize mode, mean/std or a value range, pad value, interpolation). Keys not given keep their value; the file is rewritten
atomically (or written to -o OUT). Without options it prints the metadata.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Mapping

from edgekit.contract import Interpolation, Normalization, OutputFormat, ResizeMode, Task
from edgekit.contract.presets import PRESETS
from edgekit.contract.anchors import ANCHOR_PRESETS, AnchorSpec
from edgekit.contract.metadata import ModelMetadata
from edgekit.errors import InputError, ModelError
from edgekit.labels import load_labels
from edgekit.runtimes.tensors import inspect_model

__all__ = ["register", "run", "updated_metadata"]


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser(
        "meta", help="write anchor options, task, output format or labels into a model's edgekit metadata",
        description="Add to (or show) the edgekit metadata of a .tflite file: the JSON every edgekit command "
                    "reads before guessing from output shapes. Interpreters ignore it; the model runs as before.",
        formatter_class=HelpFormatter)
    p.add_argument("model", metavar="MODEL", help="the .tflite file")
    p.add_argument("--anchors", metavar="PRESET|FILE.json",
                   help=f"SSD anchor and decoding options of a raw anchor model: a preset "
                        f"({', '.join(ANCHOR_PRESETS)}) or a JSON file {{\"ssd\": {{...}}, \"decode\": {{...}}}} "
                        "with MediaPipe's SsdAnchorsCalculator and TensorsToDetectionsCalculator fields")
    p.add_argument("--task", choices=[t.value for t in Task], help="what the model is for")
    p.add_argument("--output-format", choices=[f.value for f in OutputFormat],
                   help="how its outputs are laid out (settles a model whose outputs read two ways)")
    p.add_argument("--labels", metavar="FILE", help="labels file (one per line, or 'id label')")
    p.add_argument("--resize", choices=[m.value for m in ResizeMode], help="how frames fit its input")
    p.add_argument("--preset", choices=sorted(PRESETS), metavar="NAME",
                   help="write a model family's reference preprocessing and decoding options "
                        f"({', '.join(sorted(PRESETS))})")
    p.add_argument("--mean", type=float, nargs="+", metavar="M", help="real = (pixel - mean) / std: one value or three")
    p.add_argument("--std", type=float, nargs="+", metavar="S", help="with --mean: one value or three")
    p.add_argument("--range", type=float, nargs=2, metavar=("MIN", "MAX"),
                   help="the value range pixels 0..255 map to (e.g. 0 1, -1 1); instead of --mean/--std")
    p.add_argument("--pad-value", type=int, metavar="0..255", help="the letterbox border's pixel value")
    p.add_argument("--interpolation", choices=[i.value for i in Interpolation], help="how frames are resampled")
    p.add_argument("-o", "--output", metavar="OUT.tflite", help="write here instead of rewriting MODEL")
    p.set_defaults(func=run)


def _anchors(value: str) -> AnchorSpec:
    if value in ANCHOR_PRESETS:
        return ANCHOR_PRESETS[value]
    path = Path(value)
    if path.suffix.lower() != ".json":
        raise InputError(f"--anchors {value!r}: not a preset ({', '.join(ANCHOR_PRESETS)}) nor a .json file")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read --anchors {value!r}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"--anchors {value!r} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InputError(f"--anchors {value!r} holds {type(doc).__name__}, not an object")
    try:
        return AnchorSpec.from_dict(doc)
    except ModelError as exc:
        raise InputError(str(exc).replace("the model's anchor options", f"--anchors {value!r}")) from None


def updated_metadata(current: Mapping[str, Any] | None, args: argparse.Namespace) -> dict[str, Any]:
    """``current`` with the keys the arguments give replaced (a value it held that makes no sense is
    kept as it was unless the arguments replace it: this is how a file is repaired).

    Raises:
        InputError: the anchor file or labels file is missing or invalid.
    """
    meta = ModelMetadata.parse(current, keep_bad=True)
    if args.anchors:
        meta = meta.with_values(anchors=_anchors(args.anchors).to_metadata(), task=meta.task or Task.DETECT,
                                output_format=meta.output_format or OutputFormat.ANCHORS)
    if args.task:
        meta = meta.with_values(task=Task.parse(args.task))
    if args.output_format:
        meta = meta.with_values(output_format=OutputFormat.parse(args.output_format))
    if args.labels:
        meta = meta.with_values(labels=tuple(load_labels(args.labels)))
    pre = dict(meta.preprocessing)
    if getattr(args, "preset", None):
        preset = ModelMetadata.parse(PRESETS[args.preset].to_metadata())
        meta = meta.with_values(task=preset.task or meta.task, output_format=preset.output_format or meta.output_format,
                                anchors=preset.anchors if preset.anchors is not None else meta.anchors)
        pre.update(preset.preprocessing)
    pre.update(_preprocessing_options(args))
    return meta.with_values(preprocessing=pre).to_document()


def _preprocessing_options(args: argparse.Namespace) -> dict[str, Any]:
    """The preprocessing keys the arguments set, checked.

    Raises:
        InputError: mean without std, a range or pad value out of bounds, or values that make no sense.
    """
    out: dict[str, Any] = {}
    if args.resize:
        out["resize"] = args.resize
    mean, std, value_range = getattr(args, "mean", None), getattr(args, "std", None), getattr(args, "range", None)
    if value_range is not None:
        if mean is not None or std is not None:
            raise InputError("give --range MIN MAX or --mean/--std, not both")
        lo, hi = value_range
        if not hi > lo:
            raise InputError(f"--range needs MIN < MAX, got {lo:g} {hi:g}")
        std = [255.0 / (hi - lo)]
        mean = [-lo * std[0]]
    if (mean is None) != (std is None):
        raise InputError("give both --mean and --std (or --range MIN MAX)")
    if mean is not None and std is not None:
        norm = Normalization(tuple(mean), tuple(std))  # one number or three, std not 0 (InputError)
        out["mean"], out["std"] = list(norm.mean or ()), list(norm.std or ())
    pad = getattr(args, "pad_value", None)
    if pad is not None:
        if not 0 <= pad <= 255:
            raise InputError(f"--pad-value is one pixel value, 0..255; got {pad}")
        out["pad_value"] = pad
    if getattr(args, "interpolation", None):
        out["interpolation"] = args.interpolation
    return out


def run(args: argparse.Namespace) -> int:
    info = inspect_model(args.model)
    changes = any((args.anchors, args.task, args.output_format, args.labels, args.resize, args.preset,
                   args.mean, args.std, args.range, args.pad_value is not None, args.interpolation))
    if not changes:
        print(json.dumps(info.metadata or {}, indent=2, sort_keys=True))
        return 0
    doc = updated_metadata(info.metadata, args)
    from edgekit.contract.modelreading import read_model
    from edgekit.converters.metadata_writer import write_metadata_file

    reading = read_model(info, metadata=doc)  # the model as the device will read it: a bad set writes nothing
    if reading.task is Task.DETECT:  # the boxes' decoder checks the outputs fit the format
        from edgekit.contract.decode import decoder_for

        decoder_for(reading)
    target = write_metadata_file(args.model, doc, args.output)
    print(f"wrote the edgekit metadata of {str(target)!r}: {', '.join(sorted(doc))}; outputs read as "
          f"{reading.format.value} ({reading.why})")
    return 0
