"""Model, backends and delegates on real models, small built models, and faked environments.

Runs with any interpreter backend: ai-edge-litert (dev), or tflite-runtime 2.14 + numpy<2
without TensorFlow (one CI job); what differs between them is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgekit.errors import BackendError, DelegateError, InputError, ModelError
from edgekit.preprocess import fit, load_image, to_input
from edgekit.runtimes import Delegate, EdgeTPUDevice, TensorSpec, edgetpu_library_name, load_model
from edgekit.runtimes import backends, delegates
from edgekit.runtimes import loader as loader_module
from tests.conftest import shared_model
from tests.fixtures_models import TinyModels, tiny_models  # noqa: F401 - a fixture

V2 = "mobilenet_v2_1.0_224_quant.tflite"
SMALL = "mobilenet_v1_0.25_128_quant.tflite"
SSD = "ssd_mobilenet_v1_coco_quant.tflite"
EDGETPU = "mobilenet_v1_0.25_128_quant_edgetpu.tflite"
ROOT = Path(__file__).resolve().parents[2]


def _labels(shared_models: Path, name: str) -> list[str]:
    return (shared_models / name).read_text().splitlines()


def _image_input(model: Any, image_path: Path) -> np.ndarray:
    spec = model.inputs[0]
    resized, _ = fit(load_image(image_path), (spec.shape[2], spec.shape[1]))
    return to_input(resized, spec)


# --- real models, real images ------------------------------------------------------------
@pytest.mark.parametrize(("image", "label", "score"), [
    ("grace_hopper.png", "military uniform", 0.92),
    ("parrot.jpg", "macaw", 0.99),
])
def test_mobilenet_v2_classifies_real_images(shared_models: Path, shared_images: Path, image: str,
                                             label: str, score: float) -> None:
    labels = _labels(shared_models, "imagenet_labels.txt")
    with load_model(shared_model(shared_models, V2)) as m:
        scores = m.run(_image_input(m, shared_images / image))[0][0]
    top = int(np.argmax(scores))
    assert labels[top] == label
    assert scores[top] == pytest.approx(score, abs=0.05)


@pytest.mark.parametrize(("image", "wanted"), [
    ("grace_hopper.png", {"person": (1, 0.6)}),
    ("kite_and_cold.jpg", {"person": (2, 0.4), "kite": (2, 0.4)}),
])
def test_ssd_finds_real_objects(shared_models: Path, shared_images: Path, image: str,
                                wanted: dict[str, tuple[int, float]]) -> None:
    coco = _labels(shared_models, "coco_labels.txt")
    with load_model(shared_model(shared_models, SSD)) as m:
        boxes, classes, scores, count = m.run(_image_input(m, shared_images / image))
    n = int(count[0])
    assert boxes.shape == (1, 10, 4) and 0 < n <= 10
    found = [(coco[int(c)], float(s)) for c, s in zip(classes[0][:n], scores[0][:n])]
    for name, (at_least, min_score) in wanted.items():
        assert sum(1 for c, s in found if c == name and s > min_score) >= at_least, found
    assert np.all((boxes[0][:n] >= -0.01) & (boxes[0][:n] <= 1.01))


@pytest.mark.parametrize("delegate", ["auto", "edgetpu", "edgetpu:usb:0"])
def test_edgetpu_model_without_runtime_says_libedgetpu(shared_models: Path, delegate: str) -> None:
    with pytest.raises(ModelError, match="libedgetpu") as err:
        load_model(shared_model(shared_models, EDGETPU), delegate)
    assert "compiled for the Edge TPU" in str(err.value)


def test_edgetpu_model_on_cpu_is_refused(shared_models: Path) -> None:
    with pytest.raises(ModelError, match="use --delegate edgetpu"):
        load_model(shared_model(shared_models, EDGETPU), "cpu")


def _xnnpack_nodes_or_skip(m: Any) -> None:
    if m.delegate_nodes == 0 and m.backend.name == "tflite_runtime" and m.inputs[0].quantized:
        pytest.skip(f"{m.backend} applies XNNPACK to float models only (no quantized XNNPACK by default)")


def test_cpu_and_xnnpack_agree(shared_models: Path, shared_images: Path) -> None:
    path = shared_model(shared_models, V2)
    with load_model(path, "cpu") as cpu, load_model(path, Delegate.XNNPACK) as xnn:
        x = _image_input(cpu, shared_images / "grace_hopper.png")
        a, b = cpu.run(x)[0][0], xnn.run(x)[0][0]
        assert (cpu.delegate, xnn.delegate) == (Delegate.CPU, Delegate.XNNPACK)
        assert cpu.delegate_nodes == 0
        assert int(np.argmax(a)) == int(np.argmax(b))
        assert np.abs(a - b).max() <= 0.05
        _xnnpack_nodes_or_skip(xnn)
        assert xnn.delegate_nodes > 0


# --- inputs ----------------------------------------------------------------------------
@pytest.mark.parametrize(("make", "fragments"), [
    (lambda: np.zeros((1, 64, 64, 3), np.uint8), ["(1, 128, 128, 3)", "(1, 64, 64, 3)"]),
    (lambda: np.zeros((128, 128), np.uint8), ["(1, 128, 128, 3)", "(128, 128)"]),
    (lambda: np.zeros((2, 128, 128, 3), np.uint8), ["(1, 128, 128, 3)", "(2, 128, 128, 3)"]),
    (lambda: np.zeros((1, 128, 128, 3), np.int32), ["uint8", "int32", "(1, 128, 128, 3)"]),
    (lambda: np.zeros((1, 128, 128, 3), np.int8), ["uint8", "int8", "pass floats"]),
    (lambda: [np.zeros((1, 128, 128, 3), np.uint8)] * 2, ["1 input(s)", "got 2 array(s)"]),
    (lambda: {"image": np.zeros((1, 128, 128, 3), np.uint8)}, ["unknown ['image']", "missing ['input']"]),
])
def test_wrong_inputs_are_input_errors(shared_models: Path, make: Any, fragments: list[str]) -> None:
    with load_model(shared_model(shared_models, SMALL)) as m:
        with pytest.raises(InputError) as err:
            m.run(make())
    for fragment in fragments:
        assert fragment in str(err.value)


def test_float_input_is_quantized_like_by_hand(shared_models: Path) -> None:
    rng = np.random.default_rng(0)
    with load_model(shared_model(shared_models, SMALL)) as m:
        spec = m.inputs[0]
        x = rng.uniform(-1, 1, spec.shape).astype(np.float32)
        by_hand = np.clip(np.round(x / spec.scale) + spec.zero_point, 0, 255).astype(np.uint8)
        quantized_by_model = m.run(x, dequantize=False)[0]
        np.testing.assert_array_equal(quantized_by_model, m.run(by_hand, dequantize=False)[0])
        # A missing batch dimension is added; names work as well as positions.
        np.testing.assert_array_equal(m.run(x[0], dequantize=False)[0], quantized_by_model)
        np.testing.assert_array_equal(m.run({spec.name: by_hand}, dequantize=False)[0], quantized_by_model)


def test_zero_copy_path_matches_run(shared_models: Path, shared_images: Path) -> None:
    with load_model(shared_model(shared_models, SSD)) as m:
        x = _image_input(m, shared_images / "grace_hopper.png")
        expected = m.run(x)
        m.input_view(0)[...] = x
        m.invoke()
        for i, want in enumerate(expected):
            np.testing.assert_array_equal(m.output(i), want)


@pytest.mark.parametrize(("dtype", "scale", "zero_point"), [
    (np.uint8, 1 / 128, 128), (np.uint8, 0.0235, 3), (np.int8, 1 / 255, -128), (np.int8, 0.05, 0),
    (np.int16, 1 / 32768, 0), (np.int16, 0.0021, -7),
])
def test_quantize_dequantize_round_trip(dtype: Any, scale: float, zero_point: int) -> None:
    spec = TensorSpec("t", 0, (1000,), np.dtype(dtype), scale, zero_point)
    info = np.iinfo(dtype)
    lo, hi = scale * (info.min - zero_point), scale * (info.max - zero_point)
    x = np.random.default_rng(1).uniform(lo, hi, 1000).astype(np.float32)
    q = spec.quantize(x)
    assert q.dtype == dtype
    assert np.abs(spec.dequantize(q) - x).max() <= scale / 2 * 1.001
    # Out of range clips to the type's ends instead of wrapping around.
    ends = spec.quantize(np.array([lo - 100 * scale, hi + 100 * scale], np.float32))
    assert ends.tolist() == [info.min, info.max]


def test_dequantize_widens_before_subtracting() -> None:
    spec = TensorSpec("t", 0, (2,), np.dtype(np.uint8), 0.5, 200)
    assert spec.dequantize(np.array([0, 255], np.uint8)).tolist() == [-100.0, 27.5]


# --- lifetime --------------------------------------------------------------------------
def test_close_twice_then_use_is_model_error(shared_models: Path) -> None:
    m = load_model(shared_model(shared_models, SMALL))
    x = np.zeros(m.inputs[0].shape, np.uint8)
    m.run(x)
    m.close()
    m.close()
    assert m.closed
    for use in (lambda: m.run(x), m.invoke, lambda: m.input_view(0), lambda: m.output(0)):
        with pytest.raises(ModelError, match="closed"):
            use()


def test_context_manager_closes(shared_models: Path) -> None:
    with load_model(shared_model(shared_models, SMALL), "cpu", num_threads=1) as m:
        assert not m.closed and m.num_threads == 1
        assert m.describe()["delegate"] == "cpu"
    assert m.closed


@pytest.mark.parametrize("threads", [0, -1, 1.5, "2"])
def test_bad_thread_count(shared_models: Path, threads: Any) -> None:
    with pytest.raises(InputError, match="num_threads"):
        load_model(shared_model(shared_models, SMALL), num_threads=threads)


# --- backends --------------------------------------------------------------------------
def _fake_module(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


def _fake_tensorflow() -> dict[str, types.ModuleType]:
    lite = types.SimpleNamespace(Interpreter=object,
                                 experimental=types.SimpleNamespace(load_delegate=print, OpResolverType=None))
    return {"tensorflow": _fake_module("tensorflow", lite=lite, __version__="0.0-fake")}


def _fake_tflite_runtime() -> dict[str, types.ModuleType]:
    interp = _fake_module("tflite_runtime.interpreter", Interpreter=object, load_delegate=print)
    return {"tflite_runtime": _fake_module("tflite_runtime", __version__="2.14.0-fake", interpreter=interp),
            "tflite_runtime.interpreter": interp}


_GONE = {"ai_edge_litert": ["ai_edge_litert", "ai_edge_litert.interpreter"],
         "tflite_runtime": ["tflite_runtime", "tflite_runtime.interpreter"], "tensorflow": ["tensorflow"]}
_NUMPY2 = int(np.__version__.split(".")[0]) >= 2


@pytest.mark.parametrize(("gone", "fakes", "env", "expected"), [
    pytest.param(["ai_edge_litert", "tflite_runtime", "tensorflow"], {}, None,
                 BackendError("pip install ai-edge-litert"), id="none-installed"),
    pytest.param(["ai_edge_litert", "tflite_runtime"], _fake_tensorflow(), None, "tensorflow",
                 id="falls-back-to-tf.lite"),
    pytest.param(["ai_edge_litert", "tensorflow"], _fake_tflite_runtime(), None,
                 BackendError("numpy<2") if _NUMPY2 else "tflite_runtime", id="falls-back-to-tflite_runtime"),
    pytest.param([], _fake_tensorflow(), "tensorflow", "tensorflow", id="env-chooses-tf"),
    pytest.param(["tflite_runtime"], {}, "tflite-runtime", BackendError("pip install tflite-runtime"),
                 id="env-names-missing-backend"),
    pytest.param([], {}, "onnxruntime", BackendError("unknown backend 'onnxruntime'"), id="env-unknown"),
])
def test_backend_resolution(monkeypatch: pytest.MonkeyPatch, gone: list[str],
                            fakes: dict[str, types.ModuleType], env: str | None, expected: Any) -> None:
    monkeypatch.setattr(backends, "_cache", {})
    for name in gone:
        for mod in _GONE[name]:
            monkeypatch.setitem(sys.modules, mod, None)  # makes `import mod` fail
    for name, mod in fakes.items():
        monkeypatch.setitem(sys.modules, name, mod)
    if env is None:
        monkeypatch.delenv(backends.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(backends.ENV_VAR, env)
    if isinstance(expected, BackendError):
        with pytest.raises(BackendError) as err:
            backends.resolve_backend()
        assert str(expected) in str(err.value)
    else:
        # Falling back to tf.lite on its own warns; being asked for it does not.
        warns = pytest.warns(UserWarning, match="deprecated") if expected == "tensorflow" and env is None \
            else contextlib.nullcontext()
        with warns:
            assert backends.resolve_backend().name == expected


def test_a_ctrl_c_inside_the_interpreters_import_is_an_interrupt_not_a_missing_backend(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """pybind11 reports a SIGINT inside a native module's init as "ImportError: initialization
    failed" caused by the KeyboardInterrupt: edgekit must not take that for a missing package and
    fall back to the next interpreter (it once went on to TensorFlow's, exit 0, after a Ctrl-C)."""
    def cut_short(name: str) -> Any:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise ImportError("initialization failed") from exc

    monkeypatch.setattr(backends.importlib, "import_module", cut_short)
    monkeypatch.setattr(backends, "_cache", {})
    monkeypatch.delenv(backends.ENV_VAR, raising=False)
    with pytest.raises(KeyboardInterrupt):
        backends.resolve_backend()
    assert backends._cache == {}


def test_unknown_backend_argument(shared_models: Path) -> None:
    with pytest.raises(BackendError, match="choose one of ai_edge_litert, tflite_runtime, tensorflow"):
        load_model(shared_model(shared_models, SMALL), backend="tflite-micro")


# --- delegates -------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("usb", EdgeTPUDevice("usb", None)), ("usb:1", EdgeTPUDevice("usb", 1)),
    ("pci:0", EdgeTPUDevice("pci", 0)), ("pci", EdgeTPUDevice("pci", None)), (":2", EdgeTPUDevice(None, 2)),
    (" USB:3 ", EdgeTPUDevice("usb", 3)),
    ("foo", InputError), ("usb:x", InputError), ("", InputError), ("usb:", InputError), ("pci:-1", InputError),
])
def test_edgetpu_device_parse(text: str, expected: Any) -> None:
    if expected is InputError:
        with pytest.raises(InputError, match="use usb, usb:N, pci, pci:N or :N"):
            EdgeTPUDevice.parse(text)
    else:
        assert EdgeTPUDevice.parse(text) == expected


@pytest.mark.parametrize(("device", "option"), [
    (EdgeTPUDevice("usb", None), "usb"), (EdgeTPUDevice("usb", 1), "usb:1"), (EdgeTPUDevice(None, 2), ":2"),
    (EdgeTPUDevice(), None),
])
def test_edgetpu_device_option(device: EdgeTPUDevice, option: str | None) -> None:
    assert device.option == option


@pytest.mark.parametrize(("text", "expected"), [
    ("auto", (Delegate.AUTO, None)), ("CPU", (Delegate.CPU, None)), ("xnnpack", (Delegate.XNNPACK, None)),
    ("edgetpu", (Delegate.EDGETPU, None)), ("edgetpu:usb:1", (Delegate.EDGETPU, EdgeTPUDevice("usb", 1))),
    ("gpu", InputError), ("cpu:usb", InputError), ("edgetpu:foo", InputError),
])
def test_delegate_parse(text: str, expected: Any) -> None:
    if expected is InputError:
        with pytest.raises(InputError):
            Delegate.parse(text)
    else:
        assert Delegate.parse(text) == expected


@pytest.mark.parametrize(("system", "library"), [
    ("Linux", "libedgetpu.so.1"), ("Darwin", "libedgetpu.1.dylib"), ("Windows", "edgetpu.dll"),
    ("SunOS", DelegateError),
])
def test_edgetpu_library_name_per_os(system: str, library: Any) -> None:
    if library is DelegateError:
        with pytest.raises(DelegateError, match="not available for SunOS"):
            edgetpu_library_name(system)
    else:
        assert edgetpu_library_name(system) == library


def _raising(exc: Exception) -> Any:
    calls: list[tuple[Any, ...]] = []

    def load_delegate(*args: Any) -> Any:
        calls.append(args)
        raise exc

    load_delegate.calls = calls  # type: ignore[attr-defined]
    return load_delegate


@pytest.mark.parametrize(("system", "exc", "fragments"), [
    ("Linux", OSError("libedgetpu.so.1: cannot open shared object file"),
     ["could not load the Edge TPU runtime 'libedgetpu.so.1'", "libedgetpu1-std"]),
    ("Darwin", OSError("dlopen failed"), ["'libedgetpu.1.dylib'", "Install the Edge TPU runtime"]),
    ("Windows", OSError("not found"), ["'edgetpu.dll'"]),
    ("Linux", ValueError("Failed to load delegate"), ["installed but no Edge TPU answered", "USB 3"]),
])
def test_load_edgetpu_delegate_failures(monkeypatch: pytest.MonkeyPatch, system: str, exc: Exception,
                                        fragments: list[str]) -> None:
    monkeypatch.setattr(delegates.platform, "system", lambda: system)
    monkeypatch.delenv("EDGEKIT_EDGETPU_LIBRARY", raising=False)
    fake = _raising(exc)
    with pytest.raises(DelegateError) as err:
        delegates.load_edgetpu_delegate(fake, EdgeTPUDevice("usb", 0))
    for fragment in fragments:
        assert fragment in str(err.value)
    assert fake.calls == [(edgetpu_library_name(system), {"device": "usb:0"})]


def test_edgetpu_library_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDGEKIT_EDGETPU_LIBRARY", "/opt/coral/libedgetpu.so.1")
    fake = _raising(OSError("nope"))
    with pytest.raises(DelegateError, match="/opt/coral/libedgetpu.so.1"):
        delegates.load_edgetpu_delegate(fake)
    assert fake.calls == [("/opt/coral/libedgetpu.so.1", {})]


def test_edgetpu_delegate_on_plain_model_is_delegate_error(monkeypatch: pytest.MonkeyPatch,
                                                           shared_models: Path) -> None:
    real = backends.resolve_backend()
    fake = _raising(OSError("libedgetpu.so.1: cannot open shared object file"))
    monkeypatch.setattr(loader_module, "resolve_backend",
                        lambda name=None: dataclasses.replace(real, load_delegate=fake))
    with pytest.raises(DelegateError, match="libedgetpu"):
        load_model(shared_model(shared_models, SMALL), "edgetpu:pci:1")
    assert fake.calls[0][1] == {"device": "pci:1"}


# --- models the tests build (TensorFlow needed) -------------------------------------------
def _load_built(path: Path, delegate: str = "auto") -> Any:
    try:
        return load_model(path, delegate)
    except ModelError as exc:
        if "op versions newer than this interpreter" in str(exc):
            pytest.skip(f"this interpreter is older than the converter: {exc}")
        raise


@pytest.mark.parametrize("delegate", ["cpu", "xnnpack"])
def test_built_float_model_matches_keras(tiny_models: TinyModels, delegate: str) -> None:  # noqa: F811
    with _load_built(tiny_models.float_path, delegate) as m:
        got = np.concatenate([m.run(x)[0] for x in tiny_models.x])
        assert m.inputs[0].dtype == np.float32 and not m.inputs[0].quantized
        assert (m.delegate_nodes > 0) is (delegate == "xnnpack")
    np.testing.assert_allclose(got, tiny_models.y, atol=1e-5)


def test_built_int8_model_close_to_keras(tiny_models: TinyModels) -> None:  # noqa: F811
    with _load_built(tiny_models.int8_path) as m:
        (inp,), (out,) = m.inputs, m.outputs
        assert (inp.dtype, out.dtype) == (np.int8, np.int8) and inp.quantized and out.quantized
        got = np.concatenate([m.run(x[None])[0] for x in tiny_models.x])  # floats in, floats out
    # A few steps of the output's quantization, and the same winner on every sample.
    assert np.abs(got - tiny_models.y).max() <= 4 * out.scale
    assert (got.argmax(1) == tiny_models.y.argmax(1)).all()


def test_newer_op_version_is_actionable_model_error(tiny_models: TinyModels, tmp_path: Path) -> None:  # noqa: F811
    import struct

    from edgekit.runtimes.flatbuffer import FlatReader

    data = bytearray(tiny_models.int8_path.read_bytes())
    r = FlatReader(bytes(data), "x")
    pos = next(p for oc in r.tables(r.u32(0), 1) if (p := r.field_pos(oc, 2)))  # an OperatorCode.version
    struct.pack_into("<i", data, pos, 999)
    path = tmp_path / "future.tflite"
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"newer than this interpreter: (upgrade|install) .*ai-edge-litert"):
        load_model(path)


# --- the device side never imports TensorFlow -----------------------------------------------
def test_device_side_does_not_import_tensorflow() -> None:
    code = (
        "import sys, edgekit, edgekit.runtimes, edgekit.preprocess, edgekit.labels\n"
        "import edgekit.commands.info, edgekit.commands.bench, edgekit.commands.classify\n"
        "from edgekit.runtimes import resolve_backend, available_backends\n"
        "try:\n    resolve_backend()\nexcept Exception:\n    pass\n"
        "available_backends()\n"
        "bad = sorted(m for m in sys.modules if m == 'tensorflow' or m.startswith(('tensorflow.', 'keras')))\n"
        "print(bad)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != backends.ENV_VAR}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
