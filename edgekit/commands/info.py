"""`edgekit info MODEL`: what a .tflite file holds, read from the file alone.

It never creates an interpreter, so it is safe on any file, including one that would
crash or hang an interpreter, and on a machine without the Edge TPU. With ``--load`` it
also loads the model, always isolated (``load_model(..., isolate=True)``): the file is
first run once in a child process, so a file that crashes or hangs the interpreter is
reported (exit 2) instead of taking this process down.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from edgekit.commands._common import native_stderr_filtered, table
from edgekit.contract.enums import Layout
from edgekit.errors import BackendError
from edgekit.runtimes.backends import resolve_backend
from edgekit.runtimes.isolation import DEFAULT_ISOLATE_TIMEOUT
from edgekit.runtimes.loader import load_model
from edgekit.runtimes.tensors import inspect_model

if TYPE_CHECKING:
    from edgekit.contract.modelreading import ModelReading

__all__ = ["register", "run", "info_dict"]


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser(
        "info", help="describe a .tflite model (tensors, ops, Edge TPU, metadata)",
        description="Describe a .tflite model without running it: size, inputs and outputs with their "
                    "quantization, operator counts, Edge TPU compilation, custom ops, metadata, and "
                    "the interpreter that would load it.",
        formatter_class=HelpFormatter)
    p.add_argument("model", metavar="MODEL", help="the .tflite file")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--load", action="store_true",
                   help="also load the model and run it once on zeros, first in a separate process "
                        "(safe on untrusted files)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help=f"with --load: how long the trial run may take (default: $EDGEKIT_ISOLATE_TIMEOUT, "
                        f"else {DEFAULT_ISOLATE_TIMEOUT:g})")
    p.set_defaults(func=run)


def info_dict(path: str) -> dict[str, Any]:
    """ModelInfo.to_dict() plus the backend and delegate that loading would use.

    Raises:
        ModelError: the file is missing, not a TFLite model, or malformed.
    """
    info = inspect_model(path)
    d = info.to_dict()
    try:
        be = resolve_backend()
        d["backend"], d["backend_version"], d["backend_error"] = be.name, be.version, None
    except BackendError as exc:
        d["backend"], d["backend_version"], d["backend_error"] = None, None, str(exc)
    # What Delegate.AUTO resolves to for this file.
    d["delegate"] = "edgetpu" if info.edgetpu_compiled else "xnnpack"
    reading, why = _read(info)
    d["reading"] = {"task": None, "output_format": None, "why": why} if reading is None else \
        {"task": reading.task.value, "output_format": reading.format.value, "why": reading.why,
         "sources": {k: v.value for k, v in reading.sources.items()}}
    d["image_input"] = _image_input(info, reading)
    d["preprocessing"] = _preprocessing(info, reading)
    return d


def _read(info: Any) -> tuple[ModelReading | None, str]:
    """The model's reading (edgekit.contract.modelreading), or None and why edgekit will not guess."""
    from edgekit.contract.modelreading import read_model
    from edgekit.errors import ModelError

    try:
        return read_model(info), ""
    except ModelError as exc:
        return None, str(exc)


def _preprocessing(info: Any, reading: ModelReading | None) -> dict[str, Any] | None:
    """How edgekit would feed the model, and which source decided each setting (None: it would not)."""
    from edgekit.contract.preprocessing import preprocessing_for
    from edgekit.errors import EdgekitError

    if len(info.inputs) != 1:
        return None
    pre = reading.preprocessing if reading is not None else None
    if pre is None:  # the outputs read as no format (or the input as no image): fed as no task's
        try:
            pre = preprocessing_for(info, task=reading.task if reading is not None else None)
        except EdgekitError as exc:
            return {"error": str(exc)}
    return {**pre.to_dict(), "text": pre.describe()}


def _image_input(info: Any, reading: ModelReading | None) -> dict[str, Any] | None:
    """Size and layout of the image edgekit feeds the model (None: not one image input)."""
    from edgekit.contract import image_input
    from edgekit.errors import ModelError

    if len(info.inputs) != 1:
        return None
    try:
        got = reading.input if reading is not None and reading.input is not None else \
            image_input(info.inputs[0], info.metadata)
    except ModelError:
        return None
    return {"width": got.width, "height": got.height, "layout": got.layout.value}


def run(args: argparse.Namespace) -> int:
    d = info_dict(args.model)
    if args.load:
        with native_stderr_filtered(), load_model(args.model, isolate=True, isolate_timeout=args.timeout) as m:
            d["loaded"] = {**m.describe(), "notes": m.notes}
    if args.json:
        print(json.dumps(d, indent=2, default=str))
    else:
        print(render(d))
    return 0


def render(d: dict[str, Any]) -> str:
    """The human-readable report of :func:`info_dict`."""
    backend = (f"{d['backend']} {d['backend_version']}" if d["backend"]
               else f"none usable ({d['backend_error']})")
    n_ops = sum(d["ops"].values())
    summary = [
        ("model", d["path"]),
        ("size", f"{_size(d['size_bytes'])} ({d['size_bytes']:,} bytes)"),
        ("subgraphs", str(d["subgraphs"])),
        ("signatures", ", ".join(d["signatures"]) or "-"),
        ("edge tpu", "compiled (needs libedgetpu and an Edge TPU)" if d["edgetpu_compiled"] else "no"),
        ("custom ops", ", ".join(d["custom_ops"]) or "-"),
        ("would load", f"{backend}, delegate {d['delegate']}"),
        ("reads as", _reading_text(d.get("reading"))),
        ("image input", _layout_text(d.get("image_input"))),
        ("edgekit meta", _metadata_summary(d["metadata"])),
        ("tflite meta", _support_summary(d.get("support"))),
        ("fed as", _preprocessing_text(d.get("preprocessing"))),
        ("other meta", ", ".join(d["other_metadata"]) or "-"),
    ]
    if d.get("loaded"):
        got = d["loaded"]
        summary.append(("loaded", f"{got['backend']} {got['backend_version']}, delegate {got['delegate']}, "
                                  f"{got['num_threads']} threads, {got['init_ms']:.1f} ms (tried in a separate "
                                  "process first)" + "".join(f"; note: {n}" for n in got["notes"])))
    width = max(len(k) for k, _ in summary)
    parts = ["\n".join(f"{k.ljust(width)}  {v}" for k, v in summary)]
    for title in ("inputs", "outputs"):
        parts.append(f"{title}\n" + _tensor_table(d[title]))
    ops = table(["op", "count"], sorted(d["ops"].items(), key=lambda kv: (-kv[1], kv[0])),
                right=[False, True], indent="  ")
    parts.append(f"ops ({n_ops} in all)\n{ops}")
    return "\n\n".join(parts)


def _support_summary(support: dict[str, Any] | None) -> str:
    if not support:
        return "none"
    from edgekit.runtimes.support_metadata import SupportMetadata

    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in support.items()}  # its JSON
    return SupportMetadata(**fields).describe()


def _preprocessing_text(pre: dict[str, Any] | None) -> str:
    if not pre:
        return "- (not one image input)"
    return pre.get("text") or f"- ({pre.get('error')})"


def _layout_text(image: dict[str, Any] | None) -> str:
    if not image:
        return "- (not one RGB image input)"
    order = "channels first, as PyTorch exports" if Layout(image["layout"]) is Layout.NCHW else "channels last"
    return f"{image['width']}x{image['height']} RGB, {image['layout']} ({order})"


def _reading_text(r: dict[str, Any] | None) -> str:
    if not r:
        return "-"
    if r["output_format"] is None:
        return f"- ({r['why']})"
    return f"{r['task']}, {r['output_format']} ({r['why']})"


def _tensor_table(specs: list[dict[str, Any]]) -> str:
    rows = []
    for s in specs:
        quantized = s["scale"] != 0.0
        rows.append([s["index"], s["name"], _shape(s["shape"]), s["dtype"],
                     f"{s['scale']:.6g}" if quantized else "-", s["zero_point"] if quantized else "-"])
    return table(["#", "name", "shape", "dtype", "scale", "zero_point"], rows,
                 right=[True, False, False, False, True, True], indent="  ")


def _shape(shape: list[int]) -> str:
    # A tensor the file gives no shape (e.g. the outputs of SSD's post-processing op) gets
    # one when the interpreter allocates it.
    return "x".join(map(str, shape)) if shape else "(set at run time)"


def _size(n: int) -> str:
    for unit, div in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def _metadata_summary(meta: dict[str, Any] | None) -> str:
    from edgekit.contract.metadata import ModelMetadata
    from edgekit.errors import ModelError

    try:
        return ModelMetadata.parse(meta).summary()
    except ModelError as exc:
        return f"present, but {exc}"
