"""`edgekit convert model_float.tflite`: ai-edge-quantizer behind the same modes, gate and fallback.

The float .tflite files are built here from a small Keras classifier trained on synthetic shapes
(channels last and channels first, with an outlier layer, with MediaPipe-style metadata), and every
quantized model is checked against the float .tflite run straight in ai_edge_litert, not only by
edgekit's report. The detector head split is in test_tflite_head.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests import _tiny_models as tiny
from tests.converters._litert import run_tflite

pytestmark = pytest.mark.needs_tf

SIZE = tiny.SIZE


def _tf() -> Any:
    tf = pytest.importorskip("tensorflow", reason="building the test models needs TensorFlow")
    pytest.importorskip("ai_edge_quantizer", reason="quantizing a .tflite needs ai-edge-quantizer")
    return tf


def _to_tflite(tf: Any, model: Any, path: Path) -> Path:
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _tf()
    return tmp_path_factory.mktemp("tflite_in")


@pytest.fixture(scope="module")
def models(work: Path) -> dict[str, Path]:
    """The trained shapes classifier as float .tflite: NHWC, NCHW (a transpose in front) and with an outlier."""
    tf = _tf()
    import keras

    model, acc = tiny.classifier()
    assert acc > 0.9, f"the test classifier did not learn (held-out accuracy {acc})"
    inp = keras.Input((3, SIZE, SIZE), batch_size=1, name="images")
    nchw = keras.Model(inp, model(keras.layers.Permute((2, 3, 1))(inp)))
    fixed = keras.Model(k := keras.Input((SIZE, SIZE, 3), batch_size=1, name="image"), model(k))
    model.save(work / "shapes.keras")
    outlier = tiny.with_weight_outlier(model)
    outlier = keras.Model(o := keras.Input((SIZE, SIZE, 3), batch_size=1, name="image"), outlier(o))
    return {"nhwc": _to_tflite(tf, fixed, work / "shapes_float.tflite"),
            "nchw": _to_tflite(tf, nchw, work / "shapes_nchw_float.tflite"),
            "outlier": _to_tflite(tf, outlier, work / "outlier_float.tflite"), "keras": work / "shapes.keras"}


@pytest.fixture(scope="module")
def data(work: Path) -> dict[str, Path]:
    out = {"cal": work / "cal.npz", "val": work / "val.npz"}
    for key, n, seed in (("cal", 200, 7), ("val", 120, 8)):
        x, y = tiny.shapes(n, seed=seed)
        np.savez(out[key], x=x, y=y)
    return out


def _convert(model: Path, out: Path, cal: Any, **kw: Any) -> Any:
    from edgekit.converters import PreprocessingOverrides, convert

    kw.setdefault("preprocessing", PreprocessingOverrides(scale=1.0))  # the model rescales inside
    return convert(model, out, calibration=cal, progress=False, **kw)


MODES = [  # mode, input dtype, agreement with the float .tflite at least, size at most x float
    ("int8", np.int8, 0.95, 0.45),
    ("weight-only", np.float32, 0.99, 0.45),
    ("uint8", np.uint8, 0.95, 0.45),
    ("int16x8", np.float32, 0.97, 0.5),
    ("dynamic", np.float32, 0.97, 0.45),
    ("float16", np.float32, 0.99, 0.6),
]


@pytest.mark.parametrize(("mode", "dtype", "agreement", "size_ratio"), MODES)
def test_float_tflite_in_every_mode_matches_the_float_tflite(models: dict[str, Path], data: dict[str, Path],
                                                             work: Path, mode: str, dtype: Any, agreement: float,
                                                             size_ratio: float) -> None:
    out = work / f"shapes_{mode}.tflite"
    r = _convert(models["nhwc"], out, data["cal"], validation=data["val"], mode=mode, max_drop=2.0)
    r.raise_for_status()
    assert r.engine.startswith("ai-edge-quantizer") and r.metadata["quantization"]["engine"] == "ai-edge-quantizer"
    x, y = np.load(data["val"])["x"], np.load(data["val"])["y"]
    ref, got = run_tflite(models["nhwc"], x), run_tflite(out, x)
    assert np.mean(ref.argmax(1) == got.argmax(1)) >= agreement
    assert np.mean(ref.argmax(1) == y) > 0.9  # the float .tflite itself is right: agreement means something
    assert r.metrics.accuracy is not None and abs(r.metrics.accuracy - np.mean(got.argmax(1) == y)) < 1e-9
    from edgekit.runtimes import inspect_model

    assert inspect_model(out).inputs[0].dtype == dtype
    assert r.size_bytes < size_ratio * r.float_size_bytes
    assert r.float_size_bytes == models["nhwc"].stat().st_size  # the reference is the file itself


def test_nchw_float_tflite_is_fed_channel_first(models: dict[str, Path], data: dict[str, Path], work: Path) -> None:
    out = work / "nchw_int8.tflite"
    r = _convert(models["nchw"], out, data["cal"], validation=data["val"], mode="int8", max_drop=2.0)
    r.raise_for_status()
    from edgekit.runtimes import inspect_model

    assert tuple(inspect_model(out).inputs[0].shape) == (1, 3, SIZE, SIZE)
    x = np.load(data["val"])["x"].transpose(0, 3, 1, 2)
    ref, got = run_tflite(models["nchw"], x), run_tflite(out, x)
    assert np.mean(ref.argmax(1) == got.argmax(1)) >= 0.95
    assert r.metrics.top1_agreement is not None and r.metrics.top1_agreement >= 0.95


def test_real_images_calibrate_and_validate(models: dict[str, Path], shared_images: Path, work: Path) -> None:
    out = work / "photos_int8.tflite"
    r = _convert(models["nchw"], out, shared_images, validation=shared_images, mode="int8-float-io")
    assert r.metrics.samples == len(_images(shared_images))  # the photos only: the folder also holds models
    rows = run_tflite(out, _photos(shared_images))
    ref = run_tflite(models["nchw"], _photos(shared_images))
    assert np.abs(rows - ref).max() < 0.1  # softmax scores of real photos within a few int8 steps


def _images(folder: Path) -> list[Path]:
    """The photos in `folder`, sorted (tests/data also holds the models, label files and a README)."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in (".png", ".jpg", ".jpeg", ".bmp"))


def _photos(folder: Path) -> np.ndarray:
    from edgekit.converters.images import decode_images
    from edgekit.converters.preprocessing import Preprocessing

    pre = Preprocessing(input_size=(SIZE, SIZE), channels=3, mean=(0.0,) * 3, std=(1.0,) * 3)
    x = decode_images([str(p) for p in _images(folder)], pre, "photos")
    x = x[0] if isinstance(x, tuple) else x
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def test_auto_fallback_finds_the_broken_layer(models: dict[str, Path], data: dict[str, Path], work: Path) -> None:
    plain = _convert(models["outlier"], work / "outlier.tflite", data["cal"], validation=data["val"], mode="int8",
                     max_drop=2.0)
    assert not plain.passed and plain.gate.drop > 30
    worst = max(plain.layer_errors, key=lambda e: e.rmse_over_scale)
    assert worst.name.startswith("probsw") and worst.op == "FULLY_CONNECTED"
    fixed = _convert(models["outlier"], work / "outlier.tflite", data["cal"], validation=data["val"], mode="int8",
                     max_drop=2.0, auto_fallback=True)
    assert fixed.passed and fixed.layers_kept_in_float == (worst.name,)
    assert not (work / "outlier.FAILED-GATE.tflite").exists() or plain.output != fixed.output
    from edgekit.runtimes import inspect_model

    assert inspect_model(fixed.output).inputs[0].dtype == np.int8  # the mode's promise kept
    # The same fix as a recipe stated up front.
    named = _convert(models["outlier"], work / "outlier_kept.tflite", data["cal"], validation=data["val"],
                     mode="int8", max_drop=2.0, keep_float=["probsw"])
    assert named.passed


def test_recipe_int16_layer_and_float_op_type(models: dict[str, Path], data: dict[str, Path], work: Path) -> None:
    from edgekit.runtimes.tflite_file import parse_tflite

    out = work / "recipe.tflite"
    r = _convert(models["nhwc"], out, data["cal"], validation=data["val"], mode="int8", max_drop=2.0,
                 keep_float=["FULLY_CONNECTED"], int16=["conv2"], diagnose=False)
    r.raise_for_status()
    sg = parse_tflite(out.read_bytes()).subgraphs[0]
    by_op = {}
    for op in sg.operators:
        by_op.setdefault(op.opcode, []).append(sg.tensors[op.outputs[0]])
    assert all(t.type == "float32" for t in by_op["FULLY_CONNECTED"])
    assert any(t.type == "int16" and "conv2" in t.name for t in by_op["CONV_2D"])


def _fail_line(capfd: pytest.CaptureFixture[str]) -> str:
    # TFLite's native log ("INFO: Created TensorFlow Lite XNNPACK delegate") is not edgekit's output.
    err = [line for line in capfd.readouterr().err.strip().splitlines() if not line.startswith("INFO: ")]
    assert len(err) == 1, err
    assert err[0].startswith("edgekit convert: error: ")
    return err[0]


@pytest.mark.parametrize(
    ("kind", "extra", "message"),
    [
        ("quantized", [], "is already quantized (uint8 inputs or outputs)"),
        ("edgetpu", [], "compiled for the Edge TPU"),
        ("truncated", [], "truncated"),
        ("float", ["--keep-float", "NOPE"], "matches no op of the model"),
        ("float", ["--mode", "dynamic", "--int16", "conv2"], "has float activations"),
        ("float", ["--mode", "edgetpu", "--int16", "conv2"], "does not run int16"),
    ],
)
def test_cli_refuses_with_one_line_and_writes_nothing(models: dict[str, Path], data: dict[str, Path],
                                                      request: pytest.FixtureRequest, tmp_path: Path, kind: str,
                                                      extra: list[str], message: str,
                                                      capfd: pytest.CaptureFixture[str]) -> None:
    from edgekit.cli import main

    shared = {"quantized": "mobilenet_v2_1.0_224_quant.tflite", "edgetpu": "mobilenet_v1_0.25_128_quant_edgetpu.tflite"}
    if kind in shared:  # the real files in ../shared/models (skipped when absent)
        model = request.getfixturevalue("shared_models") / shared[kind]
    elif kind == "truncated":
        model = tmp_path / "cut.tflite"
        model.write_bytes(models["nhwc"].read_bytes()[:3000])
    else:
        model = models["nhwc"]
    out = tmp_path / "out.tflite"
    code = main(["convert", str(model), "-o", str(out), "--calibration", str(data["cal"]), "--scale", "1",
                 "--no-diagnose", *extra])
    assert code == 2
    assert message in _fail_line(capfd)
    assert list(tmp_path.glob("out*")) == []


def test_missing_quantizer_names_the_pip_command(models: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
                                                 capfd: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    import edgekit.commands.convert as cmd
    from edgekit.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(cmd.importlib.util, "find_spec",
                        lambda name, *a: None if name == "ai_edge_quantizer" else real(name, *a))
    assert main(["convert", str(models["nhwc"]), "-o", "m.tflite"]) == 2
    line = _fail_line(capfd)
    assert "needs ai-edge-quantizer" in line and "pip install" in line


def test_a_model_without_signature_gets_one(models: dict[str, Path], data: dict[str, Path], work: Path) -> None:
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    m = schema.ModelT.InitFromPackedBuf(bytearray(models["nhwc"].read_bytes()), 0)
    m.signatureDefs = []
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    bare = work / "nosig_float.tflite"
    bare.write_bytes(bytes(b.Output()))
    r = _convert(bare, work / "nosig_int8.tflite", data["cal"], validation=data["val"], mode="int8", max_drop=2.0,
                 diagnose=False)
    r.raise_for_status()
    assert r.metrics.top1_agreement is not None and r.metrics.top1_agreement >= 0.95


def test_large_weights_come_back_self_contained(work: Path, data: dict[str, Path]) -> None:
    """ai-edge-quantizer writes over 256 KB of weights after the flatbuffer (by offset); the file
    edgekit writes holds them inside, with its metadata, and any interpreter reads it."""
    tf = _tf()
    import keras

    from edgekit.runtimes import inspect_model
    from edgekit.runtimes.tflite_file import parse_tflite

    keras.utils.set_random_seed(0)
    inp = keras.Input((SIZE, SIZE, 3), batch_size=1, name="image")
    h = keras.layers.Dense(96, activation="relu")(keras.layers.Flatten()(keras.layers.Rescaling(1 / 255)(inp)))
    wide = _to_tflite(tf, keras.Model(inp, keras.layers.Dense(4, activation="softmax")(h)), work / "wide_float.tflite")
    out = work / "wide_int8.tflite"
    r = _convert(wide, out, data["cal"], validation=data["val"], mode="int8", diagnose=False)
    assert r.size_bytes > 256 * 1024 and r.metadata["quantization"]["engine"] == "ai-edge-quantizer"
    parsed = parse_tflite(out.read_bytes())
    assert all(b.start + b.size <= len(out.read_bytes()) for b in parsed.buffers)
    assert inspect_model(out).metadata["quantization"]["mode"] == "int8"
    x = np.load(data["val"])["x"][:40]
    assert np.mean(run_tflite(wide, x).argmax(1) == run_tflite(out, x).argmax(1)) >= 0.9


def test_a_recipe_on_a_keras_model_goes_through_the_quantizer(models: dict[str, Path], data: dict[str, Path],
                                                             work: Path) -> None:
    from edgekit.converters import PreprocessingOverrides
    from edgekit.runtimes.tflite_file import parse_tflite

    out = work / "keras_recipe.tflite"
    r = _convert(models["keras"], out, data["cal"], validation=data["val"], mode="int8", max_drop=2.0,
                 keep_float=["FULLY_CONNECTED"], diagnose=False, preprocessing=PreprocessingOverrides())
    r.raise_for_status()
    assert r.metadata["quantization"]["engine"] == "ai-edge-quantizer"
    sg = parse_tflite(out.read_bytes()).subgraphs[0]
    assert [sg.tensors[op.outputs[0]].type for op in sg.operators if op.opcode == "FULLY_CONNECTED"] == ["float32"]


def _support_metadata(mean: list[float], std: list[float], labels_file: str) -> bytes:
    """A TFLite Support metadata flatbuffer (metadata_schema.fbs, "M001") as MediaPipe's files carry:
    NormalizationOptions on the input, a TENSOR_AXIS_LABELS file on the output."""
    import flatbuffers

    b = flatbuffers.Builder(256)

    def floats(values: list[float]) -> int:
        b.StartVector(4, len(values), 4)
        for v in reversed(values):
            b.PrependFloat32(v)
        return b.EndVector()

    def tables(items: list[int]) -> int:
        b.StartVector(4, len(items), 4)
        for it in reversed(items):
            b.PrependUOffsetTRelative(it)
        return b.EndVector()

    m, s = floats(mean), floats(std)
    b.StartObject(2)  # NormalizationOptions: mean, std
    b.PrependUOffsetTRelativeSlot(0, m, 0)
    b.PrependUOffsetTRelativeSlot(1, s, 0)
    norm = b.EndObject()
    b.StartObject(2)  # ProcessUnit: options_type (1 = NormalizationOptions), options
    b.PrependUint8Slot(0, 1, 0)
    b.PrependUOffsetTRelativeSlot(1, norm, 0)
    units = tables([b.EndObject()])
    b.StartObject(7)  # TensorMetadata (input): process_units is slot 4
    b.PrependUOffsetTRelativeSlot(4, units, 0)
    tensor_in = b.EndObject()
    name = b.CreateString(labels_file)
    b.StartObject(4)  # AssociatedFile: name, description, type (2 = TENSOR_AXIS_LABELS), locale
    b.PrependUOffsetTRelativeSlot(0, name, 0)
    b.PrependInt8Slot(2, 2, 0)
    files = tables([b.EndObject()])
    b.StartObject(7)  # TensorMetadata (output): associated_files is slot 6
    b.PrependUOffsetTRelativeSlot(6, files, 0)
    tensor_out = b.EndObject()
    ins, outs = tables([tensor_in]), tables([tensor_out])
    b.StartObject(7)  # SubGraphMetadata: input_tensor_metadata 2, output_tensor_metadata 3
    b.PrependUOffsetTRelativeSlot(2, ins, 0)
    b.PrependUOffsetTRelativeSlot(3, outs, 0)
    subgraphs = tables([b.EndObject()])
    b.StartObject(8)  # ModelMetadata: subgraph_metadata is slot 3
    b.PrependUOffsetTRelativeSlot(3, subgraphs, 0)
    b.Finish(b.EndObject(), file_identifier=b"M001")
    return bytes(b.Output())


def test_mediapipe_style_metadata_gives_normalization_and_labels(models: dict[str, Path], data: dict[str, Path],
                                                                 work: Path) -> None:
    import zipfile

    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    from edgekit.converters import convert

    m = schema.ModelT.InitFromPackedBuf(bytearray(models["nhwc"].read_bytes()), 0)
    buf = schema.BufferT()
    buf.data = np.frombuffer(_support_metadata([0.0], [1.0], "labels.txt"), np.uint8)  # raw pixels: it rescales
    m.buffers.append(buf)
    entry = schema.MetadataT()
    entry.name, entry.buffer = "TFLITE_METADATA", len(m.buffers) - 1
    m.metadata = [*(m.metadata or []), entry]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    path = work / "mediapipe_style_float.tflite"
    path.write_bytes(bytes(b.Output()))
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("labels.txt", "\n".join(tiny.CLASSES) + "\n")
    r = convert(path, work / "mediapipe_style_int8.tflite", calibration=data["cal"], validation=data["val"],
                mode="int8", progress=False, diagnose=False)
    assert r.preprocessing is not None and "TFLite metadata" in r.preprocessing.decided_by
    assert r.preprocessing.std == (1.0, 1.0, 1.0) and r.labels == tiny.CLASSES
    assert r.metrics.accuracy is not None and r.metrics.accuracy > 0.9  # pixels / 255 would not get there
