"""classify, detect and inspect try a model in a child process first; bench does not; main() leaves
the environment as it found it (it also runs inside `edgekit demo` and in user code)."""

from __future__ import annotations

import os

import pytest

import edgekit.runtimes.loader as loader_module
from edgekit.cli import main
from tests.conftest import shared_model


@pytest.fixture()
def probes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.delenv("EDGEKIT_ISOLATE", raising=False)
    monkeypatch.setattr(loader_module, "try_in_child", lambda path, *a, **k: calls.append(path) or [])
    return calls


@pytest.mark.parametrize("command, isolated", [("classify", True), ("bench", False)])
def test_isolation_default_per_command(command, isolated, probes, shared_models, shared_images, capsys) -> None:
    model = str(shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite"))
    argv = (["classify", "-m", model, "-k", "1", str(shared_images / "parrot.jpg")] if command == "classify"
            else ["bench", model, "--runs", "2", "--warmup", "0", "-q"])
    assert main(argv) == 0
    assert (probes == [model]) is isolated
    assert "EDGEKIT_ISOLATE" not in os.environ


def test_an_explicit_setting_wins(probes, monkeypatch, shared_models, shared_images, capsys) -> None:
    monkeypatch.setenv("EDGEKIT_ISOLATE", "0")
    model = str(shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite"))
    assert main(["classify", "-m", model, "-k", "1", str(shared_images / "parrot.jpg")]) == 0
    assert probes == []
    assert os.environ["EDGEKIT_ISOLATE"] == "0"
