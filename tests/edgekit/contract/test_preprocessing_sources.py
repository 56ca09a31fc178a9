"""Where each preprocessing setting comes from (edgekit metadata > the file's TFLite metadata > a
family preset > the convention), the presets' signatures, the device-side TFLite metadata reader,
`edgekit meta`'s preprocessing options and its handling of files whose data sits after the
flatbuffer, the hand landmark reading, and anchor decoding without numpy warnings."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from edgekit.contract.anchors import ANCHOR_PRESETS, decode_anchors
from edgekit.contract.enums import Interpolation, ResizeMode
from edgekit.contract.keypoints import HAND_KEYPOINTS, PoseLayout, decode_hand_landmarks, pose_layout_of
from edgekit.contract.preprocessing import Provenance, resolve_preprocessing
from edgekit.contract.presets import PRESETS, match_preset
from edgekit.contract.spec import Transform
from edgekit.errors import ModelError
from edgekit.preprocess import fit
from edgekit.runtimes.support_metadata import SupportMetadata
from edgekit.runtimes.tensors import inspect_model
from tests.conftest import needs_schema, shared_model



FACE = PRESETS["mediapipe-face-short-range"]
SUPPORT = SupportMetadata(mean=(0.0,), std=(255.0,))


@pytest.mark.parametrize("meta, support, preset, option, key, value, source", [
    (None, None, None, None, "resize", ResizeMode.STRETCH, Provenance.CONVENTION),
    (None, None, FACE, None, "resize", ResizeMode.LETTERBOX, Provenance.PRESET),
    ({"preprocessing": {"resize": "stretch"}}, None, FACE, None, "resize", ResizeMode.STRETCH, Provenance.EDGEKIT),
    ({"preprocessing": {"resize": "stretch"}}, None, FACE, "letterbox", "resize", ResizeMode.LETTERBOX,
     Provenance.OPTION),
    (None, None, FACE, None, "pad_value", 0, Provenance.PRESET),
    (None, None, None, None, "pad_value", 114, Provenance.CONVENTION),
    ({"preprocessing": {"pad_value": 7}}, None, FACE, None, "pad_value", 7, Provenance.EDGEKIT),
    (None, None, FACE, None, "interpolation", Interpolation.MEDIAPIPE, Provenance.PRESET),
    (None, None, None, None, "interpolation", Interpolation.AUTO, Provenance.CONVENTION),
    (None, SUPPORT, FACE, None, "normalization", (0.0, 0.0, 0.0), Provenance.TFLITE),  # file beats preset
    (None, None, FACE, None, "normalization", (127.5, 127.5, 127.5), Provenance.PRESET),
    ({"preprocessing": {"mean": [1, 2, 3], "std": [4, 5, 6]}}, SUPPORT, FACE, None, "normalization",
     (1.0, 2.0, 3.0), Provenance.EDGEKIT),
    (None, None, None, None, "normalization", None, Provenance.CONVENTION),
    ({"source": {"name": "Ultralytics metadata in the file"}, "preprocessing": {"resize": "letterbox"}}, None,
     None, None, "resize", ResizeMode.LETTERBOX, Provenance.ULTRALYTICS),
])
def test_each_setting_comes_from_the_strongest_source(meta, support, preset, option, key, value, source) -> None:
    pre = resolve_preprocessing(meta, support, preset, resize=option)
    got = getattr(pre, key)
    if key == "normalization":
        got = None if got is None else got.mean
    assert got == value and pre.sources[key] is source


def test_a_model_with_nothing_says_its_settings_are_guesses() -> None:
    pre = resolve_preprocessing(None, None, None)
    assert pre.guessed and "all guesses" in pre.describe()
    assert not resolve_preprocessing(None, None, FACE).guessed
    assert pre.to_dict()["sources"]["resize"] == "convention"


def test_a_quantized_input_takes_the_pixels_whatever_the_files_normalization_says() -> None:
    pre = resolve_preprocessing(None, SupportMetadata(mean=(127.5,), std=(127.5,)), None, float_input=False)
    assert pre.normalization is None and pre.sources["normalization"] is Provenance.TFLITE


def test_nonsense_in_the_metadata_is_a_model_error() -> None:
    with pytest.raises(ModelError, match="pad_value"):
        resolve_preprocessing({"preprocessing": {"pad_value": 300}}, None, None)
    with pytest.raises(ModelError, match="interpolation"):
        resolve_preprocessing({"preprocessing": {"interpolation": "cubic"}}, None, None)


def _t(shape, dtype=np.float32):
    return SimpleNamespace(shape=shape, dtype=np.dtype(dtype), name="t")


@pytest.mark.parametrize("inputs, outputs, ops, name", [
    ([_t((1, 128, 128, 3))], [_t((1, 896, 16)), _t((1, 896, 1))], (), "mediapipe-face-short-range"),
    ([_t((1, 192, 192, 3))], [_t((1, 2304, 16)), _t((1, 2304, 1))], (), "mediapipe-face-full-range"),
    ([_t((1, 192, 192, 3))], [_t((1, 2016, 18)), _t((1, 2016, 1))], (), "mediapipe-palm"),
    ([_t((1, 224, 224, 3))], [_t((1, 2254, 12)), _t((1, 2254, 1))], (), "mediapipe-pose-detector"),
    ([_t((1, 144, 256, 3))], [_t((1, 144, 256, 1))], (), "mediapipe-selfie-segmentation"),
    ([_t((1, 224, 224, 3))], [_t((1, 63)), _t((1, 1)), _t((1, 1)), _t((1, 63))], (), "mediapipe-hand-landmark"),
    ([_t((1, 192, 192, 3), np.uint8)], [_t((1, 1, 17, 3))], (), "movenet-single"),
    ([_t((1, 256, 256, 3), np.uint8)], [_t((1, 6, 56))], (), "movenet-multi"),
    ([_t((1, 513, 513, 3), np.uint8)], [_t((1, 513, 513), np.int64)], (), "deeplab"),
    ([_t((1, 320, 320, 3), np.uint8)], [], ("TFLite_Detection_PostProcess",), "efficientdet-lite"),
    ([_t((1, 300, 300, 3), np.uint8)], [], ("TFLite_Detection_PostProcess",), "ssd"),
    ([_t((1, 128, 128, 3), np.uint8)], [_t((1, 896, 16)), _t((1, 896, 1))], (), None),  # MediaPipe's are float
    ([_t((1, 224, 224, 3), np.uint8)], [_t((1, 1001), np.uint8)], (), None),
])
def test_presets_are_recognised_by_signature(inputs, outputs, ops, name) -> None:
    got = match_preset(inputs, outputs, ops)
    assert (got.name if got else None) == name


def test_every_preset_names_its_reference_and_writes_metadata_edgekit_reads_back() -> None:
    for preset in PRESETS.values():
        assert preset.reference and "/" in preset.reference
        doc = preset.to_metadata()
        pre = resolve_preprocessing(doc, None, None)
        assert pre.resize is preset.resize
        if preset.anchors:
            assert doc["anchors"] == ANCHOR_PRESETS[preset.anchors].to_metadata()


def test_the_device_reads_the_files_own_tflite_metadata(shared_models: Path) -> None:
    info = inspect_model(shared_model(shared_models, "mobilenet_v2_1.0_224_quant.tflite"))
    assert info.support is not None
    assert info.support.mean == (127.5,) and info.support.std == (127.5,) and info.support.color_space == "RGB"
    assert info.support.labels is not None and len(info.support.labels) == 1001


def _meta(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "edgekit", "meta", *args], capture_output=True, text=True,
                          timeout=120)


@needs_schema
def test_meta_writes_mean_std_pad_and_interpolation_and_keeps_the_label_files(shared_models: Path,
                                                                              tmp_path: Path) -> None:
    src = shared_model(shared_models, "mobilenet_v2_1.0_224_quant.tflite")
    out = tmp_path / "m.tflite"
    done = _meta(str(src), "--range", "-1", "1", "--pad-value", "0", "--interpolation", "linear", "-o", str(out))
    assert done.returncode == 0, done.stderr
    info = inspect_model(out)
    assert info.metadata["preprocessing"] == {"mean": [127.5] * 3, "std": [127.5] * 3, "pad_value": 0,
                                              "interpolation": "linear"}
    assert info.support is not None and len(info.support.labels or ()) == 1001  # the appended zip travelled


@pytest.mark.parametrize("args, message", [
    (["--mean", "1"], "give both --mean and --std"),
    (["--range", "1", "0"], "MIN < MAX"),
    (["--pad-value", "300"], "0..255"),
    (["--mean", "0", "--std", "0"], "std must not be 0"),
    (["--preset", "mediapipe-face"], "invalid choice"),
])
def test_meta_refuses_bad_preprocessing_in_one_sentence(shared_models: Path, tmp_path: Path, args, message) -> None:
    src = shared_model(shared_models, "mobilenet_v2_1.0_224_quant.tflite")
    done = _meta(str(src), *args, "-o", str(tmp_path / "m.tflite"))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def _with_data_after_the_flatbuffer(model: bytes) -> bytes:
    """``model`` rewritten as ai-edge-quantizer writes large models: every buffer's data after the
    flatbuffer, named by offset and size."""
    from ai_edge_litert import schema_py_generated as schema
    import flatbuffers

    obj = schema.ModelT.InitFromPackedBuf(bytearray(model), 0)
    blobs = [bytes(np.asarray(b.data, np.uint8)) if b.data is not None else b"" for b in obj.buffers]

    def pack(offsets: list[int]) -> bytes:
        for b, blob, off in zip(obj.buffers, blobs, offsets):
            b.data, b.offset, b.size = None, (off if blob else 0), len(blob)
        builder = flatbuffers.Builder(1024)
        builder.Finish(obj.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())

    head = pack([1 << 40] * len(blobs))  # 64-bit fields: the same length whatever the offsets

    def layout(start: int) -> list[int]:
        out, pos = [], start
        for blob in blobs:
            pos = -(-pos // 16) * 16
            out.append(pos)
            pos += len(blob)
        return out

    offsets = layout(len(head) + 16)
    head = pack(offsets)
    tail = bytearray(max(offsets) + len(blobs[offsets.index(max(offsets))]) - len(head))
    for blob, off in zip(blobs, offsets):
        tail[off - len(head):off - len(head) + len(blob)] = blob
    return head + bytes(tail)


@needs_schema
def test_meta_works_on_a_file_whose_data_sits_after_the_flatbuffer(shared_models: Path, tmp_path: Path) -> None:
    src = shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite")
    outside = tmp_path / "outside.tflite"
    outside.write_bytes(_with_data_after_the_flatbuffer(src.read_bytes()))
    from edgekit.runtimes.loader import load_model

    image = np.random.default_rng(0).integers(0, 255, (1, 128, 128, 3), dtype=np.uint8)

    def top(path: Path) -> int:
        with load_model(path, isolate=False) as m:
            m.input_view(0)[...] = image
            m.invoke()
            return int(np.argmax(m.output(0)))

    out = tmp_path / "with_meta.tflite"
    done = _meta(str(outside), "--mean", "0", "--std", "1", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert inspect_model(out).metadata["preprocessing"]["std"] == [1.0] * 3
    assert top(out) == top(src)  # the weights came back inside, unchanged


def test_anchor_decoding_prints_no_numpy_warning() -> None:
    spec = ANCHOR_PRESETS["face-short-range"]
    raw_boxes = np.full((1, 896, 16), 1e4, np.float32)
    raw_scores = np.full((1, 896, 1), -1e4, np.float32)  # exp(1e4) overflows float32
    raw_scores[0, 3] = 50.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = decode_anchors(raw_boxes, raw_scores, spec, Transform.identity((128, 128)))
    assert len(got.scores) == 1 and got.scores[0] == pytest.approx(1.0)


def test_hand_landmarks_read_as_mediapipe_reads_them() -> None:
    xyz = np.zeros((21, 3), np.float32)
    xyz[:, 0], xyz[:, 1] = np.arange(21) * 10, 224 - np.arange(21) * 10
    outputs = [xyz.reshape(1, 63), np.array([[0.9]], np.float32), np.array([[0.2]], np.float32),
               np.zeros((1, 63), np.float32)]
    assert pose_layout_of([o.shape for o in outputs]) is PoseLayout.HAND
    poses = decode_hand_landmarks(outputs, Transform.identity((224, 224)), (224, 224))
    assert len(poses) == 1 and poses.names == HAND_KEYPOINTS and poses.handedness == ("Right",)
    assert np.allclose(poses.keypoints[0], xyz[:, :2]) and poses.to_list()[0]["handedness"] == "Right"
    outputs[1] = np.array([[0.1]], np.float32)
    assert len(decode_hand_landmarks(outputs, Transform.identity((224, 224)), (224, 224))) == 0


def test_tensorflow_interpolation_is_resize_with_pad_bit_for_bit() -> None:
    tf = pytest.importorskip("tensorflow", reason="the reference is tf.image.resize_with_pad")
    image = np.random.default_rng(1).integers(0, 256, (383, 617, 3), dtype=np.uint8)
    got, transform = fit(image, (192, 192), ResizeMode.LETTERBOX, pad_value=0, interpolation="tensorflow")
    want = tf.cast(tf.image.resize_with_pad(image[None], 192, 192), tf.uint8).numpy()[0]
    assert np.array_equal(got, want) and transform.pad_y == float((192 - 119) // 2)


def test_mediapipe_interpolation_maps_corners_to_corners() -> None:
    import cv2

    image = np.random.default_rng(2).integers(0, 256, (300, 500, 3), dtype=np.uint8)
    got, transform = fit(image, (128, 128), ResizeMode.LETTERBOX, pad_value=0, interpolation="mediapipe")
    s = 128 / 500
    want = cv2.warpAffine(image, np.float64([[s, 0, 0], [0, s, (128 - 300 * s) / 2]]), (128, 128),
                          flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    assert np.array_equal(got, want)
    assert transform.scale_x == transform.scale_y == s and transform.pad_y == pytest.approx((128 - 300 * s) / 2)


def test_info_says_which_source_decided_each_setting(shared_models: Path) -> None:
    import json

    ssd = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    done = subprocess.run([sys.executable, "-m", "edgekit", "info", "--json", str(ssd)], capture_output=True,
                          text=True, timeout=120)
    pre = json.loads(done.stdout)["preprocessing"]
    assert pre["preset"] == "ssd" and pre["resize"] == "stretch" and pre["sources"]["resize"] == "preset"
    assert pre["sources"]["pad_value"] == "convention" and not pre["guessed"]
    text = subprocess.run([sys.executable, "-m", "edgekit", "info", str(ssd)], capture_output=True, text=True,
                          timeout=120).stdout
    assert "resize stretch (preset)" in text and "preset ssd" in text
