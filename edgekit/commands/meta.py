"""`edgekit meta MODEL ...`: write what edgekit needs to read a model into its edgekit metadata.

For models that come without it (a MediaPipe detector, a public DeepLab): the anchor options of a
raw anchor-based detector, the task and output format that settle a model whose outputs read two
ways, labels and the resize mode. Keys not given keep their value; the file is rewritten
atomically (or written to -o OUT). Without options it prints the metadata.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from edgekit.contract import OutputFormat, ResizeMode, Task
from edgekit.contract.anchors import ANCHOR_PRESETS, AnchorSpec
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


def updated_metadata(current: dict[str, Any] | None, args: argparse.Namespace) -> dict[str, Any]:
    """``current`` with the keys the arguments give replaced.

    Raises:
        InputError: the anchor file or labels file is missing or invalid.
    """
    doc = dict(current or {})
    if args.anchors:
        doc["anchors"] = _anchors(args.anchors).to_metadata()
        doc.setdefault("task", Task.DETECT.value)
        doc.setdefault("output_format", OutputFormat.ANCHORS.value)
    if args.task:
        doc["task"] = args.task
    if args.output_format:
        doc["output_format"] = args.output_format
    if args.labels:
        doc["labels"] = load_labels(args.labels)
    if args.resize:
        pre = doc.get("preprocessing")
        doc["preprocessing"] = {**(pre if isinstance(pre, dict) else {}), "resize": args.resize}
    return doc


def run(args: argparse.Namespace) -> int:
    info = inspect_model(args.model)
    changes = any((args.anchors, args.task, args.output_format, args.labels, args.resize))
    if not changes:
        print(json.dumps(info.metadata or {}, indent=2, sort_keys=True))
        return 0
    doc = updated_metadata(info.metadata, args)
    from edgekit.contract.readings import read_outputs
    from edgekit.contract.recognize import task_of
    from edgekit.converters.metadata_writer import write_metadata_file

    reading = read_outputs(info.outputs, doc, inputs=info.inputs)  # checked first: a bad set writes nothing
    if task_of(reading.format) is Task.DETECT:  # the boxes' decoder checks the outputs fit the format
        from edgekit.contract.decode import make_decoder

        make_decoder(info.outputs, doc)
    target = write_metadata_file(args.model, doc, args.output)
    print(f"wrote the edgekit metadata of {str(target)!r}: {', '.join(sorted(doc))}; outputs read as "
          f"{reading.format.value} ({reading.why})")
    return 0
