"""Bad inputs tried end to end: one table for tests/test_bad_inputs.py and benchmarks/bad_inputs_table.py.

Each :class:`Case` builds its input in a scratch folder, names the ``edgekit`` command line
that gets it, the exit status and first stderr line the user must see, and the same input
through the Python API with the exception it must raise (or None when it must work).
Files are made on demand (a 10000x10000 PNG is streamed row by row, never held in memory).
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgekit.errors import InputError, ModelError

__all__ = ["CASES", "Case", "CliResult", "Missing", "Workspace", "run_cli", "write_png_stream"]

ROOT = Path(__file__).resolve().parent.parent


class Missing(Exception):
    """A shared model or image a case needs is not on this machine."""


@dataclass
class Workspace:
    """Where a case builds its files, and where the shared models and images are."""

    root: Path
    models: Path | None
    images: Path | None
    _made: dict[str, Path] = field(default_factory=dict)

    def shared_model(self, name: str) -> Path:
        return self._shared(self.models, name)

    def shared_image(self, name: str) -> Path:
        return self._shared(self.images, name)

    @staticmethod
    def _shared(folder: Path | None, name: str) -> Path:
        if folder is None or not (folder / name).exists():
            raise Missing(f"{name} is not in {folder}")
        return folder / name

    def make(self, name: str, build: Callable[[Path], None]) -> str:
        """The path of `name` in the scratch folder, built once by `build(path)`."""
        if name not in self._made:
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            build(path)
            self._made[name] = path
        return str(self._made[name])

    def bytes_file(self, name: str, data: Callable[[], bytes]) -> str:
        return self.make(name, lambda p: p.write_bytes(data()))


# --- building bad files ----------------------------------------------------------------------
def write_png_stream(path: Path, width: int, height: int, *, rows: bool = True) -> None:
    """A black RGB PNG written a row at a time (memory stays small); rows=False writes the
    header alone, as a file that claims a size it does not hold."""
    def chunk(f: Any, kind: bytes, data: bytes) -> None:
        f.write(struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data)))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        chunk(f, b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        comp = zlib.compressobj(6)
        row = b"\x00" * (1 + 3 * width)
        body = b"".join(comp.compress(row) for _ in range(height if rows else 1)) + comp.flush()
        chunk(f, b"IDAT", body)
        chunk(f, b"IEND", b"")


def _image(ws: Workspace, name: str, make: Callable[[Any], Any]) -> str:
    """An image derived from parrot.jpg by `make(PIL image) -> (PIL image or array, format)`."""
    from PIL import Image

    def build(path: Path) -> None:
        with Image.open(ws.shared_image("parrot.jpg")) as im:
            out = make(im.convert("RGB"))
        if isinstance(out, np.ndarray):
            import cv2

            cv2.imwrite(str(path), out)
        else:
            out.save(path)
    return ws.make(name, build)


def _cut(data: bytes, fraction: float) -> bytes:
    return data[: int(len(data) * fraction)]


def _deref_field(buf: bytes, table: int, index: int) -> int:
    """Where the vector, string or table in field `index` of a flatbuffer table starts."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    pos = table + struct.unpack_from("<H", buf, vtable + 4 + 2 * index)[0]
    return pos + struct.unpack_from("<I", buf, pos)[0]


def _huge_vector_count(data: bytes) -> bytes:
    """The model's buffers vector (Model field 4) claims 2**31 - 1 entries."""
    buf = bytearray(data)
    vec = _deref_field(buf, struct.unpack_from("<I", buf, 0)[0], 4)
    struct.pack_into("<I", buf, vec, 0x7FFFFFFF)
    return bytes(buf)


def _rename_custom_op(data: bytes, old: bytes, new: bytes) -> bytes:
    """Rename the custom code of the operator code `old` in place (same length: nothing moves)."""
    buf = bytearray(data)
    codes = _deref_field(buf, struct.unpack_from("<I", buf, 0)[0], 1)
    for i in range(struct.unpack_from("<I", buf, codes)[0]):
        entry = codes + 4 + 4 * i
        table = entry + struct.unpack_from("<I", buf, entry)[0]
        text = _deref_field(buf, table, 1)
        if buf[text + 4:text + 4 + len(old)] == old:
            buf[text + 4:text + 4 + len(new)] = new
            return bytes(buf)
    raise ValueError(f"no custom op {old!r} in the model")


def _seed_model(name: str, edit: Callable[[Any], None]) -> bytes:
    """One of the fuzz seed models (tests/fuzz/seeds.py) with `edit` applied before packing."""
    from tests.fuzz.seeds import SEEDS, pack

    model = SEEDS[name]()
    edit(model)
    return pack(model)


def _set(obj: Any, **values: Any) -> None:
    for k, v in values.items():
        setattr(obj, k, v)


def _while_forever(m: Any) -> None:
    """The loop's limit becomes +inf: `i < inf` holds forever once i + 1 == i."""
    limit = m.subgraphs[1].tensors[1]
    m.buffers[limit.buffer].data = np.frombuffer(np.array([np.inf], np.float32).tobytes(), np.uint8)


def _ssd_with_options(ws: Workspace, options: bytes) -> bytes:
    from tests.fuzz.seeds import pack, unpack

    m = unpack(ws.shared_model("ssd_mobilenet_v1_coco_quant.tflite").read_bytes())
    for op in m.subgraphs[0].operators:
        if op.customOptions is not None:
            op.customOptions = list(options)
    return pack(m)


# --- running ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class CliResult:
    exit: int
    stderr: list[str]
    seconds: float
    peak_mb: float = 0.0  # the process's maximum resident set size

    @property
    def first_line(self) -> str:
        return self.stderr[0] if self.stderr else ""


def run_cli(argv: list[str], *, timeout: float = 120.0, env: dict[str, str] | None = None) -> CliResult:
    """``python -m edgekit ARGV`` as a user runs it (no EDGEKIT_DEBUG); a timeout is exit -9.

    Waits with os.wait4 to get this child's own peak memory (Linux and macOS).
    """
    import tempfile

    full_env = {k: v for k, v in os.environ.items() if not k.startswith("EDGEKIT_ISOLATE") and k != "EDGEKIT_DEBUG"}
    full_env.update(env or {})
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "edgekit", *argv], stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, env=full_env, cwd=ROOT)
        status, usage, timed_out = _wait(proc, timeout)
        err.seek(0)
        lines = [ln for ln in err.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    seconds = time.perf_counter() - t0
    # ru_maxrss is in KiB on Linux, bytes on macOS
    peak = usage.ru_maxrss / (1024 if sys.platform != "darwin" else 1024**2)
    if timed_out:
        return CliResult(-9, [f"(no answer within {timeout:g} s)", *lines], seconds, peak)
    return CliResult(status, lines, seconds, peak)


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, Any, bool]:
    deadline = time.monotonic() + timeout
    timed_out = False
    while True:
        pid, raw, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline and not timed_out:
            proc.kill()
            timed_out = True
        time.sleep(0.02)
    status = os.waitstatus_to_exitcode(raw)
    proc.returncode = status  # reaped here: keep Popen from waiting again
    return status, usage, timed_out


# --- the table -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    id: str
    group: str
    what: str                                   # the input, as README's table names it
    argv: Callable[[Workspace], list[str]]      # after `python -m edgekit`
    exit: int
    stderr: str                                 # regex the first stderr line matches ("" = no stderr)
    api: Callable[[Workspace], Any] | None = None
    api_error: type[BaseException] | None = None  # what `api` raises; None: it returns normally
    env: dict[str, str] = field(default_factory=dict)
    slow: bool = False
    timeout: float = 120.0

    def matches(self, result: CliResult) -> bool:
        if self.stderr == "":
            return not result.stderr
        return re.search(self.stderr, result.first_line) is not None


def _mnv1(ws: Workspace) -> str:
    return str(ws.shared_model("mobilenet_v1_0.25_128_quant.tflite"))


def _classify(model: Callable[[Workspace], str], image: Callable[[Workspace], str] | None = None
              ) -> Callable[[Workspace], list[str]]:
    def argv(ws: Workspace) -> list[str]:
        img = image(ws) if image else str(ws.shared_image("parrot.jpg"))
        return ["classify", "-m", model(ws), "--labels", str(ws.shared_model("imagenet_labels.txt")), "-k", "1", img]
    return argv


def _load(model: Callable[[Workspace], str], **kw: Any) -> Callable[[Workspace], Any]:
    def api(ws: Workspace) -> Any:
        from edgekit.runtimes import load_model

        with load_model(model(ws), **kw):
            return None
    return api


def _load_image(image: Callable[[Workspace], str]) -> Callable[[Workspace], Any]:
    def api(ws: Workspace) -> Any:
        from edgekit.preprocess import load_image

        arr = load_image(image(ws))
        if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
            raise AssertionError(f"load_image gave {arr.dtype} {arr.shape}, not RGB uint8")
        return arr.shape
    return api


def _model_case(id: str, what: str, model: Callable[[Workspace], str], stderr: str, **kw: Any) -> Case:
    return Case(id, "model", what, _classify(model), 2, stderr, api=_load(model), api_error=ModelError, **kw)


def _image_case(id: str, what: str, image: Callable[[Workspace], str], exit: int, stderr: str, **kw: Any) -> Case:
    return Case(id, "image", what, _classify(_mnv1, image), exit, stderr, api=_load_image(image),
                api_error=InputError if exit else None, **kw)


def _forever(ws: Workspace) -> str:
    return ws.bytes_file("forever.tflite", lambda: _seed_model("while", _while_forever))


MODEL_CASES = [
    _model_case("model-missing", "model path that does not exist", lambda ws: str(ws.root / "nope.tflite"),
                r"^edgekit classify: error: model file .* does not exist"),
    _model_case("model-directory", "a folder instead of a model", lambda ws: str(ws.root),
                r"^edgekit classify: error: .* is a directory, not a \.tflite file"),
    _model_case("model-empty", "empty file (0 bytes)", lambda ws: ws.bytes_file("empty.tflite", bytes),
                r"^edgekit classify: error: model .* is empty \(0 bytes\)"),
    _model_case("model-truncated", "model cut at half its size",
                lambda ws: ws.bytes_file("half.tflite", lambda: _cut(Path(_mnv1(ws)).read_bytes(), 0.5)),
                r"^edgekit classify: error: model .* is corrupt or truncated: .* lies outside the file"),
    _model_case("model-random", "64 KiB of random bytes",
                lambda ws: ws.bytes_file("random.tflite", lambda: np.random.default_rng(0).bytes(65536)),
                r"^edgekit classify: error: model .* is not a TFLite model: it lacks the 'TFL3' file identifier"),
    _model_case("model-identifier", "real model with its 'TFL3' identifier changed",
                lambda ws: ws.bytes_file("ident.tflite", lambda: Path(_mnv1(ws)).read_bytes().replace(b"TFL3", b"TFL2", 1)),
                r"^edgekit classify: error: model .* is not a TFLite model: it lacks the 'TFL3' file identifier"),
    _model_case("model-jpeg", "a JPEG renamed .tflite",
                lambda ws: ws.bytes_file("photo.tflite", lambda: ws.shared_image("parrot.jpg").read_bytes()),
                r"^edgekit classify: error: .* lacks the 'TFL3' file identifier \(a JPEG image\)"),
    _model_case("model-edgetpu", "Edge TPU model, no Edge TPU runtime",
                lambda ws: str(ws.shared_model("mobilenet_v1_0.25_128_quant_edgetpu.tflite")),
                r"^edgekit classify: error: model .* is compiled for the Edge TPU .* needs the Edge TPU delegate"),
    _model_case("model-custom-op", "SSD with its custom op renamed (TFLite_Detection_PostProcesX)",
                lambda ws: ws.bytes_file("custom.tflite", lambda: _rename_custom_op(ws.shared_model(
                    "ssd_mobilenet_v1_coco_quant.tflite").read_bytes(),
                    b"TFLite_Detection_PostProcess", b"TFLite_Detection_PostProcesX")),
                r"^edgekit classify: error: model .* uses custom op\(s\) TFLite_Detection_PostProcesX that "),
    _model_case("model-huge-count", "vector count 2**31-1 (buffers)",
                lambda ws: ws.bytes_file("count.tflite", lambda: _huge_vector_count(Path(_mnv1(ws)).read_bytes())),
                r"^edgekit classify: error: model .* is corrupt or truncated: a vector of 2147483647 elements"),
    _model_case("model-huge-shape", "tensor shape [1, 2**31-1]",
                lambda ws: ws.bytes_file("shape.tflite", lambda: _seed_model(
                    "add", lambda m: [_set(t, shape=[1, 2**31 - 1]) for t in m.subgraphs[0].tensors[::2]])),
                r"^edgekit classify: error: model .* is malformed: tensor 0 .* more than an interpreter can hold"),
    _model_case("model-absent-input", "ADD with input -1 (segfaults the interpreter unchecked)",
                lambda ws: ws.bytes_file("absent.tflite", lambda: _seed_model(
                    "add", lambda m: _set(m.subgraphs[0].operators[0], inputs=[-1, 1]))),
                r"^edgekit classify: error: model .* is malformed: operator 0 \(ADD\) .* leaves input 0 absent"),
    _model_case("model-while-recursion", "WHILE whose body is the main graph (segfaults unchecked)",
                lambda ws: ws.bytes_file("recurse.tflite", lambda: _seed_model(
                    "while", lambda m: _set(m.subgraphs[0].operators[0].builtinOptions, bodySubgraphIndex=0))),
                r"^edgekit classify: error: model .* is malformed: operator 0 \(WHILE\) .* calls subgraph 0"),
    _model_case("model-flexbuffer", "SSD post-processing options garbage (segfaults unchecked)",
                lambda ws: ws.bytes_file("flex.tflite", lambda: _ssd_with_options(ws, b"\x07" * 40 + b"\x24\x01")),
                r"^edgekit classify: error: model .* TFLite_Detection_PostProcess are not a valid FlexBuffer map"),
    Case("model-hang-info", "model", "WHILE loop that never ends: `info --load`",
         lambda ws: ["info", "--load", "--timeout", "3", _forever(ws)],
         2, r"^edgekit info: error: the TFLite interpreter did not load and run model .* within 3 s",
         api=_load(_forever, isolate=True, isolate_timeout=3), api_error=ModelError),
    Case("model-hang-isolate", "model", "WHILE loop that never ends: classify, EDGEKIT_ISOLATE=1",
         _classify(_forever), 2,
         r"^edgekit classify: error: the TFLite interpreter did not load and run model .* within 3 s",
         env={"EDGEKIT_ISOLATE": "1", "EDGEKIT_ISOLATE_TIMEOUT": "3"}),
]


IMAGE_CASES = [
    _image_case("image-missing", "image path that does not exist", lambda ws: str(ws.root / "nope.jpg"), 2,
                r"^edgekit classify: error: image file .* does not exist"),
    _image_case("image-empty", "empty image (0 bytes)", lambda ws: ws.bytes_file("empty.jpg", bytes), 2,
                r"^edgekit classify: error: image file .* is empty \(0 bytes\)"),
    _image_case("image-truncated", "JPEG cut at 40%", lambda ws: ws.bytes_file(
        "cut.jpg", lambda: _cut(ws.shared_image("parrot.jpg").read_bytes(), 0.4)), 2,
        r"^edgekit classify: error: image .* is truncated or corrupt"),
    _image_case("image-text", "text file named .jpg", lambda ws: ws.bytes_file("notes.jpg", lambda: b"hello\n" * 50), 2,
                r"^edgekit classify: error: .* is not an image Pillow can read"),
    _image_case("image-16bit-gray", "16-bit grayscale PNG", lambda ws: _image(
        ws, "gray16.png", lambda im: (np.asarray(im.convert("L"), np.uint16) * 257)), 0, ""),
    _image_case("image-16bit-rgb", "16-bit RGB PNG", lambda ws: _image(
        ws, "rgb16.png", lambda im: np.asarray(im, np.uint16)[:, :, ::-1] * 257), 0, ""),
    _image_case("image-gray", "grayscale JPEG", lambda ws: _image(ws, "gray.jpg", lambda im: im.convert("L")), 0, ""),
    _image_case("image-rgba", "RGBA PNG", lambda ws: _image(ws, "rgba.png", lambda im: im.convert("RGBA")), 0, ""),
    _image_case("image-cmyk", "CMYK JPEG", lambda ws: _image(ws, "cmyk.jpg", lambda im: im.convert("CMYK")), 0, ""),
    _image_case("image-1x1", "1x1 PNG", lambda ws: _image(ws, "one.png", lambda im: im.resize((1, 1))), 0, ""),
    _image_case("image-10000", "10000x10000 PNG (100 megapixels)", lambda ws: ws.make(
        "big.png", lambda p: write_png_stream(p, 10_000, 10_000)), 0, "", slow=True),
    _image_case("image-12000", "12000x10000 PNG header (120 megapixels)", lambda ws: ws.make(
        "bigger.png", lambda p: write_png_stream(p, 12_000, 10_000, rows=False)), 2,
        r"^edgekit classify: error: image .* is 12000x10000 \(120 megapixels\); edgekit reads at most 100"),
    _image_case("image-bomb", "40000x40000 PNG header (decompression bomb)", lambda ws: ws.make(
        "bomb.png", lambda p: write_png_stream(p, 40_000, 40_000, rows=False)), 2,
        r"^edgekit classify: error: image .* is larger than the 100 megapixels edgekit reads"),
]

CASES: list[Case] = [*MODEL_CASES, *IMAGE_CASES]
