"""The isolation child (runtimes/_probe.py): it imports the edgekit its parent imported, whatever the
current directory holds, and a child that cannot start is the environment's fault, never the model's."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

import edgekit.runtimes._probe as probe_mod
from edgekit.errors import ModelError, SetupError
from edgekit.runtimes import load_model
from tests.conftest import shared_model

STARTED = json.dumps({"started": True})


def _done(returncode: int, *lines: str, stderr: str = "") -> subprocess.CompletedProcess[bytes]:
    return subprocess.CompletedProcess([], returncode, "\n".join(lines).encode(), stderr.encode())


def test_a_crash_is_reported_with_the_step_it_happened_in() -> None:
    at = [json.dumps({"at": s}) for s in ("create", "invoke")]
    result = probe_mod._read_result(_done(-signal.SIGSEGV, STARTED, *at), 1.0)
    assert (result.crashed, result.crashed_at, result.error) == (True, "invoke", "killed by SIGSEGV")


def test_an_interpreter_crash_on_a_checked_file_is_the_interpreters_on_this_machine() -> None:
    """Not "corrupt or malicious": the backend, its version, the machine and the signal."""
    import platform

    from edgekit.runtimes.backends import resolve_backend
    from edgekit.runtimes.delegates import Delegate
    from edgekit.runtimes.isolation import _crash_message

    be = resolve_backend()
    text = _crash_message("m.tflite", be, Delegate.XNNPACK, "killed by SIGSEGV", "create")
    assert f"{be.name} {be.version} on {platform.machine()}" in text and "killed by SIGSEGV" in text
    assert "while creating the interpreter" in text and "structural checks" in text
    assert "--delegate cpu" in text and "malicious" not in text


@pytest.mark.parametrize("proc, stage, crashed", [
    (_done(0, STARTED, '{"ok": true}'), "", False),
    (_done(0, STARTED, '{"ok": false, "stage": "create", "error": "ValueError: bad"}'), "create", False),
    (_done(0, STARTED, '{"ok": false, "stage": "invoke", "error": "RuntimeError: x"}'), "invoke", False),
    (_done(-signal.SIGSEGV, STARTED), "", True),  # the interpreter crashed on the model
    (_done(1, STARTED, stderr="MemoryError"), "", True),  # died without a verdict after starting
    (_done(0, '{"ok": false, "stage": "start", "error": "ModuleNotFoundError: edgekit.runtimes"}'), "start", False),
    (_done(1, stderr="No module named 'edgekit.runtimes'"), "start", False),  # never got as far as the model
    (_done(-signal.SIGILL), "start", False),  # e.g. numpy built for a newer CPU
])
def test_what_the_child_reported(proc: subprocess.CompletedProcess[bytes], stage: str, crashed: bool) -> None:
    result = probe_mod._read_result(proc, 1.0)
    assert (result.stage, result.crashed) == (stage, crashed)
    assert result.ok is (proc.returncode == 0 and stage == "" and not crashed)


@pytest.fixture()
def shadowing_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An edgekit/ that cannot be imported, first on the path the child is given."""
    (tmp_path / "edgekit").mkdir()
    (tmp_path / "edgekit" / "__init__.py").write_text("raise ImportError('this edgekit is broken')")
    real = probe_mod._import_path
    monkeypatch.setattr(probe_mod, "_import_path", lambda: [str(tmp_path), *real()])
    return tmp_path


def test_a_child_that_cannot_import_edgekit_is_a_setup_error_not_a_bad_model(
        shared_models: Path, shadowing_checkout: Path) -> None:
    path = shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite")
    probe_mod._passed.clear()
    with pytest.raises(SetupError, match=r"could not start \(ImportError: this edgekit is broken\).*not of the model"):
        load_model(path, isolate=True)
    assert not issubclass(SetupError, ModelError) and probe_mod._passed == {}  # tried again next time


def test_the_child_ignores_the_current_directory(shared_models: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from a folder holding an edgekit/ that is not the one imported here (a clone, for a regular
    install): the child must not import it (see tests/test_packaging.py for the installed wheel)."""
    (tmp_path / "edgekit").mkdir()
    (tmp_path / "edgekit" / "__init__.py").write_text("raise ImportError('the checkout was imported')")
    monkeypatch.chdir(tmp_path)
    path = shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite")
    probe_mod._passed.clear()
    with load_model(path, isolate=True) as model:
        assert model.outputs[0].shape == (1, 1001)
