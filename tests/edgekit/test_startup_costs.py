"""What start-up no longer pays for (issue 26): the contract's names load with their module, the
gray-frame value check runs once per file that passed isolation, a run's percentiles need
no numpy.ma, and `edgekit classify` / `detect` on one image load nothing one image has no use for.
Each saving keeps the behaviour it replaces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import edgekit.contract
import edgekit.contract.readings as readings
from edgekit.loop import SampleWindow
from edgekit.runtimes.passed import check_passed, remember_check, remember_passed
from edgekit.tasks import Classifier, ClassifierOptions, Detector, DetectorOptions

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SMALL = DATA / "mobilenet_v1_0.25_128_quant.tflite"
SSD = DATA / "ssd_mobilenet_v1_coco_quant.tflite"


def _loaded(statement: str, names: tuple[str, ...]) -> list[str]:
    code = f"import json, sys; {statement}; print(json.dumps([m for m in {list(names)!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("statement, loaded", [
    ("import edgekit.contract", []),
    ("from edgekit.contract import Normalization, ResizeMode", []),
    # a decoder is built from the model's reading (edgekit.contract.modelreading), which every model load
    # makes: the readings come with it, the anchor presets still do not
    ("from edgekit.contract import make_decoder", ["edgekit.contract.readings"]),
    ("from edgekit.contract import read_outputs", ["edgekit.contract.readings"]),
    ("from edgekit.contract import map50", ["edgekit.contract.metrics"]),
])
def test_contract_names_load_with_their_module(statement: str, loaded: list[str]) -> None:
    names = ("edgekit.contract.readings", "edgekit.contract.anchors", "edgekit.contract.metrics")
    assert _loaded(statement, names) == loaded


def test_every_contract_name_resolves_and_unknown_ones_raise() -> None:
    assert set(edgekit.contract.__all__) == set(edgekit.contract._EXPORTS)  # noqa: SLF001
    for name in edgekit.contract.__all__:
        value = getattr(edgekit.contract, name)
        assert getattr(sys.modules[edgekit.contract._EXPORTS[name]], name) is value  # noqa: SLF001
    assert "make_decoder" in dir(edgekit.contract)
    with pytest.raises(AttributeError, match="no attribute 'make_decodr'"):
        edgekit.contract.make_decodr  # noqa: B018


def test_a_classifier_reads_its_model_without_the_anchor_presets() -> None:
    code = (f"from edgekit.tasks import Classifier, ClassifierOptions; "
            f"Classifier(ClassifierOptions(model={str(SMALL)!r})).close()")
    assert _loaded(code, ("edgekit.contract.anchors", "numpy.ma")) == []


@pytest.mark.parametrize("values", [[5.0], [1.0, 2.0], [3.0, 1.0, 2.0, 10.0], list(np.linspace(0.1, 97.3, 101)),
                                    list(np.random.default_rng(7).exponential(12.0, 999))])
@pytest.mark.parametrize("q", [0, 1, 25, 50, 90, 99, 99.9, 100])
def test_percentiles_are_numpys(values: list[float], q: float) -> None:
    window = SampleWindow(capacity=len(values) + 3)
    for v in values:
        window.add(v)
    assert window.percentile(q) == float(np.percentile(np.array(values), q))


def test_percentiles_of_a_full_window_and_of_none() -> None:
    window = SampleWindow(capacity=4)
    for v in (9.0, 1.0, 2.0, 3.0, 4.0, 100.0):  # a ring: 4 and 100 overwrite 9 and 1
        window.add(v)
    assert window.percentile(50) == float(np.percentile([4.0, 100.0, 2.0, 3.0], 50)) == 3.5
    assert np.isnan(SampleWindow().percentile(50))


@pytest.fixture()
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The formats the gray-frame check looked at (the real check still runs)."""
    seen: list[str] = []
    real = readings.implausible

    def counted(fmt, outputs, **kw):  # type: ignore[no-untyped-def]
        seen.append(fmt.value)
        return real(fmt, outputs, **kw)

    monkeypatch.setattr(readings, "implausible", counted)
    return seen


@pytest.mark.parametrize("task, options", [(Detector, DetectorOptions), (Classifier, ClassifierOptions)])
def test_the_value_check_runs_once_per_file_that_passed_isolation(passed_cache: Path, checks: list[str], tmp_path: Path,
                                                                 task, options) -> None:  # type: ignore[no-untyped-def]
    model = tmp_path / "m.tflite"
    model.write_bytes((SSD if task is Detector else SMALL).read_bytes())
    for _ in range(3):
        task(options(model=model, isolate=True, warmup=0)).close()
    assert len(checks) == 1
    settings = next(iter(json.loads(passed_cache.read_text())["passed"].values()))
    assert any(s.startswith(f"values|{checks[0]}|") for s in settings)
    task(options(model=model, isolate=True, warmup=0, resize="letterbox")).close()  # other preprocessing: checked
    assert len(checks) == 2
    data = bytearray(model.read_bytes())  # other bytes: isolated and checked again
    data[-1] ^= 1
    model.write_bytes(bytes(data))
    task(options(model=model, isolate=True, warmup=0)).close()
    assert len(checks) == 3


def test_without_isolation_or_a_cache_the_check_runs_every_time(passed_cache: Path, checks: list[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for _ in range(2):
        Classifier(ClassifierOptions(model=SMALL, isolate=False)).close()
    assert len(checks) == 2 and not passed_cache.exists()  # a path whose digest is unknown is not hashed for it
    monkeypatch.setenv("EDGEKIT_ISOLATE_CACHE", "0")
    for _ in range(2):
        Classifier(ClassifierOptions(model=SMALL, isolate=True)).close()
    assert len(checks) == 4


def test_a_check_is_remembered_only_for_a_path_known_by_its_stat(passed_cache: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(b"x" * 100)
    remember_check(str(model), "values|ssd")  # never isolated here: nothing known, nothing written
    assert not check_passed(str(model), "values|ssd") and not passed_cache.exists()
    remember_passed(str(model), model.read_bytes(), "ai_edge_litert 2.3.0", "xnnpack")
    remember_check(str(model), "values|ssd")
    assert check_passed(str(model), "values|ssd") and not check_passed(str(model), "values|yolo")
    os.utime(model, ns=(1, 1))  # a changed stat: not known without hashing, so checked again
    assert not check_passed(str(model), "values|ssd")


def test_the_same_bytes_are_parsed_once_and_other_bytes_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import edgekit.runtimes.validate as validate

    parsed: list[int] = []
    real = validate.parse_tflite
    monkeypatch.setattr(validate, "parse_tflite", lambda data, label: parsed.append(len(data)) or real(data, label))
    monkeypatch.setattr(validate, "_LAST", [])
    model = tmp_path / "m.tflite"
    model.write_bytes(SMALL.read_bytes())
    first = validate.validate_model_file(model)
    assert validate.validate_model_file(model)[1] is first[1] and len(parsed) == 1  # `detect` asks twice
    data = bytearray(model.read_bytes())  # the same size, one byte changed: parsed again
    data[-1] ^= 1
    model.write_bytes(bytes(data))
    validate.validate_model_file(model)
    assert len(parsed) == 2
    monkeypatch.setattr(validate, "_KEEP_BYTES", 1000)  # a file larger than that is not kept after it
    monkeypatch.setattr(validate, "_LAST", [])
    validate.validate_model_file(model)
    validate.validate_model_file(model)
    assert len(parsed) == 4 and validate._LAST == []  # noqa: SLF001


# What a classify or a detect of one photo has no use for: the loop's outputs, tracking, the cell, the
# fleet, the demo, the converters, drawing, the other tasks' results and decoders, and the stdlib modules
# only an error, a terminal's width or a package's version would need.
NEVER_FOR_ONE_IMAGE = ("edgekit.sinks", "edgekit.track", "edgekit.inspect", "edgekit.fleet", "edgekit.demo",
                       "edgekit.converters", "edgekit.drawing", "edgekit.video", "edgekit.tasks_vision",
                       "edgekit.contract.anchors", "edgekit.contract.metrics", "edgekit.results.masks",
                       "edgekit.results.poses", "edgekit.commands.inspect", "tensorflow", "importlib.metadata",
                       "difflib")
NOT_FOR_CLASSIFY = ("edgekit.loop", "edgekit.sources", "edgekit.results.frame", "edgekit.commands.detect", "signal",
                    "glob")


def _modules_of_a_run(argv: list[str]) -> list[str]:
    """The modules loaded (by this process, not the isolation child) once `edgekit ARGV` ran."""
    code = ("import json, sys; from edgekit.cli import main; code = main(sys.argv[1:]); "
            "print(json.dumps([code, sorted(sys.modules)]))")
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    code, modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert code == 0, out.stderr
    return modules


def _loaded_of(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_classify_of_one_image_loads_only_what_it_uses(passed_cache: Path) -> None:
    argv = ["classify", "-m", str(SMALL), str(DATA / "grace_hopper.png")]
    first = _modules_of_a_run(argv)  # the isolation child runs (through subprocess, which needs signal)
    assert {"edgekit.commands.classify", "edgekit.tasks", "edgekit.results.detections"} <= set(first)
    assert _loaded_of(first, NEVER_FOR_ONE_IMAGE + NOT_FOR_CLASSIFY[:-2]) == []
    later = _modules_of_a_run(argv)  # the file passed here: no child
    assert _loaded_of(later, NEVER_FOR_ONE_IMAGE + NOT_FOR_CLASSIFY) == []


# What a later detect of one photo (no isolation child) has no use for either: the standard modules that
# only start a child process or find a library file (ctypes.util runs `ldconfig -p` in a child).
# The TFLite Support metadata reader loads for a file that carries that metadata (the SSD has none).
# statistics (with random and bisect) only paces a live source.
NOT_FOR_A_LATER_DETECT = ("ctypes.util", "subprocess", "shutil", "tempfile", "edgekit.runtimes.support_metadata",
                          "statistics", "random")


def test_detect_on_one_image_loads_no_sink_it_was_not_asked_for(passed_cache: Path) -> None:
    argv = ["detect", "-m", str(SSD), "--source", str(DATA / "grace_hopper.png"), "-q"]
    first = _modules_of_a_run(argv)  # the isolation child runs
    assert {"edgekit.commands.detect", "edgekit.loop", "edgekit.sources"} <= set(first)
    assert _loaded_of(first, NEVER_FOR_ONE_IMAGE) == []
    later = _modules_of_a_run(argv)  # the file passed here: no child
    assert _loaded_of(later, NEVER_FOR_ONE_IMAGE + NOT_FOR_A_LATER_DETECT) == []


def test_the_console_script_freezes_what_its_imports_made_and_the_library_never_does() -> None:
    """edgekit._entry turns the collector off while the command loads and freezes what the imports made
    (gc.freeze): the collector is on again for the run. edgekit.cli.main called from other code leaves
    the process's collector alone."""
    import gc

    from edgekit import cli

    code = ("import gc, json, sys; from edgekit._entry import main; sys.argv[0] = 'edgekit'; code = main(); "
            "print(json.dumps([code, gc.isenabled(), gc.get_freeze_count()]))")
    argv = ["detect", "-m", str(SSD), "--source", str(DATA / "grace_hopper.png"), "-q"]
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT), "EDGEKIT_ISOLATE": "0"})
    assert out.returncode == 0, out.stderr
    status, enabled, frozen = json.loads(out.stdout.strip().splitlines()[-1])
    assert status == 0 and enabled and frozen > 10_000  # numpy's, OpenCV's and edgekit's modules and classes
    before = gc.get_freeze_count()
    assert cli.main(["info", str(SMALL)]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == before
