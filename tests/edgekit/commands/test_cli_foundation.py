"""`edgekit info`, `bench` and `classify` end to end on real models and images."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from edgekit.cli import main
from edgekit.labels import NO_LABELS_NOTE
from tests.conftest import shared_model

ROOT = Path(__file__).resolve().parents[3]
V2 = "mobilenet_v2_1.0_224_quant.tflite"
SMALL = "mobilenet_v1_0.25_128_quant.tflite"
SSD = "ssd_mobilenet_v1_coco_quant.tflite"
EDGETPU = "mobilenet_v1_0.25_128_quant_edgetpu.tflite"


def _cli(*argv: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("EDGEKIT_DEBUG", "EDGEKIT_BACKEND")}
    return subprocess.run([sys.executable, "-m", "edgekit", *map(str, argv)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def _run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- info ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "edgetpu", "ops", "delegate"), [
    (SSD, False, {"CONV_2D": 34, "DEPTHWISE_CONV_2D": 13}, "xnnpack"),
    (V2, False, {"CONV_2D": 36}, "xnnpack"),
    (EDGETPU, True, {"edgetpu-custom-op": 1}, "edgetpu"),
])
def test_info_json(capsys: pytest.CaptureFixture[str], shared_models: Path, name: str, edgetpu: bool,
                   ops: dict[str, int], delegate: str) -> None:
    path = shared_model(shared_models, name)
    code, out, _ = _run(capsys, "info", path, "--json")
    d = json.loads(out)
    assert code == 0
    assert {"size_bytes", "inputs", "outputs", "ops", "edgetpu_compiled", "custom_ops", "metadata",
            "other_metadata", "backend", "delegate"} <= set(d)
    assert d["size_bytes"] == path.stat().st_size
    assert d["edgetpu_compiled"] is edgetpu and d["delegate"] == delegate
    assert {k: d["ops"][k] for k in ops} == ops
    assert d["backend"] in ("ai_edge_litert", "tflite_runtime", "tensorflow")
    for spec in d["inputs"] + d["outputs"]:
        assert {"name", "shape", "dtype", "scale", "zero_point"} <= set(spec)
    assert d["inputs"][0]["dtype"] == "uint8" and d["inputs"][0]["scale"] > 0


def test_info_table(capsys: pytest.CaptureFixture[str], shared_models: Path) -> None:
    code, out, _ = _run(capsys, "info", shared_model(shared_models, SSD))
    assert code == 0
    lines = out.splitlines()
    assert any(line.split()[:2] == ["CONV_2D", "34"] for line in lines)
    assert any("normalized_input_image_tensor" in line and "1x300x300x3" in line and "uint8" in line
               for line in lines)
    assert "TFLite_Detection_PostProcess" in out and "edge tpu      no" in out


# --- bench ---------------------------------------------------------------------------------
def test_bench_json_rows(capsys: pytest.CaptureFixture[str], shared_models: Path) -> None:
    code, out, err = _run(capsys, "bench", shared_model(shared_models, SMALL), "--runs", 3, "--warmup", 1,
                          "--threads", "1,2", "--delegate", "cpu,xnnpack,edgetpu", "--json")
    rows = json.loads(out)
    assert code == 0
    assert [(r["delegate"], r["threads"]) for r in rows] == [
        (d, t) for d in ("cpu", "xnnpack", "edgetpu") for t in (1, 2)]
    for r in rows[:4]:
        assert r["error"] is None
        lat = r["latency_ms"]
        assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"]
        assert lat["min"] <= lat["mean"] and r["fps"] == pytest.approx(1000 / lat["mean"])
        assert r["init_ms"] > 0 and r["backend"]
    assert rows[0]["delegate_nodes"] == 0
    for r in rows[4:]:
        assert "libedgetpu" in r["error"] and r["latency_ms"] is None
    assert err.count("edgekit bench: error: delegate edgetpu") == 1  # once, not per thread count


def test_bench_table_and_failure_exit(capsys: pytest.CaptureFixture[str], shared_models: Path) -> None:
    code, out, _ = _run(capsys, "bench", shared_model(shared_models, SMALL), "--runs", 3, "--warmup", 1)
    assert code == 0
    header = out.splitlines()[2].split()
    assert header[:3] == ["delegate", "threads", "backend"] and header[-1] == "fps"
    code, out, err = _run(capsys, "bench", shared_model(shared_models, SMALL), "--runs", 3, "--delegate", "edgetpu")
    assert code == 2 and "libedgetpu" in err


# --- classify --------------------------------------------------------------------------------
def _classify_json(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, list[dict[str, Any]], str]:
    code, out, err = _run(capsys, "classify", *argv, "--json")
    return code, [json.loads(line) for line in out.splitlines()], err


def test_classify_json_real_images(capsys: pytest.CaptureFixture[str], shared_models: Path,
                                   shared_images: Path) -> None:
    images = [shared_images / "grace_hopper.png", shared_images / "parrot.jpg"]
    code, rows, _ = _classify_json(capsys, "-m", shared_model(shared_models, V2),
                                   "--labels", shared_models / "imagenet_labels.txt", "-k", 3, *images)
    assert code == 0
    assert [r["image"] for r in rows] == [str(p) for p in images]
    assert [(r["classes"][0]["id"], r["classes"][0]["label"]) for r in rows] == [
        (653, "military uniform"), (89, "macaw")]
    assert rows[0]["classes"][0]["score"] == pytest.approx(0.92, abs=0.05)
    scores = [c["score"] for c in rows[1]["classes"]]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(("labels", "expected_label"), [
    ("imagenet_labels.txt", "military uniform"),  # 1001 lines, "background" first
    ("without_background", "military uniform"),  # 1000 lines: aligned transparently
    (None, "military uniform"),  # no --labels: the file's own (its TFLite metadata's imagenet_labels.txt)
])
def test_classify_labels_alignment(capsys: pytest.CaptureFixture[str], tmp_path: Path, shared_models: Path,
                                   shared_images: Path, labels: str | None, expected_label: str) -> None:
    args: list[Any] = ["-m", shared_model(shared_models, V2), "-k", 1]
    if labels == "without_background":
        lines = (shared_models / "imagenet_labels.txt").read_text().splitlines()[1:]
        (tmp_path / "l.txt").write_text("\n".join(lines) + "\n")
        args += ["--labels", tmp_path / "l.txt"]
    elif labels:
        args += ["--labels", shared_models / labels]
    code, rows, err = _classify_json(capsys, *args, shared_images / "grace_hopper.png")
    notes = [ln for ln in err.splitlines() if "note" in ln]
    assert code == 0 and notes == []  # each row has labels: given, aligned, or the file's own
    assert rows[0]["classes"] == [{"id": 653, "label": expected_label, "score": rows[0]["classes"][0]["score"]}]


def test_classify_threshold_and_text_output(capsys: pytest.CaptureFixture[str], shared_models: Path,
                                            shared_images: Path) -> None:
    code, rows, _ = _classify_json(capsys, "-m", shared_model(shared_models, V2), "-t", 0.5, "-k", 5,
                                   shared_images / "parrot.jpg")
    assert code == 0 and [c["id"] for c in rows[0]["classes"]] == [89]
    code, out, _ = _run(capsys, "classify", "-m", shared_model(shared_models, V2), "--labels",
                        shared_models / "imagenet_labels.txt", "-k", 2, shared_images / "parrot.jpg")
    assert code == 0
    assert out.splitlines()[0].endswith("parrot.jpg") and out.splitlines()[1].split()[1:] == ["89", "macaw"]


def test_classify_bad_image_among_good(capsys: pytest.CaptureFixture[str], tmp_path: Path, shared_models: Path,
                                       shared_images: Path) -> None:
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    images = [shared_images / "cat.png", broken, tmp_path / "missing.png", shared_images / "parrot.jpg"]
    code, rows, err = _classify_json(capsys, "-m", shared_model(shared_models, SMALL), *images)
    assert code == 2
    assert [r["image"] for r in rows] == [str(images[0]), str(images[3])]  # the rest still ran
    lines = [ln for ln in err.strip().splitlines() if ln != "edgekit classify: note: " + NO_LABELS_NOTE]
    assert len(lines) == 2 and all(line.startswith("edgekit classify: error: ") for line in lines)
    assert "broken.jpg" in lines[0] and "does not exist" in lines[1]


@pytest.mark.parametrize(("name", "fragment"), [
    (EDGETPU, "libedgetpu"),
    (SSD, "`edgekit detect`"),
])
def test_classify_refuses_models_it_cannot_run(capsys: pytest.CaptureFixture[str], shared_models: Path,
                                               shared_images: Path, name: str, fragment: str) -> None:
    code, out, err = _run(capsys, "classify", "-m", shared_model(shared_models, name), shared_images / "cat.png")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and fragment in err


# --- bad input: exit 2, one line, no traceback -------------------------------------------------
def _file(name: str, data: bytes) -> Any:
    def make(folder: Path) -> Path:
        (folder / name).write_bytes(data)
        return folder / name
    return make


BAD_MODELS = [
    pytest.param(lambda d: d / "missing.tflite", "does not exist", id="missing"),
    pytest.param(_file("empty.tflite", b""), "is empty", id="empty"),
    pytest.param(lambda d: d, "is a directory", id="directory"),
    pytest.param(_file("img.tflite", b"\x89PNG\r\n\x1a\n" + bytes(40)), "a PNG image", id="png"),
]


@pytest.mark.parametrize("command", ["info", "bench", "classify"])
@pytest.mark.parametrize(("make", "fragment"), BAD_MODELS)
def test_bad_model_file(capfd: pytest.CaptureFixture[str], tmp_path: Path, command: str, make: Any,
                        fragment: str) -> None:
    path = make(tmp_path)
    argv = {"info": ["info", path], "bench": ["bench", path, "--runs", 1],
            "classify": ["classify", "-m", path, "x.jpg"]}[command]
    code = main([str(a) for a in argv])
    out, err = capfd.readouterr()
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"edgekit {command}: error: ") and fragment in err


@pytest.mark.parametrize("command", ["info", "bench", "classify"])
def test_bad_model_in_subprocess_has_no_traceback(tmp_path: Path, command: str) -> None:
    path = tmp_path / "truncated.tflite"
    path.write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(100))
    argv = {"info": ["info", path], "bench": ["bench", path], "classify": ["classify", "-m", path, "a.jpg"]}
    result = _cli(*argv[command])
    assert result.returncode == 2 and result.stdout == ""
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "corrupt or truncated" in result.stderr


@pytest.mark.parametrize(("argv", "hint"), [
    (["clasify", "-m", "m.tflite", "a.jpg"], "Did you mean 'classify'?"),
    (["ifno", "m.tflite"], "Did you mean 'info'?"),
    (["bench", "m.tflite", "--delegate", "xnnpak"], "Did you mean 'xnnpack'?"),
    (["bench", "m.tflite", "--delegate", "cpu,edgtpu"], "Did you mean 'edgetpu'?"),
    (["classify", "-m", "m.tflite", "--delegate", "edge", "a.jpg"], "Did you mean 'edgetpu'?"),
])
def test_misspelt_names_get_did_you_mean(capsys: pytest.CaptureFixture[str], argv: list[str], hint: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert hint in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "fragment"), [
    (["bench", "m.tflite", "--threads", "1,0"], "at least 1"),
    (["bench", "m.tflite", "--runs", "many"], "expected a whole number"),
    (["bench", "m.tflite", "--delegate", "edgetpu:usb:x"], "unknown Edge TPU device"),
    (["classify", "-m", "m.tflite", "-k", "0", "a.jpg"], "at least 1"),
    (["classify", "-m", "m.tflite"], "IMAGE"),
])
def test_bad_flags(capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2 and fragment in capsys.readouterr().err


def test_classify_end_to_end_in_subprocess(shared_models: Path, shared_images: Path) -> None:
    result = _cli("classify", "-m", shared_model(shared_models, V2), "--labels", shared_models / "imagenet_labels.txt",
                  "--json", "-k", 1, shared_images / "parrot.jpg")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["classes"][0]["label"] == "macaw"
    assert "INFO:" not in result.stderr  # the interpreter's start-up chatter is filtered


# --- a model carrying edgekit metadata ---------------------------------------------------------
@pytest.fixture(scope="module")
def model_with_metadata(shared_models: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("flatbuffers", reason="writing metadata needs flatbuffers (comes with ai-edge-litert)")
    from edgekit.errors import ConversionError

    try:
        from edgekit.converters.metadata_writer import write_metadata
        doc = {"edgekit_version": "0.1.0", "task": "classify", "output_format": "classes",
               "labels": [f"class-{i}" for i in range(1001)],
               "preprocessing": {"input_size": [128, 128], "resize": "stretch", "color": "RGB",
                                 "mean": [127.5] * 3, "std": [127.5] * 3}}
        data = write_metadata(shared_model(shared_models, SMALL).read_bytes(), doc)
    except (ImportError, ConversionError) as exc:
        pytest.skip(f"cannot write metadata here: {exc}")
    path = tmp_path_factory.mktemp("meta") / "small_with_metadata.tflite"
    path.write_bytes(data)
    return path


def test_info_shows_edgekit_metadata(capsys: pytest.CaptureFixture[str], model_with_metadata: Path) -> None:
    code, out, _ = _run(capsys, "info", model_with_metadata, "--json")
    meta = json.loads(out)["metadata"]
    assert code == 0 and meta["task"] == "classify" and len(meta["labels"]) == 1001
    code, out, _ = _run(capsys, "info", model_with_metadata)
    line = next(x for x in out.splitlines() if x.startswith("edgekit meta"))
    assert "task=classify" in line and "1001 labels" in line and "mean=[127.5, 127.5, 127.5]" in line


def test_classify_uses_metadata_labels_and_normalization(capsys: pytest.CaptureFixture[str],
                                                         model_with_metadata: Path, shared_models: Path,
                                                         shared_images: Path) -> None:
    image = shared_images / "cat.png"
    _, plain, _ = _classify_json(capsys, "-m", shared_model(shared_models, SMALL), "-k", 3, image)
    code, meta, _ = _classify_json(capsys, "-m", model_with_metadata, "-k", 3, image)
    assert code == 0
    # (pixel - 127.5) / 127.5 quantized with scale 1/128, zero point 128 is the pixel within one step,
    # so the metadata path finds the same classes, now with the model's own labels.
    assert [c["id"] for c in meta[0]["classes"]] == [c["id"] for c in plain[0]["classes"]]
    assert [c["label"] for c in meta[0]["classes"]] == [f"class-{c['id']}" for c in plain[0]["classes"]]
    code, override, _ = _classify_json(capsys, "-m", model_with_metadata, "--labels",
                                       shared_models / "imagenet_labels.txt", "-k", 1, image)
    assert override[0]["classes"][0]["label"] != f"class-{override[0]['classes'][0]['id']}"


def test_info_never_creates_an_interpreter(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                           shared_models: Path) -> None:
    from edgekit.runtimes import backends

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("info created an interpreter")

    monkeypatch.setattr(backends.Backend, "make_interpreter", refuse)
    code, out, _ = _run(capsys, "info", shared_model(shared_models, EDGETPU), "--json")
    assert code == 0 and json.loads(out)["edgetpu_compiled"] is True


class _SlowFirstModel:
    """Just what bench_one touches: the first invoke is slow, like an Edge TPU loading its model."""

    def __init__(self) -> None:
        import numpy as np

        from edgekit.runtimes import Delegate, TensorSpec

        self.inputs = (TensorSpec("x", 0, (1, 4), np.dtype(np.int8), 0.1, 0),)
        self.buffer = np.zeros((1, 4), np.int8)
        self.calls = 0
        self.notes: list[str] = []
        self.delegate, self.edgetpu_device, self.num_threads = Delegate.EDGETPU, None, 1
        self.backend, self.delegate_nodes, self.init_ms = "fake 0", 1, 1.0

    def input_view(self, i: int) -> Any:
        return self.buffer

    def invoke(self) -> None:
        import time

        self.calls += 1
        if self.calls == 1:
            time.sleep(0.05)


def test_bench_notes_a_slow_first_inference() -> None:
    import numpy as np

    from edgekit.commands._common import progress
    from edgekit.commands.bench import bench_one

    fake = _SlowFirstModel()
    row = bench_one(fake, "edgetpu", runs=20, warmup=3, bar=progress(0, "", quiet=True),  # type: ignore[arg-type]
                    rng=np.random.default_rng(0))
    assert fake.calls == 1 + 2 + 20  # first, the rest of the warm-up, the timed runs
    assert row.first_ms >= 50 and row.latency_ms["p50"] < 5
    assert any("first inference took" in n and "Edge TPU" in n for n in row.notes)
    assert fake.buffer.any()  # random input was written through the view
