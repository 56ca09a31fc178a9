"""`edgekit convert` and edgekit.converters.convert on small Keras models trained here.

Every mode is checked against the Keras float model by an independent computation (the
.tflite run directly in ai_edge_litert), not only by the converter's own report. The gate,
the FAILED-GATE file, auto-fallback, metadata, data sources and the CLI's errors too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgekit.cli import main
from edgekit.contract.metadata import ModelMetadata
from edgekit.converters import AccuracyGateError, ConvertOptions, Mode, PreprocessingOverrides, convert
from edgekit.converters.data import load_data
from edgekit.converters.options import ColorOrder, ResizeMode
from edgekit.converters.preprocessing import resolve_preprocessing
from edgekit.converters.sources import load_source
from edgekit.errors import InputError
from edgekit.runtimes import inspect_model
from tests import _tiny_models as tiny
from tests.converters._litert import run_tflite

ROOT = Path(__file__).resolve().parents[2]


def _tf() -> Any:
    return pytest.importorskip("tensorflow", reason="the converter needs TensorFlow (pip install 'edgekit-tflite[convert]')")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _tf()
    return tmp_path_factory.mktemp("convert")


@pytest.fixture(scope="module")
def trained(work: Path) -> tuple[Any, Path]:
    model, acc = tiny.classifier()
    assert acc > 0.9, f"the test classifier did not learn (held-out accuracy {acc})"
    path = work / "shapes.keras"
    model.save(path)
    return model, path


@pytest.fixture(scope="module")
def data(work: Path) -> dict[str, Path]:
    x, y = tiny.shapes(300, seed=7)
    xv, yv = tiny.shapes(200, seed=8)
    out = {"cal": work / "cal.npz", "val": work / "val.npz", "const": work / "const.npz"}
    np.savez(out["cal"], x=x, y=y)
    np.savez(out["val"], x=xv, y=yv)
    np.savez(out["const"], x=np.zeros_like(x[:150]), y=y[:150])
    return out


MODES = [  # mode, input dtype, how it is checked against the Keras float model, bound, size at most x float32
    ("float32", "float32", "cosine", 0.9999, 1.05),
    ("float16", "float32", "cosine", 0.99, 0.65),
    ("dynamic", "float32", "cosine", 0.99, 0.45),
    ("int8", "int8", "agreement", 0.95, 0.45),
    ("uint8", "uint8", "agreement", 0.95, 0.45),
    ("int8-float-io", "float32", "agreement", 0.95, 0.45),
    ("int16x8", "float32", "agreement", 0.97, 0.5),
]


@pytest.mark.parametrize(("mode", "dtype", "check", "bound", "size_ratio"), MODES)
def test_every_mode_matches_the_float_model(trained: tuple[Any, Path], data: dict[str, Path], work: Path,
                                            mode: str, dtype: str, check: str, bound: float,
                                            size_ratio: float) -> None:
    model, path = trained
    out = work / f"shapes_{mode}.tflite"
    r = convert(path, out, calibration=data["cal"], validation=data["val"], mode=mode, max_drop=5.0,
                diagnose=mode == "int8", progress=False)
    assert r.output == out and r.gate.passed
    info = inspect_model(out)
    assert info.inputs[0].dtype == np.dtype(dtype) and info.inputs[0].shape == (1, 32, 32, 3)
    assert info.metadata is not None and info.metadata["quantization"]["mode"] == mode
    assert ModelMetadata.parse(info.metadata).to_document() == info.metadata  # one writer, its parser's inverse
    xv, yv = np.load(data["val"])["x"], np.load(data["val"])["y"]
    keras_out = model.predict(xv.astype(np.float32), verbose=0)
    lite_out = run_tflite(out, xv)
    agreement = float(np.mean(keras_out.argmax(1) == lite_out.argmax(1)))
    cosine = np.sum(keras_out * lite_out, 1) / (np.linalg.norm(keras_out, axis=1) * np.linalg.norm(lite_out, axis=1))
    if check == "cosine":
        assert cosine.min() > bound
    assert agreement >= bound if check == "agreement" else agreement >= 0.99
    # the converter's own figure agrees with this independent one (its reference is the float .tflite)
    assert r.metrics.samples == 200
    assert abs(r.metrics.top1_agreement - agreement) <= 0.011
    assert r.metrics.float_accuracy == pytest.approx(float(np.mean(keras_out.argmax(1) == yv)), abs=0.011)
    assert r.size_bytes <= size_ratio * r.float_size_bytes
    if mode == "int8":
        assert len(r.layer_errors) >= 6 and all(e.rmse_over_scale < 2 for e in r.layer_errors if e.scale > 0)


def test_metadata_inside_the_converted_model(trained: tuple[Any, Path], data: dict[str, Path], work: Path) -> None:
    import hashlib

    _, path = trained
    labels = work / "labels.txt"
    labels.write_text("\n".join(tiny.CLASSES) + "\n")
    out = work / "meta.tflite"
    r = convert(path, out, calibration=data["cal"], mode="uint8", labels=labels, max_drop=3.0, progress=False,
                extra_metadata={"model_card": "https://example.org/shapes"})
    meta = inspect_model(out).metadata
    assert meta == r.metadata and meta["model_card"] == "https://example.org/shapes"
    assert meta["labels"] == list(tiny.CLASSES)
    assert meta["task"] == "classify" and meta["output_format"] == "classes"
    # the model starts with Rescaling(1/255): the device feeds raw pixels
    assert meta["preprocessing"] == {"input_size": [32, 32], "resize": "stretch", "color": "RGB",
                                     "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0]}
    assert "Rescaling" in r.preprocessing.decided_by
    assert meta["source"] == {"name": "shapes.keras", "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    assert meta["quantization"]["calibration_samples"] == 240 and meta["quantization"]["seed"] == 0
    assert meta["accuracy"]["validation_samples"] == 60 and meta["accuracy"]["gate"] == "PASS"
    assert meta["accuracy"]["top1_agreement"] == r.metrics.top1_agreement


def test_folder_calibration_labels_and_classify(trained: tuple[Any, Path], work: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    _, path = trained
    folder = tiny.write_image_folder(work / "images", per_class=30, seed=11)
    # sorted folder names are not this model's training order: the float model is near chance
    unordered = convert(path, work / "unordered.tflite", calibration=folder, mode="dynamic", progress=False)
    assert unordered.labels == tuple(sorted(tiny.CLASSES))
    assert any("training order" in w for w in unordered.warnings)
    labels = work / "train_order.txt"
    labels.write_text("\n".join(tiny.CLASSES) + "\n")
    out = work / "folder.tflite"
    r = convert(path, out, calibration=folder, labels=labels, mode="int8", max_drop=5.0, progress=False,
                diagnose=False)
    assert r.labels == tiny.CLASSES
    assert r.metrics.float_accuracy is not None and r.metrics.float_accuracy > 0.9
    assert r.gate.basis == "accuracy" and not any("training order" in w for w in r.warnings)
    assert any(f.code == "few-samples" for f in r.audit.findings)  # 96 < 100
    image = next((folder / "cross").rglob("*.png"))
    assert main(["classify", "-m", str(out), "-k", "1", "--json", str(image)]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["classes"][0]["label"] == "cross"


def test_gate_fails_with_exit_3_then_good_calibration_recovers(trained: tuple[Any, Path], data: dict[str, Path],
                                                              work: Path, capfd: pytest.CaptureFixture[str]) -> None:
    _, path = trained
    out, report = work / "gate.tflite", work / "gate_report"
    args = ["convert", str(path), "--mode", "int8", "--validation", str(data["val"]), "--max-drop", "5",
            "-o", str(out), "--json", "--report-dir", str(report), "--no-diagnose"]
    code = main(args + ["--calibration", str(data["const"])])
    captured = capfd.readouterr()
    assert code == 3
    assert not out.exists()
    failed = work / "gate.FAILED-GATE.tflite"
    assert failed.exists() and inspect_model(failed).metadata["accuracy"]["gate"] == "FAIL"
    doc = json.loads(captured.out)
    assert doc["gate"]["passed"] is False and doc["gate"]["drop"] > 5 and doc["output"] == str(failed)
    assert "accuracy gate failed" in captured.err and "FAILED-GATE" in captured.err
    assert "constant" in captured.err  # the audit said why
    # the converter's own log stays out of the way
    assert "Saved artifact" not in captured.out + captured.err and "I0000" not in captured.err
    assert "**Gate: FAIL**" in (report / "report.md").read_text()
    assert json.loads((report / "report.json").read_text())["gate"]["status"] == "FAIL"
    assert main(args + ["--calibration", str(data["cal"])]) == 0
    assert out.exists()


def test_impossible_gate_raises_for_status(trained: tuple[Any, Path], data: dict[str, Path], work: Path) -> None:
    r = convert(trained[1], work / "never.tflite", calibration=data["cal"], mode="dynamic", max_drop=-1.0,
                progress=False)
    assert not r.passed and r.output.name == "never.FAILED-GATE.tflite"
    with pytest.raises(AccuracyGateError) as err:
        r.raise_for_status()
    assert err.value.exit_code == 3


def test_auto_fallback_keeps_the_broken_layer_in_float(trained: tuple[Any, Path], data: dict[str, Path],
                                                       work: Path) -> None:
    outlier = tiny.with_weight_outlier(trained[0])
    cal = (np.load(data["cal"])["x"], np.load(data["cal"])["y"])
    opts = ConvertOptions(mode=Mode.UINT8, max_drop=2.0, progress=False)
    plain = convert(outlier, work / "outlier.tflite", calibration=cal, options=opts)
    assert not plain.passed and plain.gate.drop > 30
    worst = max(plain.layer_errors, key=lambda e: e.rmse_over_scale)
    assert worst.name.startswith("probsw") and worst.rmse_over_scale > 10
    fixed = convert(outlier, work / "outlier.tflite", calibration=cal, options=opts, auto_fallback=True,
                    report_dir=work / "fallback_report")
    assert fixed.passed and fixed.output == work / "outlier.tflite"
    assert fixed.layers_kept_in_float == (worst.name,)
    # the all-int8 model first (what the costs are against), then the one layer in float
    assert fixed.fallback is not None and [a.trial.passed for a in fixed.fallback.attempts] == [False, True]
    assert [a.label for a in fixed.fallback.attempts] == ["all int8", "+ 1 worst layer(s)"]
    assert inspect_model(fixed.output).inputs[0].dtype == np.uint8  # the mode's promise kept
    assert fixed.size_bytes > plain.size_bytes  # the cost: float weights for that layer
    assert fixed.metadata["quantization"]["layers_in_float"] == [worst.name]
    report = json.loads((work / "fallback_report" / "report.json").read_text())
    assert report["fallback"]["attempts"][1]["layers_in_float"] == [worst.name]
    assert (work / "fallback_report" / "fallback.png").read_bytes()[:4] == b"\x89PNG"
    assert (work / "fallback_report" / "layer_errors.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_auto_fallback_on_narrow_calibration_is_monotone(trained: tuple[Any, Path], data: dict[str, Path],
                                                         work: Path) -> None:
    x, y = np.load(data["cal"])["x"], np.load(data["cal"])["y"]
    narrow = ((x // 5).astype(np.uint8), y)  # pixels 0..51: most real inputs clip
    r = convert(trained[1], work / "narrow.tflite", calibration=narrow, validation=data["val"],
                mode="int8-float-io", max_drop=2.0, auto_fallback=True, max_fallback_layers=4, progress=False)
    attempts = r.fallback.attempts
    assert len(attempts) >= 2
    kept = [[x.name for x in a.kept_in_float] for a in attempts]
    assert all(kept[i] == kept[i + 1][:len(kept[i])] for i in range(len(kept) - 1))  # each adds to the last
    assert all(not a.trial.passed for a in attempts[:-1])  # the loop stops at the first pass
    assert attempts[-1].trial.drop < attempts[0].trial.drop
    assert r.layers_kept_in_float  # the best attempt is what was written


def test_savedmodel_with_dynamic_batch_is_fixed_to_one(trained: tuple[Any, Path], data: dict[str, Path],
                                                       work: Path) -> None:
    from ai_edge_litert.interpreter import Interpreter

    saved = work / "saved_model"
    trained[0].export(str(saved), verbose=False)
    out = work / "saved.tflite"
    r = convert(saved, out, calibration=data["cal"], mode="int8", progress=False, diagnose=False,
                preprocessing=PreprocessingOverrides(mean=(0.0,), std=(1.0,)))
    interp = Interpreter(model_path=str(out))
    assert interp.get_input_details()[0]["shape_signature"].tolist() == [1, 32, 32, 3]
    assert r.metrics.top1_agreement >= 0.95
    assert r.preprocessing.decided_by == "flags" and not any("infer" in w for w in r.warnings)
    assert len(r.source_sha256) == 64


def test_preprocessing_is_inferred_or_stated() -> None:
    _tf()
    import keras

    def model(first: Any | None, name: str = "m") -> Any:
        inp = keras.Input((8, 8, 3))
        h = first(inp) if first is not None else inp
        return keras.Model(inp, keras.layers.Dense(2)(keras.layers.Flatten()(h)), name=name)

    def resolve(m: Any, **given: Any) -> tuple[Any, list[str]]:
        with load_source(m) as src:
            return resolve_preprocessing(src, PreprocessingOverrides(**given))

    pre, warns = resolve(model(keras.layers.Rescaling(1 / 127.5, offset=-1)))
    assert (pre.mean, pre.std, warns) == ((0.0,) * 3, (1.0,) * 3, [])
    pre, warns = resolve(model(None))
    assert pre.std == (255.0,) * 3 and pre.decided_by == "assumed" and "--scale" in warns[0]
    pre, warns = resolve(model(None, name="mobilenetv2_1.00_224"))
    assert pre.mean == (127.5,) * 3 and pre.std == (127.5,) * 3 and not warns
    pre, warns = resolve(model(keras.layers.Rescaling(1 / 255)), scale=1 / 255)
    assert pre.std == pytest.approx((255.0,) * 3) and "normalizing twice" in warns[0]
    pre, _ = resolve(model(None), mean=(1.0, 2.0, 3.0), std=(2.0,), color=ColorOrder.BGR)
    assert (pre.mean, pre.std, pre.color) == ((1.0, 2.0, 3.0), (2.0,) * 3, ColorOrder.BGR)


def _pre(size: int = 4, **kw: Any) -> Any:
    from edgekit.converters.preprocessing import Preprocessing

    return Preprocessing(input_size=(size, size), channels=3, mean=(0.0,) * 3, std=(1.0,) * 3, **kw)


def test_data_sources_sampling_and_pixel_preprocessing(tmp_path: Path) -> None:
    tf = _tf()
    x, y = tiny.shapes(50, seed=1)
    shape = (1, 32, 32, 3)
    kw: dict[str, Any] = {"input_shape": shape, "input_dtype": "float32", "pre": _pre(32),
                          "num_calibration": 30, "num_validation": 20, "seed": 5, "holdout": 0.2}
    np.save(tmp_path / "x.npy", x)
    a = load_data((x, y), None, **kw)
    b = load_data(tf.data.Dataset.from_tensor_slices((x, y)), None, **kw)
    c = load_data(iter(zip(x, y)), None, **kw)
    d = load_data(tmp_path / "x.npy", None, **kw)
    assert d.validation.y is None
    np.testing.assert_array_equal(a.calibration.x, d.calibration.x)
    for split in (a, b, c, d):
        assert (len(split.calibration), len(split.validation)) == (30, 10)
        assert split.calibration.x.dtype == np.float32 and split.calibration.x.max() > 150  # raw pixels
    np.testing.assert_array_equal(a.calibration.x, b.calibration.x)
    np.testing.assert_array_equal(a.validation.y, c.validation.y)
    assert not np.array_equal(a.calibration.x, load_data((x, y), None, **{**kw, "seed": 6}).calibration.x)
    # held-out samples are never calibrated on
    cal_rows = {r.tobytes() for r in a.calibration.x}
    assert not any(r.tobytes() in cal_rows for r in a.validation.x)
    # uint8 pixels get the model's preprocessing: BGR swaps channels, letterbox pads with 114
    px = np.zeros((2, 2, 4, 3), np.uint8)
    px[..., 0] = 200
    bgr = load_data(px, px, **{**kw, "input_shape": (1, 4, 4, 3), "pre": _pre(color=ColorOrder.BGR)})
    assert bgr.validation.x[0, 1, 1].tolist() == [0.0, 0.0, 200.0]
    boxed = load_data(px, px, **{**kw, "input_shape": (1, 4, 4, 3), "pre": _pre(resize=ResizeMode.LETTERBOX)})
    assert boxed.validation.x[0, 0, 0].tolist() == [114.0] * 3 and boxed.validation.x[0, 1, 1, 0] == 200.0
    # float arrays are model inputs already: they must fit the input shape
    with pytest.raises(InputError, match=r"do not fit the model input \(32, 32, 3\)"):
        load_data(np.zeros((4, 8, 8, 3), np.float32), None, **kw)


def test_folder_class_names_must_be_in_the_labels(work: Path) -> None:
    folder = tiny.write_image_folder(work / "labelled", per_class=2, seed=3)
    kw: dict[str, Any] = {"input_shape": (1, 32, 32, 3), "input_dtype": "float32", "pre": _pre(32),
                          "num_calibration": 30, "num_validation": 20, "seed": 0, "holdout": 0.2}
    ok = load_data(folder, None, labels=("cross", "hbar", "square", "vbar", "other"), **kw)
    assert ok.class_names == ("cross", "hbar", "square", "vbar", "other") and len(ok.calibration) == 6
    with pytest.raises(InputError, match=r"class folders \['vbar'\] .* are not in the labels list"):
        load_data(folder, None, labels=("cross", "hbar", "square"), **kw)
    broken = tiny.write_image_folder(work / "broken", per_class=2, seed=3)
    (broken / "hbar" / "0000_broken.png").write_bytes(b"\x89PNG\r\n\x1a\n but cut short")
    with pytest.raises(InputError, match=r"cannot decode image '.*0000_broken.png'"):
        load_data(broken, None, **{**kw, "holdout": 0.9})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mode", "int8"], "pass --calibration"),
        (["--mode", "int8", "--auto-fallback"], "needs a gate"),
        (["--mode", "float16", "--mean", "1,2"], "one number or three"),
        (["--mode", "float16", "--input-size", "big"], "WIDTHxHEIGHT"),
        (["--mode", "dynamic", "--labels", "/nonexistent/labels.txt"], "labels"),
        (["--mode", "int8", "--calibration", "/nonexistent/images"], "does not exist"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(trained: tuple[Any, Path], work: Path, args: list[str], message: str,
                                             capfd: pytest.CaptureFixture[str]) -> None:
    code = main(["convert", str(trained[1]), "-o", str(work / "bad.tflite"), "-q", *args])
    err = capfd.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("edgekit convert: error: ") and message in err[-1]


@pytest.mark.parametrize(
    ("model", "message"),
    [("missing.keras", "does not exist"), ("model.tflite", "too few for a TFLite model"), ("notes.txt", "not a Keras")],
)
def test_cli_refuses_what_is_not_a_model(tmp_path: Path, model: str, message: str,
                                         capfd: pytest.CaptureFixture[str]) -> None:
    _tf()
    if model != "missing.keras":
        (tmp_path / model).write_bytes(b"x")
    assert main(["convert", str(tmp_path / model), "-o", str(tmp_path / "o.tflite"), "--mode", "dynamic"]) == 2
    assert message in capfd.readouterr().err


def test_edgetpu_mode_without_compiler_writes_the_uint8_model(trained: tuple[Any, Path], data: dict[str, Path],
                                                              work: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("EDGEKIT_EDGETPU_COMPILER", "edgetpu_compiler_not_here")
    out = work / "tpu.tflite"
    code = main(["convert", str(trained[1]), "--mode", "edgetpu", "--calibration", str(data["cal"]),
                 "-o", str(out), "--no-diagnose"])
    assert code == 2
    assert "apt-get install edgetpu-compiler" in capfd.readouterr().err
    assert inspect_model(out).inputs[0].dtype == np.uint8


def test_edgetpu_mode_runs_the_compiler(trained: tuple[Any, Path], data: dict[str, Path], work: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.converters.test_edgetpu_compiler import _fake_compiler

    script = _fake_compiler(work / "bin", "partial_stdout.txt")
    monkeypatch.setenv("EDGEKIT_EDGETPU_COMPILER", str(script))
    r = convert(trained[1], work / "tpu2.tflite", calibration=data["cal"], mode="edgetpu", progress=False,
                diagnose=False)
    r.raise_for_status()
    assert r.edgetpu is not None and r.edgetpu.model == work / "tpu2_edgetpu.tflite"
    assert r.edgetpu.report.ops_on_cpu == 3
    assert inspect_model(r.edgetpu.model).metadata["edgetpu"]["ops_on_edgetpu"] == 7
    assert r.to_dict()["edgetpu"]["operations"][4]["status"] == "Operation is working on an unsupported data type"


@pytest.mark.slow
def test_compare_modes_table(trained: tuple[Any, Path], data: dict[str, Path],
                             capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", str(trained[1]), "--compare-modes", "--calibration", str(data["cal"]),
                 "--json", "-q"]) == 0
    rows = {r["mode"]: r for r in json.loads(capfd.readouterr().out)}
    assert set(rows) == {m.value for m in Mode}
    assert rows["edgetpu"]["error"] and rows["int8"]["error"] is None
    f32 = rows["float32"]["size_bytes"]
    assert rows["int8"]["size_bytes"] < 0.45 * f32 and rows["float16"]["size_bytes"] < 0.65 * f32
    assert all(rows[m]["top1_agreement"] >= 0.95 for m in ("float16", "dynamic", "int8", "uint8", "int16x8"))


def test_cli_module_imports_no_tensorflow() -> None:
    code = ("import sys; from edgekit.cli import build_parser; build_parser(); "
            "import edgekit.commands.convert, edgekit.converters; print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "False"


def test_missing_tensorflow_names_the_extra(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    import edgekit.commands.convert as cmd

    real = importlib.util.find_spec
    monkeypatch.setattr(cmd.importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorflow" else real(name, *a))
    assert main(["convert", "m.keras", "-o", "m.tflite"]) == 2
    assert "pip install 'edgekit-tflite[convert]'" in capfd.readouterr().err


def test_converter_failure_becomes_one_clear_error() -> None:
    from edgekit.converters.engines.tflite_converter import _conversion_error

    exc = RuntimeError("<unknown>:0: error: loc(fused['RFFT2D']): 'tfl.rfft2d' op is neither a custom op nor a "
                       "flex op\n<unknown>:0: note: see current operation: %0 = tfl.rfft2d\n")
    text = str(_conversion_error(Mode.INT8, exc))
    assert text.startswith("TFLiteConverter failed in mode 'int8': <unknown>:0: error:")
    assert "'tfl.rfft2d' op is neither" in text and "note: see current operation" not in text
    assert "--verbose" in text
