"""ONNX models in: checked, read for their input, converted to a SavedModel by onnx2tf.

The model is read and checked here before anything is converted: a truncated file, more than
one input, spatial dimensions left dynamic (give ``--imgsz``) or an op onnx2tf has no converter
for (named, with its node) stop with one sentence. The input layout (NCHW as PyTorch exports,
or NHWC), its size and, for Ultralytics exports, class names and preprocessing (pixels / 255,
RGB, letterbox) come from the graph and its metadata; flags override them.

onnx2tf runs in a child process (it sets TF_USE_LEGACY_KERAS and prints to the terminal) in a
temporary working folder where ``calibration_image_sample_data_20x128x128x3_float32.npy`` is
written from the user's calibration images, so it never fetches its sample images from the
network. It writes a SavedModel taking NHWC input with a batch of 1, which the converter
engine then quantizes like any other.

The float reference of the accuracy check is the ONNX model itself, run by onnxruntime on the
same preprocessed inputs (transposed to NCHW when the model takes NCHW).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.contract.enums import BoxMapping, Interpolation, Layout, ResizeMode
from edgekit.converters.sources.base import PreprocessingHint, SourceModel
from edgekit.converters.yolo_head import HeadSplit, split_onnx_head
from edgekit.errors import ConversionError, InputError

__all__ = ["OnnxInput", "OnnxHints", "OnnxModel", "OnnxReference", "open_onnx", "read_onnx", "onnx_input",
           "onnx_hints", "check_ops", "supported_ops", "fix_input_shape", "sample_images", "run_onnx2tf",
           "require_onnx", "OnnxSource", "load_onnx", "ONNX_INSTALL"]

ONNX_INSTALL = "pip install 'edgekit-tflite[convert]'"
SAMPLE_FILE = "calibration_image_sample_data_20x128x128x3_float32.npy"  # what onnx2tf looks for in its cwd
_ONNX2TF = (
    "import json, sys\n"
    "args = json.loads(sys.argv[1])\n"
    "import onnx2tf\n"
    "onnx2tf.convert(**args)\n"
)


def require_onnx() -> None:
    """Raises ConversionError naming the pip command when onnx, onnxruntime or onnx2tf is missing."""
    missing = [m for m in ("onnx", "onnxruntime", "onnx2tf") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConversionError(f"converting ONNX models needs {', '.join(missing)}, which is not installed here. "
                              f"Run: {ONNX_INSTALL}")


@dataclass(frozen=True)
class OnnxInput:
    """The one image input: its name, layout, and size once fixed (batch 1)."""

    name: str
    nchw: bool
    height: int
    width: int
    channels: int

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The ONNX model's own input shape."""
        if self.nchw:
            return 1, self.channels, self.height, self.width
        return 1, self.height, self.width, self.channels

    @property
    def nhwc_shape(self) -> tuple[int, int, int, int]:
        return 1, self.height, self.width, self.channels


@dataclass(frozen=True)
class OnnxHints:
    """What an exporter's metadata tells: class names, size, preprocessing."""

    labels: tuple[str, ...] | None = None
    imgsz: tuple[int, int] | None = None  # (height, width)
    ultralytics: bool = False


def read_onnx(path: Path) -> tuple[Any, bytes]:
    """Parse and check an ONNX file.

    Raises:
        InputError: the file is not a complete, valid ONNX model.
        ConversionError: an op onnx2tf has no converter for.
    """
    import onnx

    data = path.read_bytes()
    if not data:
        raise InputError(f"{str(path)!r} is empty; expected an ONNX model")
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise InputError(f"{str(path)!r} is not a complete ONNX model (truncated or not ONNX: "
                         f"{_first_line(exc)}); export it again") from None
    if not model.graph.node:
        raise InputError(f"{str(path)!r} holds no ONNX graph (truncated or not ONNX); export it again")
    check_ops(model, path)  # before the checker, which only says "No Op registered"
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001 - onnx.checker.ValidationError and others
        raise InputError(f"{str(path)!r} is not a valid ONNX model (truncated or damaged?): "
                         f"{_first_line(exc)}") from None
    return model, data


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def supported_ops() -> frozenset[str]:
    """The ONNX op types onnx2tf converts (one module per op in onnx2tf.ops), without importing it."""
    spec = importlib.util.find_spec("onnx2tf")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    folder = Path(next(iter(spec.submodule_search_locations))) / "ops"
    return frozenset(p.stem for p in folder.glob("*.py") if p.stem[:1].isupper())


def check_ops(model: Any, path: Path) -> None:
    """Raises ConversionError naming the first op onnx2tf cannot convert, and where it is."""
    ops = supported_ops()
    nodes = list(model.graph.node)
    for i, node in enumerate(nodes):
        custom = node.domain not in ("", "ai.onnx")
        if custom or (ops and node.op_type not in ops):
            before = nodes[i - 1] if i else None
            where = f"node {i + 1} of {len(nodes)}, {node.name or '(unnamed)'!r}, input {list(node.input)[:2]}"
            after = f", after {before.op_type} {before.name!r}" if before is not None else ""
            domain = f" of domain {node.domain!r}" if custom else ""
            raise ConversionError(f"{str(path)!r}: op {node.op_type!r}{domain} ({where}{after}) has no onnx2tf "
                                  "converter; replace it in the export (e.g. a different opset or "
                                  "simplifier) or export without it")


def onnx_hints(model: Any) -> OnnxHints:
    """Class names, image size and whether it is an Ultralytics export, from metadata_props."""
    props = {p.key: p.value for p in model.metadata_props}
    labels: tuple[str, ...] | None = None
    if "names" in props:
        try:
            names = ast.literal_eval(props["names"])  # "{0: 'person', ...}": a literal, never code
            labels = tuple(str(names[k]) for k in sorted(names)) if isinstance(names, dict) \
                else tuple(str(n) for n in names)
        except (ValueError, SyntaxError, TypeError):
            labels = None
    imgsz = None
    if "imgsz" in props:
        try:
            size = ast.literal_eval(props["imgsz"])
            size = [size, size] if isinstance(size, int) else list(size)
            imgsz = (int(size[0]), int(size[1]))
        except (ValueError, SyntaxError, TypeError, IndexError):
            imgsz = None
    ultra = "ultralytics" in (props.get("author", "") + props.get("description", "")).lower()
    return OnnxHints(labels, imgsz, ultra)


def onnx_input(model: Any, path: Path, input_size: tuple[int, int] | None, layout: str | None,
               hints: OnnxHints) -> OnnxInput:
    """The one image input with batch and spatial size fixed.

    Args:
        input_size: (width, height) from --imgsz, for dynamic spatial dimensions.
        layout: "nchw" or "nhwc" from --layout, when the shape reads both ways.

    Raises:
        ConversionError: more than one input, not 4-D, or a non-float input.
        InputError: spatial dimensions are dynamic and no size was given, or the layout is unclear.
    """
    init = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in init]
    if len(inputs) != 1:
        raise ConversionError(f"{str(path)!r} has {len(inputs)} inputs ({[i.name for i in inputs]}); edgekit "
                              "converts single-input image models")
    inp = inputs[0]
    tt = inp.type.tensor_type
    dims: list[int | None] = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                              for d in tt.shape.dim]
    if len(dims) != 4:
        raise ConversionError(f"{str(path)!r}: input {inp.name!r} has shape {dims}; edgekit converts image "
                              "models with a 4-D input ([1, 3, H, W] or [1, H, W, 3])")
    if tt.elem_type != 1:  # TensorProto.FLOAT
        raise ConversionError(f"{str(path)!r}: input {inp.name!r} is not float32; export the float model")
    if layout is not None:
        nchw = Layout.parse(layout) is Layout.NCHW
    elif dims[1] in (1, 3) and dims[3] not in (1, 3):
        nchw = True
    elif dims[3] in (1, 3) and dims[1] not in (1, 3):
        nchw = False
    else:
        raise InputError(f"{str(path)!r}: cannot tell the layout of input {inp.name!r} {dims}; "
                         "give --layout nchw or --layout nhwc")
    c, h, w = (dims[1], dims[2], dims[3]) if nchw else (dims[3], dims[1], dims[2])
    if input_size is not None:
        for got, want, what in ((w, input_size[0], "width"), (h, input_size[1], "height")):
            if got is not None and got != want:
                raise InputError(f"{str(path)!r} takes {w}x{h} images; --imgsz {input_size[0]}x{input_size[1]} "
                                 "does not fit. Drop the flag or export the model again")
        w, h = input_size
    elif (h is None or w is None) and hints.imgsz is not None:
        h, w = hints.imgsz
    if h is None or w is None:
        shown = [d.dim_param or "?" if not d.dim_value else d.dim_value for d in tt.shape.dim]
        raise InputError(f"{str(path)!r} has dynamic spatial dimensions {shown}; give the input size with "
                         "--imgsz 640 (or WxH)")
    if c is None:
        raise InputError(f"{str(path)!r}: the channel dimension of input {inp.name!r} is dynamic; export it fixed")
    return OnnxInput(inp.name, nchw, int(h), int(w), int(c))


_PIXEL_OPS = {"Div": lambda c: c > 1.5, "Mul": lambda c: 0 < c < 0.67, "Sub": lambda c: c > 1.5}


def graph_normalization(model: Any, input_name: str) -> PreprocessingHint | None:
    """A model that normalizes pixels itself (its first op divides by 255, multiplies by 1/255 or
    subtracts a pixel mean) takes raw pixels 0..255: mean 0, std 1. None when it does not show."""
    from onnx import numpy_helper

    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    name = input_name
    for node in model.graph.node:  # past layout ops on the input, to the first arithmetic op
        if name not in node.input:
            continue
        if node.op_type in ("Transpose", "Cast", "Identity"):
            name = node.output[0]
            continue
        other = next((consts[i] for i in node.input if i != name and i in consts), None)
        test = _PIXEL_OPS.get(node.op_type)
        if test is None or other is None or other.size == 0:
            return None
        value = float(np.mean(np.abs(other)))
        if not test(value):
            return None
        return PreprocessingHint(mean=(0.0,), std=(1.0,), resize=ResizeMode.STRETCH,
                                 description=f"model: {node.op_type} by {value:.4g} at its input "
                                             f"({node.name or node.op_type!r}), so it takes raw pixels 0..255")
    return None


def fix_input_shape(model: Any, spec: OnnxInput) -> Any:
    """A copy of `model` whose input is exactly spec.shape (batch 1, the chosen size)."""
    import onnx

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    inp = next(i for i in fixed.graph.input if i.name == spec.name)
    for d, v in zip(inp.type.tensor_type.shape.dim, spec.shape):
        d.Clear()
        d.dim_value = v
    return fixed


class OnnxReference:
    """The ONNX model run by onnxruntime: the float reference the accuracy check measures against."""

    def __init__(self, model_bytes: bytes, spec: OnnxInput) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own Fail/InvalidGraph types
            raise ConversionError(f"onnxruntime cannot load the ONNX model: {_first_line(exc)}") from None
        self._spec = spec
        self.name = f"onnxruntime {ort.__version__}"

    def run(self, x: np.ndarray) -> list[np.ndarray]:
        """The outputs for one NHWC sample (batch 1), as the ONNX model gives them.

        Raises:
            ConversionError: onnxruntime failed on the input.
        """
        feed = np.ascontiguousarray(x.transpose(0, 3, 1, 2) if self._spec.nchw else x, np.float32)
        try:
            return [np.asarray(o) for o in self._session.run(None, {self._spec.name: feed})]
        except Exception as exc:  # noqa: BLE001
            raise ConversionError(f"onnxruntime failed to run the ONNX model: {_first_line(exc)}") from None


def sample_images(x: np.ndarray | None, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """20 images (20, 128, 128, 3) in 0..1 for onnx2tf's own checks, from model inputs (N, H, W, 3)
    undone to pixels; a seeded noise pattern when there are none (never a download)."""
    import cv2

    if x is None or len(x) == 0 or x.shape[-1] != 3:
        return np.random.default_rng(0).random((20, 128, 128, 3), dtype=np.float32)
    pixels = np.asarray(x[:20], np.float32) * np.asarray(std, np.float32) + np.asarray(mean, np.float32)
    images = [cv2.resize(np.clip(p / 255.0, 0, 1), (128, 128), interpolation=cv2.INTER_AREA) for p in pixels]
    while len(images) < 20:
        images += images[:20 - len(images)]
    return np.stack(images).astype(np.float32)


def run_onnx2tf(model: Any, samples: np.ndarray, workdir: Path, verbose: bool = False) -> Path:
    """Convert `model` (fixed input shape) to a SavedModel under `workdir` with onnx2tf in a child process.

    Raises:
        ConversionError: onnx2tf failed (its last error line is in the message).
    """
    import onnx

    workdir.mkdir(parents=True, exist_ok=True)
    np.save(workdir / SAMPLE_FILE, samples.astype(np.float32), allow_pickle=False)
    onnx.save_model(model, str(workdir / "model.onnx"))
    out = workdir / "saved_model"
    args = {"input_onnx_file_path": str(workdir / "model.onnx"), "output_folder_path": str(out),
            "output_signaturedefs": True, "non_verbose": not verbose,
            "copy_onnx_input_output_names_to_tflite": True}
    # onnx2tf runs the `onnxsim` command: the one beside this interpreter, even from an unactivated venv
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    path = os.pathsep.join([*_onnxsim_shim(path, workdir), path])
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "-1", "PYTHONNOUSERSITE": "1",
           "PATH": path}
    proc = subprocess.run([sys.executable, "-c", _ONNX2TF, json.dumps(args)], cwd=workdir, env=env,
                          capture_output=not verbose, text=True, check=False)
    if proc.returncode != 0 or not (out / "saved_model.pb").is_file():
        log = ((proc.stdout or "") + (proc.stderr or "")).splitlines()
        errors = [ln.strip() for ln in log if "error" in ln.lower() and ln.strip()] or log[-2:]
        detail = " | ".join(dict.fromkeys(_plain(e) for e in errors[-3:]))[:500] or f"exit status {proc.returncode}"
        raise ConversionError(f"onnx2tf could not convert the ONNX model: {detail}. Run with --verbose to see "
                              "its log")
    return out


def _onnxsim_shim(path: str, workdir: Path) -> list[str]:
    """A folder with an ``onnxsim`` command running this interpreter's onnxsim package, when the package is
    importable but its command is on no PATH (a venv that sees its packages through a .pth file): without
    it onnx2tf skips simplification, leaves the YOLO decode's shapes unknown and fails at its last Mul."""
    import shutil

    if os.name != "posix" or shutil.which("onnxsim", path=path) or importlib.util.find_spec("onnxsim") is None:
        return []
    shim = workdir / "bin" / "onnxsim"
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m onnxsim "$@"\n')
    shim.chmod(0o755)
    return [str(shim.parent)]


def _plain(line: str) -> str:
    """A log line without terminal colour codes."""
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", line)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class OnnxModel:
    """An ONNX model read and checked: what the source loader needs to build a SourceModel."""

    path: Path
    model: Any  # fixed input shape
    data: bytes
    spec: OnnxInput
    hints: OnnxHints
    split: tuple[Any, HeadSplit] | None

    @property
    def for_conversion(self) -> Any:
        return self.split[0] if self.split is not None else self.model


def open_onnx(path: Path, input_size: tuple[int, int] | None, layout: str | None,
              split_head: bool) -> OnnxModel:
    """Read, check and fix the input of an ONNX model; split a mixed YOLO head when asked.

    Raises:
        InputError: truncated/invalid file, dynamic size without --imgsz, unclear layout.
        ConversionError: the onnx extra is missing, an unsupported op, several inputs.
    """
    require_onnx()
    model, data = read_onnx(path)
    hints = onnx_hints(model)
    spec = onnx_input(model, path, input_size, layout, hints)
    fixed = fix_input_shape(model, spec)
    split = split_onnx_head(fixed) if split_head else None
    return OnnxModel(path, fixed, data, spec, hints, split)


@dataclass
class OnnxSource(SourceModel):
    """An ONNX model to convert: ``input_shape`` is the NHWC view (1, H, W, C) the converted
    .tflite takes; the SavedModel is built by :meth:`build` once calibration images are known."""

    onnx: OnnxModel | None = None
    verbose: bool = False

    def build(self, x: np.ndarray | None, mean: tuple[float, ...], std: tuple[float, ...]) -> None:
        """Run onnx2tf (once) with onnx2tf's sample images made from `x` (model inputs).

        Raises:
            ConversionError: onnx2tf failed.
        """
        if self.saved_model_dir is not None or self.onnx is None:
            return
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="edgekit-onnx-")
        self.saved_model_dir = run_onnx2tf(self.onnx.for_conversion, sample_images(x, mean, std),
                                           Path(self._tmp.name), self.verbose)


def load_onnx(path: Path, input_size: tuple[int, int] | None = None, layout: str | None = None,
              split_head: bool = True, verbose: bool = False) -> OnnxSource:
    """An :class:`OnnxSource` for the ONNX file at `path` (see :func:`open_onnx` for what raises)."""
    m = open_onnx(path, input_size, layout, split_head)
    hint = graph_normalization(m.model, m.spec.name)
    if hint is None and m.hints.ultralytics:
        hint = PreprocessingHint(mean=(0.0,), std=(255.0,), resize=ResizeMode.LETTERBOX,
                                 description="Ultralytics export metadata: RGB pixels / 255, letterboxed",
                                 interpolation=Interpolation.LINEAR, box_mapping=BoxMapping.ULTRALYTICS)
    return OnnxSource(name=path.name, sha256=sha256_bytes(m.data), input_shape=m.spec.nhwc_shape,
                      input_dtype="float32", model_name=m.model.graph.name or path.stem,
                      reference=OnnxReference(m.model.SerializeToString(), m.spec),
                      head_split=m.split[1] if m.split is not None else None, labels=m.hints.labels,
                      preprocessing_hint=hint, onnx=m, verbose=verbose)
