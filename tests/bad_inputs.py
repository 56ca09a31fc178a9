"""Bad inputs tried end to end: one table for tests/edgekit/test_bad_inputs.py and benchmarks/bad_inputs_table.py.

Each :class:`Case` builds its input in a scratch folder (tests/bad_files.py), names the
``edgekit`` command line that gets it, the exit status and first stderr line the user
must see, and the same input through the Python API with the exception it must raise (or
None when it must work).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from edgekit.errors import InputError, ModelError
from tests.bad_files import (CliResult, Missing, Workspace, config_file, cut, huge_vector_count, derived_image,
                             image_folder, keras_model, rename_custom_op, seed_model, set_fields, ssd_with_options,
                             video_clip, while_forever, run_cli, write_png_stream)

__all__ = ["CASES", "Case", "CliResult", "Missing", "Workspace", "run_cli", "write_png_stream"]


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
        return re.search(self.stderr, result.message) is not None


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
    return ws.bytes_file("forever.tflite", lambda: seed_model("while", while_forever))


MODEL_CASES = [
    _model_case("model-missing", "model path that does not exist", lambda ws: str(ws.root / "nope.tflite"),
                r"^edgekit classify: error: model file .* does not exist"),
    _model_case("model-directory", "a folder instead of a model", lambda ws: str(ws.root),
                r"^edgekit classify: error: .* is a directory, not a \.tflite file"),
    _model_case("model-empty", "empty file (0 bytes)", lambda ws: ws.bytes_file("empty.tflite", bytes),
                r"^edgekit classify: error: model .* is empty \(0 bytes\)"),
    _model_case("model-truncated", "model cut at half its size",
                lambda ws: ws.bytes_file("half.tflite", lambda: cut(Path(_mnv1(ws)).read_bytes(), 0.5)),
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
                lambda ws: ws.bytes_file("custom.tflite", lambda: rename_custom_op(ws.shared_model(
                    "ssd_mobilenet_v1_coco_quant.tflite").read_bytes(),
                    b"TFLite_Detection_PostProcess", b"TFLite_Detection_PostProcesX")),
                r"^edgekit classify: error: model .* uses custom op\(s\) TFLite_Detection_PostProcesX that "),
    _model_case("model-huge-count", "vector count 2**31-1 (buffers)",
                lambda ws: ws.bytes_file("count.tflite", lambda: huge_vector_count(Path(_mnv1(ws)).read_bytes())),
                r"^edgekit classify: error: model .* is corrupt or truncated: a vector of 2147483647 elements"),
    _model_case("model-huge-shape", "tensor shape [1, 2**31-1]",
                lambda ws: ws.bytes_file("shape.tflite", lambda: seed_model(
                    "add", lambda m: [set_fields(t, shape=[1, 2**31 - 1]) for t in m.subgraphs[0].tensors[::2]])),
                r"^edgekit classify: error: model .* is malformed: tensor 0 .* more than an interpreter can hold"),
    _model_case("model-absent-input", "ADD with input -1 (segfaults the interpreter unchecked)",
                lambda ws: ws.bytes_file("absent.tflite", lambda: seed_model(
                    "add", lambda m: set_fields(m.subgraphs[0].operators[0], inputs=[-1, 1]))),
                r"^edgekit classify: error: model .* is malformed: operator 0 \(ADD\) .* leaves input 0 absent"),
    _model_case("model-while-recursion", "WHILE whose body is the main graph (segfaults unchecked)",
                lambda ws: ws.bytes_file("recurse.tflite", lambda: seed_model(
                    "while", lambda m: set_fields(m.subgraphs[0].operators[0].builtinOptions, bodySubgraphIndex=0))),
                r"^edgekit classify: error: model .* is malformed: operator 0 \(WHILE\) .* calls subgraph 0"),
    _model_case("model-flexbuffer", "SSD post-processing options garbage (segfaults unchecked)",
                lambda ws: ws.bytes_file("flex.tflite", lambda: ssd_with_options(ws, b"\x07" * 40 + b"\x24\x01")),
                r"^edgekit classify: error: model .* TFLite_Detection_PostProcess are not a valid FlexBuffer map"),
    Case("model-hang-info", "model", "WHILE loop that never ends: `info --load`",
         lambda ws: ["info", "--load", "--timeout", "3", _forever(ws)],
         2, r"^edgekit info: error: the TFLite interpreter did not load and run model .* within 3 s",
         api=_load(_forever, isolate=True, isolate_timeout=3), api_error=ModelError),
    Case("model-hang-isolate", "model", "WHILE loop that never ends: classify, EDGEKIT_ISOLATE=1",
         _classify(_forever), 2,
         r"^edgekit classify: error: the TFLite interpreter did not load and run model .* within 3 s",
         env={"EDGEKIT_ISOLATE": "1", "EDGEKIT_ISOLATE_TIMEOUT": "3"}),
    Case("model-hang-classify", "model", "WHILE loop that never ends: classify as it is (isolated by default)",
         _classify(_forever), 2,
         r"^edgekit classify: error: the TFLite interpreter did not load and run model .* within 3 s",
         env={"EDGEKIT_ISOLATE_TIMEOUT": "3"}),
]


IMAGE_CASES = [
    _image_case("image-missing", "image path that does not exist", lambda ws: str(ws.root / "nope.jpg"), 2,
                r"^edgekit classify: error: image file .* does not exist"),
    _image_case("image-empty", "empty image (0 bytes)", lambda ws: ws.bytes_file("empty.jpg", bytes), 2,
                r"^edgekit classify: error: image file .* is empty \(0 bytes\)"),
    _image_case("image-truncated", "JPEG cut at 40%", lambda ws: ws.bytes_file(
        "cut.jpg", lambda: cut(ws.shared_image("parrot.jpg").read_bytes(), 0.4)), 2,
        r"^edgekit classify: error: image .* is truncated or corrupt"),
    _image_case("image-text", "text file named .jpg", lambda ws: ws.bytes_file("notes.jpg", lambda: b"hello\n" * 50), 2,
                r"^edgekit classify: error: .* is not an image Pillow can read"),
    _image_case("image-16bit-gray", "16-bit grayscale PNG", lambda ws: derived_image(
        ws, "gray16.png", lambda im: (np.asarray(im.convert("L"), np.uint16) * 257)), 0, ""),
    _image_case("image-16bit-rgb", "16-bit RGB PNG", lambda ws: derived_image(
        ws, "rgb16.png", lambda im: np.asarray(im, np.uint16)[:, :, ::-1] * 257), 0, ""),
    _image_case("image-gray", "grayscale JPEG", lambda ws: derived_image(ws, "gray.jpg", lambda im: im.convert("L")), 0, ""),
    _image_case("image-rgba", "RGBA PNG", lambda ws: derived_image(ws, "rgba.png", lambda im: im.convert("RGBA")), 0, ""),
    _image_case("image-cmyk", "CMYK JPEG", lambda ws: derived_image(ws, "cmyk.jpg", lambda im: im.convert("CMYK")), 0, ""),
    _image_case("image-1x1", "1x1 PNG", lambda ws: derived_image(ws, "one.png", lambda im: im.resize((1, 1))), 0, ""),
    _image_case("image-10000", "10000x10000 PNG (100 megapixels)", lambda ws: ws.make(
        "big.png", lambda p: write_png_stream(p, 10_000, 10_000)), 0, "", slow=True),
    _image_case("image-12000", "12000x10000 PNG header (120 megapixels)", lambda ws: ws.make(
        "bigger.png", lambda p: write_png_stream(p, 12_000, 10_000, rows=False)), 2,
        r"^edgekit classify: error: image .* is 12000x10000 \(120 megapixels\); edgekit reads at most 100"),
    _image_case("image-bomb", "40000x40000 PNG header (decompression bomb)", lambda ws: ws.make(
        "bomb.png", lambda p: write_png_stream(p, 40_000, 40_000, rows=False)), 2,
        r"^edgekit classify: error: image .* is larger than the 100 megapixels edgekit reads"),
]

def _ssd(ws: Workspace) -> str:
    return str(ws.shared_model("ssd_mobilenet_v1_coco_quant.tflite"))


def _detect(source: Callable[[Workspace], str], quiet: bool = True) -> Callable[[Workspace], list[str]]:
    """detect on `source`; quiet=False shows the notes (frames go to stdout as JSON)."""
    def argv(ws: Workspace) -> list[str]:
        tail = ["-q"] if quiet else ["--json", "--labels", str(ws.shared_model("coco_labels.txt"))]
        return ["detect", "-m", _ssd(ws), "--source", source(ws), "--max-frames", "5", *tail]
    return argv


VIDEO_CASES = [
    Case("video-missing", "video", "video file that does not exist", _detect(lambda ws: str(ws.root / "nope.mp4")),
         2, r"^edgekit detect: error: source .* does not exist"),
    Case("video-text", "video", "text file named .mp4", _detect(
        lambda ws: ws.bytes_file("notes.mp4", lambda: b"hello\n" * 100)), 2,
        r"^edgekit detect: error: cannot read video file .* OpenCV found no decoder"),
    Case("video-header", "video", "AVI cut after 2 KB (header only)", _detect(
        lambda ws: ws.bytes_file("head.avi", lambda: Path(video_clip(ws, "whole.avi", 1.0)).read_bytes()[:2000])), 2,
        r"^edgekit detect: error: cannot read video file .* OpenCV found no decoder"),
    Case("video-cut", "video", "AVI cut at half (15 of 30 frames)", _detect(lambda ws: video_clip(ws, "half.avi", 0.5)),
         0, ""),
    Case("video-empty-glob", "video", "glob matching no image", _detect(lambda ws: str(ws.root / "none" / "*.jpg")),
         2, r"^edgekit detect: error: no images in"),
    Case("stream-refused", "video", "rtsp:// URL, connection refused", _detect(lambda ws: "rtsp://127.0.0.1:9/cam"),
         2, r"^edgekit detect: error: cannot open stream 'rtsp://127.0.0.1:9/cam' within 5 s"),
    Case("stream-silent", "video", "http:// camera that accepts and never answers",
         _detect(lambda ws: ws.server("silent")), 2, r"^edgekit detect: error: cannot open stream .* within 5 s"),
    Case("stream-stalls", "video", "http:// MJPEG camera that stalls after 3 frames (--json, not -q)",
         _detect(lambda ws: ws.server("stalls"), quiet=False), 0,
         r"^edgekit detect: stream .* stopped delivering frames; reopening it", slow=True),
]

CONFIG_CASES = [
    Case("config-missing", "config", "config file that does not exist",
         lambda ws: ["inspect", "-c", str(ws.root / "nope.toml"), "--check"], 2,
         r"^edgekit inspect: error: config file .* does not exist"),
    Case("config-not-toml", "config", "not TOML", lambda ws: ["inspect", "-c", ws.bytes_file(
        "bad.toml", lambda: b"this is = not [toml\n"), "--check"], 2,
        r"^edgekit inspect: error: .*bad.toml: not valid TOML"),
    Case("config-unknown-key", "config", "unknown key (cont = 3)", lambda ws: ["inspect", "-c", config_file(
        ws, "unknown.toml", lambda t: t + "cont = 3\n"), "--check"], 2,
        r"^edgekit inspect: error: .*unknown.toml:15: rules\[0\].cont: unknown key; did you mean 'count'\?"),
    Case("config-wrong-type", "config", "wrong type (count = \"four\")", lambda ws: ["inspect", "-c", config_file(
        ws, "type.toml", lambda t: t.replace("count = 4", 'count = "four"')), "--check"], 2,
        r"^edgekit inspect: error: .*type.toml:14: rules\[0\].count: expected an integer >= 0, got 'four'"),
    Case("config-zone-outside", "config", "zone outside the 640x480 frame", lambda ws: ["inspect", "-c", config_file(
        ws, "zone.toml", lambda t: t.replace("[500, 400], [100, 400]", "[900, 400], [100, 400]")), "--check"], 2,
        r"^edgekit inspect: error: .*zone.toml:8: zone 'tray' .* reaches outside the 640x480 frame"),
]


def _convert(data: Callable[[Workspace], str]) -> Callable[[Workspace], list[str]]:
    return lambda ws: ["convert", keras_model(ws), "-o", str(ws.root / "out.tflite"), "--mode", "int8",
                       "--calibration", data(ws), "-q"]


CALIBRATION_CASES = [
    Case("calib-missing", "calibration", "calibration folder that does not exist",
         _convert(lambda ws: str(ws.root / "nope")), 2, r"^edgekit convert: error: data .* does not exist", slow=True),
    Case("calib-empty", "calibration", "empty calibration folder",
         _convert(lambda ws: ws.make("empty", lambda p: p.mkdir())), 2,
         r"^edgekit convert: error: no images .* in .*empty", slow=True),
    Case("calib-junk", "calibration", "calibration 'images' that are text",
         _convert(lambda ws: image_folder(ws, "junk", [(1, 1)] * 3, junk=True)), 2,
         r"^edgekit convert: error: cannot decode image .*0.jpg", slow=True),
    Case("calib-mixed", "calibration", "calibration images of mixed sizes (32x32 to 640x480)",
         _convert(lambda ws: image_folder(ws, "mixed", [(32, 32), (640, 480), (17, 300), (32, 32)])), 0, "",
         slow=True, timeout=300),
]

CASES: list[Case] = [*MODEL_CASES, *IMAGE_CASES, *VIDEO_CASES, *CONFIG_CASES, *CALIBRATION_CASES]
