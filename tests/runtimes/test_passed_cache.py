"""The isolation child runs once per model file: a clean pass is remembered by SHA-256 (stat as the
fast path) in the per-user cache; a changed file, another interpreter or delegate, or a failure is
tried again."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import edgekit.runtimes._probe as probe_module
from edgekit.runtimes import load_model
from edgekit.runtimes.passed import cache_file, has_passed, remember_passed

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture()
def children(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the children started (the real probe still runs)."""
    calls: list[int] = []
    real = probe_module.probe_model

    def counted(*a, **k):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(probe_module, "probe_model", counted)
    return calls


def test_a_model_that_passed_is_not_tried_again(passed_cache: Path, children: list[int], tmp_path: Path) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes((DATA / "mobilenet_v1_0.25_128_quant.tflite").read_bytes())
    for _ in range(3):
        with load_model(model, isolate=True):
            pass
    assert len(children) == 1 and cache_file() == passed_cache and passed_cache.exists()
    assert oct(passed_cache.parent.stat().st_mode & 0o777) == "0o700"
    doc = json.loads(passed_cache.read_text())
    assert len(doc["passed"]) == 1 and str(model) in doc["paths"]
    data = bytearray(model.read_bytes())  # another content: tried again
    data[-1] ^= 1
    model.write_bytes(bytes(data))
    with load_model(model, isolate=True):
        pass
    assert len(children) == 2
    copy = tmp_path / "copy.tflite"  # the same bytes elsewhere: known by their digest
    copy.write_bytes(bytes(data))
    with load_model(copy, isolate=True):
        pass
    assert len(children) == 2


def test_the_setting_and_the_switch(passed_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "m.tflite"
    model.write_bytes(b"x" * 100)
    remember_passed(str(model), model.read_bytes(), "ai_edge_litert 2.3.0", "xnnpack")
    assert has_passed(str(model), model.read_bytes(), "ai_edge_litert 2.3.0", "xnnpack")
    assert not has_passed(str(model), model.read_bytes(), "ai_edge_litert 2.3.0", "cpu")
    assert not has_passed(str(model), model.read_bytes(), "tflite_runtime 2.14.0", "xnnpack")
    os.utime(model, ns=(1, 1))  # a changed stat: the digest is computed again, and still matches
    assert has_passed(str(model), model.read_bytes(), "ai_edge_litert 2.3.0", "xnnpack")
    monkeypatch.setenv("EDGEKIT_ISOLATE_CACHE", "0")
    assert cache_file() is None and not has_passed(str(model), model.read_bytes(), "ai_edge_litert 2.3.0", "xnnpack")


def test_a_damaged_cache_is_ignored(passed_cache: Path, children: list[int]) -> None:
    passed_cache.parent.mkdir(parents=True)
    passed_cache.write_text("{not json")
    with load_model(DATA / "mobilenet_v1_0.25_128_quant.tflite", isolate=True):
        pass
    assert len(children) == 1 and json.loads(passed_cache.read_text())["passed"]
