"""Flaw 2: the CLI's isolation choice reaches load_model as an argument, never through
os.environ; EDGEKIT_ISOLATE stays the user's override, read in one place."""

from __future__ import annotations

import os
from typing import Any

import pytest

import edgekit.runtimes.loader as loader_module
from edgekit.cli import main
from edgekit.runtimes.isolation import isolate_default
from tests.conftest import shared_model


@pytest.fixture()
def seen(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What each load_model call was given, and whether the environment carried the setting then."""
    calls: list[dict[str, Any]] = []
    real = loader_module.load_model

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append({"isolate": kwargs.get("isolate"), "env": os.environ.get("EDGEKIT_ISOLATE")})
        return real(*args, **kwargs)

    monkeypatch.delenv("EDGEKIT_ISOLATE", raising=False)
    monkeypatch.setattr(loader_module, "try_in_child", lambda *a, **k: [])
    monkeypatch.setattr("edgekit.tasks.load_model", spy)
    monkeypatch.setattr("edgekit.commands.detect.load_model", spy)  # detect loads the file once, then the task
    return calls


@pytest.mark.parametrize("env, expected", [(None, True), ("0", False), ("1", True), ("off", False)])
def test_cli_passes_isolation_as_an_argument(env: str | None, expected: bool, seen: list[dict[str, Any]],
                                             monkeypatch: pytest.MonkeyPatch, shared_models, shared_images,
                                             capsys) -> None:
    if env is not None:
        monkeypatch.setenv("EDGEKIT_ISOLATE", env)
    model = str(shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite"))
    assert main(["detect", "-m", model, "--source", str(shared_images / "grace_hopper.png"), "-q"]) == 0
    assert seen and seen[0] == {"isolate": expected, "env": env}  # the variable was never set for it


@pytest.mark.parametrize("env, default, expected", [
    (None, False, False), (None, True, True), ("1", False, True), ("yes", False, True),
    ("0", True, False), ("false", True, False), ("maybe", True, True),
])
def test_isolate_default_reads_the_override(env: str | None, default: bool, expected: bool,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    if env is None:
        monkeypatch.delenv("EDGEKIT_ISOLATE", raising=False)
    else:
        monkeypatch.setenv("EDGEKIT_ISOLATE", env)
    assert isolate_default(default) is expected
