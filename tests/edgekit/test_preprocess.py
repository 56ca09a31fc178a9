"""Image loading, resizing with an exact box mapping, and pixels -> model input values."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from edgekit.errors import InputError, ModelError
from edgekit.preprocess import (
    LETTERBOX_PAD,
    ColorOrder,
    Normalization,
    ResizeMode,
    Transform,
    fit,
    fit_into,
    load_image,
    to_input,
)
from edgekit.runtimes import TensorSpec, load_model
from tests.conftest import shared_model


# --- load_image ------------------------------------------------------------------------
def _save(img: Image.Image, fmt: str, **kw: Any) -> Callable[[Path], None]:
    return lambda p: img.save(p, fmt, **kw)


def _palette(transparent: bool) -> Image.Image:
    im = Image.new("P", (2, 1))
    im.putpalette([10, 20, 30, 200, 100, 50] + [0] * 762)
    im.putdata([0, 1])
    if transparent:
        im.info["transparency"] = 0
    return im


def _gray16(p: Path) -> None:
    cv2.imwrite(str(p), np.array([[65535, 32896]], np.uint16))


def _rgb16(p: Path) -> None:
    cv2.imwrite(str(p), np.array([[[257, 32896, 65535], [0, 0, 0]]], np.uint16))  # BGR


def _png_header(w: int, h: int) -> Callable[[Path], None]:
    """A valid PNG that declares a huge size; only its header is read."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b""))
    return lambda p: p.write_bytes(data)


def _exif_rotated(p: Path) -> None:
    im = Image.new("RGB", (40, 20), (0, 0, 255))
    im.paste((255, 0, 0), (0, 0, 20, 20))  # left half red
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    im.save(p, "JPEG", exif=exif, quality=95)


def _truncated(fmt: str, keep: float) -> Callable[[Path], None]:
    def make(p: Path) -> None:
        buf = io.BytesIO()
        rng = np.random.default_rng(0)
        Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(buf, fmt)
        data = buf.getvalue()
        p.write_bytes(data[:int(len(data) * keep)])
    return make


RGB = Image.new("RGB", (3, 2), (10, 20, 30))
LOADS = [
    pytest.param("a.png", _save(RGB, "PNG"), (2, 3, 3), {(0, 0): (10, 20, 30)}, id="png-rgb"),
    pytest.param("a.bmp", _save(RGB, "BMP"), (2, 3, 3), {(1, 2): (10, 20, 30)}, id="bmp"),
    pytest.param("a.webp", _save(RGB, "WEBP", lossless=True), (2, 3, 3), {(0, 1): (10, 20, 30)}, id="webp"),
    pytest.param("a.tif", _save(RGB, "TIFF"), (2, 3, 3), {(0, 0): (10, 20, 30)}, id="tiff"),
    pytest.param("a.png", _save(Image.new("L", (2, 2), 77), "PNG"), (2, 2, 3), {(1, 1): (77, 77, 77)},
                 id="grayscale"),
    pytest.param("a.png", _save(Image.new("1", (2, 2), 1), "PNG"), (2, 2, 3), {(0, 0): (255, 255, 255)},
                 id="1-bit"),
    pytest.param("a.png", _save(Image.new("RGBA", (2, 2), (200, 100, 50, 128)), "PNG"), (2, 2, 3),
                 {(0, 0): (100, 50, 25)}, id="rgba-on-black"),
    pytest.param("a.png", _save(Image.new("LA", (2, 2), (200, 0)), "PNG"), (2, 2, 3), {(0, 0): (0, 0, 0)},
                 id="la-transparent"),
    pytest.param("a.png", _save(_palette(False), "PNG"), (1, 2, 3), {(0, 0): (10, 20, 30), (0, 1): (200, 100, 50)},
                 id="palette"),
    pytest.param("a.png", _save(_palette(True), "PNG"), (1, 2, 3), {(0, 0): (0, 0, 0), (0, 1): (200, 100, 50)},
                 id="palette-transparency"),
    pytest.param("a.png", _gray16, (1, 2, 3), {(0, 0): (255, 255, 255), (0, 1): (128, 128, 128)}, id="gray-16bit"),
    pytest.param("a.png", _rgb16, (1, 2, 3), {(0, 0): (255, 128, 1)}, id="rgb-16bit"),
    pytest.param("a.jpg", _save(Image.new("CMYK", (4, 4), (0, 0, 0, 0)), "JPEG", quality=100), (4, 4, 3),
                 {(0, 0): (255, 255, 255)}, id="cmyk-jpeg"),
    pytest.param("a.png", _save(Image.new("RGB", (1, 1), (1, 2, 3)), "PNG"), (1, 1, 3), {(0, 0): (1, 2, 3)},
                 id="1x1"),
]


@pytest.mark.parametrize(("name", "make", "shape", "pixels"), LOADS)
def test_load_image(tmp_path: Path, name: str, make: Callable[[Path], None], shape: tuple[int, ...],
                    pixels: dict[tuple[int, int], tuple[int, int, int]]) -> None:
    path = tmp_path / name
    make(path)
    img = load_image(path)
    assert img.dtype == np.uint8 and img.shape == shape and img.flags["C_CONTIGUOUS"]
    for (y, x), rgb in pixels.items():
        assert tuple(int(v) for v in img[y, x]) == pytest.approx(rgb, abs=1), (y, x)


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    path = tmp_path / "phone.jpg"
    _exif_rotated(path)
    img = load_image(path)
    assert img.shape == (40, 20, 3)  # upright: the stored 40x20 turned a quarter
    assert img[2, 10, 0] > 200 and img[2, 10, 2] < 60  # the left (red) half is now on top
    assert img[37, 10, 2] > 200 and img[37, 10, 0] < 60


BAD_IMAGES = [
    pytest.param(lambda p: None, "does not exist", id="missing"),
    pytest.param(lambda p: p.mkdir(), "is a directory", id="directory"),
    pytest.param(lambda p: p.write_bytes(b""), "is empty (0 bytes)", id="empty"),
    pytest.param(lambda p: p.write_text("hello, not an image\n"), "is not an image Pillow can read", id="text"),
    pytest.param(lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4), "not an image",
                 id="corrupt-png"),
    pytest.param(_truncated("JPEG", 0.5), "truncated or corrupt", id="truncated-jpeg"),
    pytest.param(_truncated("PNG", 0.6), "truncated or corrupt", id="truncated-png"),
    pytest.param(_truncated("BMP", 0.7), "truncated or corrupt", id="truncated-bmp"),
    pytest.param(_png_header(11_000, 10_000), "110 megapixels", id="110-megapixels",
                 marks=pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")),
    pytest.param(_png_header(20_000, 20_000), "larger than the 100 megapixels", id="400-megapixels-bomb"),
]


@pytest.mark.parametrize(("make", "fragment"), BAD_IMAGES)
def test_bad_image_is_input_error(tmp_path: Path, make: Callable[[Path], None], fragment: str) -> None:
    path = tmp_path / "image.png"
    make(path)
    with pytest.raises(InputError) as err:
        load_image(path)
    assert fragment in str(err.value)


# --- fit and Transform -----------------------------------------------------------------
def _white_box_image(w: int, h: int, box: tuple[int, int, int, int]) -> np.ndarray:
    img = np.zeros((h, w, 3), np.uint8)
    x1, y1, x2, y2 = box
    img[y1:y2, x1:x2] = 255
    return img


def _found_box(img: np.ndarray) -> np.ndarray:
    """The white box's extent in continuous coordinates, from where brightness crosses 50%."""
    gray = img[..., 0].astype(np.float64) / 255
    cols, rows = gray.max(axis=0), gray.max(axis=1)
    def edges(profile: np.ndarray) -> tuple[float, float]:
        inside = profile >= 0.5
        return float(np.argmax(inside)), float(len(profile) - np.argmax(inside[::-1]))
    (x1, x2), (y1, y2) = edges(cols), edges(rows)
    return np.array([x1, y1, x2, y2])


@pytest.mark.parametrize(("src", "dst", "mode", "box"), [
    ((640, 480), (300, 300), ResizeMode.STRETCH, (100, 50, 300, 250)),
    ((640, 480), (320, 320), ResizeMode.LETTERBOX, (100, 50, 300, 250)),
    ((333, 100), (128, 128), ResizeMode.LETTERBOX, (30, 10, 200, 90)),
    ((200, 900), (160, 96), ResizeMode.LETTERBOX, (20, 300, 180, 800)),
    ((1352, 900), (224, 224), "stretch", (400, 100, 1000, 700)),
])
def test_fit_box_maps_back_to_where_it_was(src: tuple[int, int], dst: tuple[int, int], mode: Any,
                                          box: tuple[int, int, int, int]) -> None:
    img = _white_box_image(*src, box)
    out, tf = fit(img, dst, mode)
    assert out.shape == (dst[1], dst[0], 3) and tf.src_size == src and tf.dst_size == dst
    back = tf.boxes_to_source(_found_box(out))
    # One input pixel of rounding at each edge, in source pixels.
    tolerance = 1.0 / min(tf.scale_x, tf.scale_y) + 1
    np.testing.assert_allclose(back, box, atol=tolerance)


@pytest.mark.parametrize(("src", "dst", "expected"), [
    ((640, 480), (320, 320), Transform((640, 480), (320, 320), 0.5, 0.5, 0.0, 40.0)),
    ((333, 100), (128, 128), Transform((333, 100), (128, 128), 128 / 333, 38 / 100, 0.0, 45.0)),
    ((100, 1000), (64, 64), Transform((100, 1000), (64, 64), 6 / 100, 64 / 1000, 29.0, 0.0)),
    ((1, 1000), (64, 64), Transform((1, 1000), (64, 64), 1.0, 64 / 1000, 31.0, 0.0)),
    ((64, 64), (64, 64), Transform((64, 64), (64, 64), 1.0, 1.0, 0.0, 0.0)),
])
def test_letterbox_transform_and_padding(src: tuple[int, int], dst: tuple[int, int], expected: Transform) -> None:
    img = np.full((src[1], src[0], 3), 7, np.uint8)
    out, tf = fit(img, dst, ResizeMode.LETTERBOX)
    assert tf == expected
    content = np.zeros(out.shape[:2], bool)
    x0, y0 = int(tf.pad_x), int(tf.pad_y)
    content[y0:y0 + round(tf.scale_y * src[1]), x0:x0 + round(tf.scale_x * src[0])] = True
    assert (out[content] == 7).all()
    assert (out[~content] == LETTERBOX_PAD).all()


@pytest.mark.parametrize("factor", [2, 3, 4])
def test_shrinking_averages_every_pixel(factor: int) -> None:
    """Thin lines one pixel in ``factor`` (on the pixels bilinear sampling would keep at odd factors):
    a shrink of 2x or more averages them to an even grey, not to all-white or all-black."""
    img = np.zeros((48 * factor, 48 * factor, 3), np.uint8)
    img[:, factor // 2::factor] = 255
    out, _ = fit(img, (48, 48))
    assert abs(float(out.mean()) - 255 / factor) < 2 and int(out.max()) - int(out.min()) <= 2, (out.min(), out.max())


def test_area_interpolation_enlarges_smoothly() -> None:
    """AREA (a model's metadata may ask for it) averages when shrinking; a frame smaller than the input
    is still enlarged bilinearly, not in blocks like OpenCV's INTER_AREA would."""
    img = np.zeros((10, 10, 3), np.uint8)
    img[:, 5:] = 200
    out, _ = fit(img, (40, 40), interpolation="area")
    row = out[0, :, 0].astype(int)
    assert len(set(row.tolist())) > 3, row  # a ramp across the edge, not a step


def test_letterbox_pad_value_can_be_black() -> None:
    out, _ = fit(np.full((10, 20, 3), 9, np.uint8), (20, 20), "letterbox", pad_value=0)
    assert (out[:5] == 0).all() and (out[5:15] == 9).all()


@settings(max_examples=100, deadline=None)
@given(w=st.integers(1, 1200), h=st.integers(1, 1200), dw=st.integers(1, 640), dh=st.integers(1, 640),
       mode=st.sampled_from(list(ResizeMode)), seed=st.integers(0, 2**32 - 1))
def test_transform_round_trip(w: int, h: int, dw: int, dh: int, mode: ResizeMode, seed: int) -> None:
    """Boxes put into input coordinates by ``input = source * scale + pad`` come back exactly."""
    out, tf = fit(np.zeros((h, w, 3), np.uint8), (dw, dh), mode)
    assert out.shape == (dh, dw, 3)
    rng = np.random.default_rng(seed)
    xy = np.sort(rng.uniform(0, 1, (5, 2, 2)), axis=1)  # x1<x2, y1<y2
    boxes = np.stack([xy[:, 0, 0] * w, xy[:, 0, 1] * h, xy[:, 1, 0] * w, xy[:, 1, 1] * h], axis=1)
    in_input = boxes * np.array([tf.scale_x, tf.scale_y] * 2) + np.array([tf.pad_x, tf.pad_y] * 2)
    np.testing.assert_allclose(tf.boxes_to_source(in_input), boxes, rtol=1e-9, atol=1e-6)
    normalized = in_input / np.array([dw, dh, dw, dh])
    np.testing.assert_allclose(tf.normalized_to_source(normalized), boxes, rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize(("tf", "boxes", "expected"), [
    (Transform((640, 480), (320, 320), 0.5, 0.5, 0.0, 40.0), [[0, 0, 320, 320]], [[0, 0, 640, 480]]),
    (Transform((640, 480), (320, 320), 0.5, 0.5, 0.0, 40.0), [[10, 0, 20, 30]], [[20, 0, 40, 0]]),
    (Transform((640, 480), (300, 300), 300 / 640, 300 / 480), [[-5, -5, 400, 400]], [[0, 0, 640, 480]]),
])
def test_boxes_are_clipped_to_the_image(tf: Transform, boxes: list[list[float]],
                                        expected: list[list[float]]) -> None:
    np.testing.assert_allclose(tf.boxes_to_source(np.array(boxes, float)), expected)


def test_boxes_need_four_coordinates() -> None:
    tf = Transform((10, 10), (10, 10), 1.0, 1.0)
    with pytest.raises(InputError, match=r"shape \(\.\.\., 4\)"):
        tf.boxes_to_source(np.zeros((3, 5)))


@pytest.mark.parametrize(("call", "fragment"), [
    (lambda: fit(np.zeros((10, 10), np.uint8), (4, 4)), "RGB uint8 image of shape (H, W, 3)"),
    (lambda: fit(np.zeros((10, 10, 3), np.float32), (4, 4)), "got float32 (10, 10, 3)"),
    (lambda: fit(np.zeros((10, 10, 4), np.uint8), (4, 4)), "(10, 10, 4)"),
    (lambda: fit(np.zeros((10, 10, 3), np.uint8), (0, 4)), "must be positive"),
    (lambda: fit(np.zeros((10, 10, 3), np.uint8), (4, 4), "crop"), "unknown resize mode 'crop'"),
    (lambda: fit_into(np.zeros((10, 10, 3), np.uint8), np.zeros((4, 4, 3), np.float32)), "fit() then to_input()"),
])
def test_fit_rejects_bad_arguments(call: Callable[[], Any], fragment: str) -> None:
    with pytest.raises(InputError) as err:
        call()
    assert fragment in str(err.value)


@pytest.mark.parametrize("mode", list(ResizeMode))
def test_fit_into_writes_the_interpreter_input(shared_models: Path, shared_images: Path, mode: ResizeMode) -> None:
    img = load_image(shared_images / "kite_and_cold.jpg")
    with load_model(shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite")) as m:
        tf = fit_into(img, m.input_view(0), mode)
        m.invoke()
        zero_copy = m.output(0)
        expected, expected_tf = fit(img, (128, 128), mode)
        np.testing.assert_array_equal(m.input_view(0)[0], expected)
        assert tf == expected_tf
        np.testing.assert_array_equal(m.run(expected)[0], zero_copy)


# --- Normalization and to_input ------------------------------------------------------------
@pytest.mark.parametrize(("meta", "expected"), [
    (None, None),
    ({}, None),
    ({"task": "classify"}, None),
    ({"preprocessing": {"input_size": [224, 224], "resize": "stretch"}}, None),
    ({"preprocessing": {"mean": [127.5] * 3, "std": [127.5] * 3}}, Normalization((127.5,) * 3, (127.5,) * 3)),
    ({"preprocessing": {"mean": 0, "std": 255, "color": "bgr"}},
     Normalization((0.0,) * 3, (255.0,) * 3, ColorOrder.BGR)),
    ({"preprocessing": {"color": "BGR"}}, Normalization(None, None, ColorOrder.BGR)),
    ({"mean": [1, 2, 3], "std": [4, 5, 6]}, Normalization((1.0, 2.0, 3.0), (4.0, 5.0, 6.0))),
    ({"preprocessing": {"mean": [1, 2], "std": [1, 1, 1]}}, ModelError("one number or three")),
    ({"preprocessing": {"mean": [0, 0, 0], "std": [1, 0, 1]}}, ModelError("std must not be 0")),
    ({"preprocessing": {"mean": [0, 0, 0]}}, ModelError("both mean and std")),
    ({"preprocessing": {"mean": "abc", "std": 1}}, ModelError("one number or three")),
    ({"preprocessing": {"color": "HSV"}}, ModelError("RGB or BGR")),
])
def test_normalization_from_metadata(meta: Any, expected: Any) -> None:
    if isinstance(expected, ModelError):
        with pytest.raises(ModelError, match="invalid preprocessing") as err:
            Normalization.from_metadata(meta)
        assert str(expected) in str(err.value)
    else:
        assert Normalization.from_metadata(meta) == expected


def _spec(dtype: Any, scale: float = 0.0, zero_point: int = 0, shape: tuple[int, ...] = (1, 2, 2, 3)) -> TensorSpec:
    return TensorSpec("input", 0, shape, np.dtype(dtype), scale, zero_point)


@pytest.mark.parametrize(("spec", "norm", "pixel", "expected"), [
    (_spec(np.uint8, 1 / 128, 128), None, 200, 200),  # quantized image models take raw pixels
    (_spec(np.uint8), None, 17, 17),
    (_spec(np.int8, 1 / 128, 0), None, 200, 72),  # pixel - 128
    (_spec(np.int8, 1 / 128, 0), None, 0, -128),
    (_spec(np.float32), None, 255, 1.0),  # MobileNet: (pixel - 127.5) / 127.5
    (_spec(np.float32), None, 0, -1.0),
    (_spec(np.float16), None, 255, 1.0),
    (_spec(np.int16, 1 / 32768, 0), None, 255, 32767),  # the float convention, quantized
    (_spec(np.float32), Normalization(0, 255), 255, 1.0),
    (_spec(np.float32), Normalization((123.675, 116.28, 103.53), (58.395, 57.12, 57.375)), 124, 0.00556),
    (_spec(np.uint8, 1 / 255, 0), Normalization(0, 255), 128, 128),
    (_spec(np.int8, 1 / 255, -128), Normalization(0, 255), 200, 72),
    (_spec(np.uint8, 1 / 128, 128), Normalization(127.5, 127.5), 255, 255),
    (_spec(np.uint8, 1 / 128, 128), Normalization(127.5, 127.5), 0, 0),
])
def test_to_input_values(spec: TensorSpec, norm: Normalization | None, pixel: int, expected: float) -> None:
    img = np.full((2, 2, 3), pixel, np.uint8)
    x = to_input(img, spec, norm)
    assert x.dtype == spec.dtype and x.shape == spec.shape
    assert float(x.flat[0]) == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize(("spec", "norm"), [
    (_spec(np.int8, 1.0, -128), Normalization(0, 1)),  # the demo detector's input
    (_spec(np.uint8, 1 / 255, 0), Normalization((123.675, 116.28, 103.53), (58.395, 57.12, 57.375))),
    (_spec(np.int8, 0.0187, 12), Normalization((123.675, 116.28, 103.53), (58.395, 57.12, 57.375), "BGR")),
    (_spec(np.float32), Normalization((123.675, 116.28, 103.53), (58.395, 57.12, 57.375))),
    (_spec(np.int16, 1 / 32768, 0), None),
])
def test_every_pixel_value_is_written_as_the_arithmetic_gives(spec: TensorSpec, norm: Normalization | None,
                                                              layout: str) -> None:
    # The writers look values up in a per-channel table; each of the 256 values in each channel must be
    # what subtracting, dividing and quantizing give, and land in the model's channel order.
    rng = np.random.default_rng(0)
    img = np.stack([rng.permutation(256).astype(np.uint8).reshape(16, 16) for _ in range(3)], axis=-1)
    mean = np.float32(norm.mean if norm else 127.5) * np.ones(3, np.float32)
    std = np.float32(norm.std if norm else 127.5) * np.ones(3, np.float32)
    rgb = img[..., ::-1] if norm is not None and norm.color is ColorOrder.BGR else img
    expected = spec.quantize((rgb.astype(np.float32) - mean) / std)
    shape = (1, 16, 16, 3) if layout == "NHWC" else (1, 3, 16, 16)
    x = to_input(img, TensorSpec(spec.name, 0, shape, spec.dtype, spec.scale, spec.zero_point), norm)
    got = x[0] if layout == "NHWC" else x[0].transpose(1, 2, 0)
    assert got.dtype == spec.dtype
    np.testing.assert_array_equal(got, expected)


def test_to_input_passes_uint8_pixels_through() -> None:
    img = np.arange(12, dtype=np.uint8).reshape(2, 2, 3)
    x = to_input(img, _spec(np.uint8, 1 / 128, 128))
    np.testing.assert_array_equal(x[0], img)


def test_to_input_swaps_to_bgr() -> None:
    img = np.zeros((2, 2, 3), np.uint8)
    img[..., 0] = 255  # red
    x = to_input(img, _spec(np.float32), Normalization(0, 255, "BGR"))
    assert x[0, 0, 0].tolist() == [0.0, 0.0, 1.0]
    x = to_input(img, _spec(np.uint8), Normalization(color="BGR"))  # the convention, swapped
    assert x[0, 0, 0].tolist() == [0, 0, 255]


@pytest.mark.parametrize(("spec", "image", "fragment"), [
    (_spec(np.uint8, shape=(1, 4, 4, 3)), np.zeros((2, 2, 3), np.uint8), "expects an image of 4x4"),
    (_spec(np.uint8, shape=(1, 10)), np.zeros((2, 2, 3), np.uint8), "is not an RGB image input"),
    (_spec(np.int32), np.zeros((2, 2, 3), np.uint8), "no image convention"),
    (_spec(np.uint8), np.zeros((2, 2), np.uint8), "RGB uint8 image"),
])
def test_to_input_rejects(spec: TensorSpec, image: np.ndarray, fragment: str) -> None:
    with pytest.raises(InputError) as err:
        to_input(image, spec)
    assert fragment in str(err.value)


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"mean": 0}, "both mean and std"),
    ({"mean": 0, "std": 0}, "must not be 0"),
    ({"mean": [0, 0, 0, 0], "std": 1}, "one number or three"),
    ({"mean": 0, "std": float("nan")}, "one number or three"),
    ({"color": "rgba"}, "RGB or BGR"),
])
def test_normalization_rejects(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment.replace("(", r"\(")):
        Normalization(**kwargs)
