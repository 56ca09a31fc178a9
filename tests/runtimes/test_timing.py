"""Timing a loaded model as a library call (what `edgekit bench` prints per row and `edgekit demo` per model)."""

from __future__ import annotations

from pathlib import Path

from edgekit.runtimes import load_model
from edgekit.runtimes.timing import STATS, time_model
from tests.conftest import shared_model


def test_time_model_on_a_real_model(shared_models: Path) -> None:
    with load_model(shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite"), "auto", 1) as model:
        row = time_model(model, runs=8, warmup=2)
    assert row.error is None and row.threads == 1 and row.resolved_delegate == model.delegate.value
    lat = row.latency_ms or {}
    assert tuple(lat) == STATS and 0 < lat["min"] <= lat["p50"] <= lat["p99"]
    assert row.fps is not None and abs(row.fps - 1e3 / lat["mean"]) < 1e-6
    assert row.to_dict()["latency_ms"] == lat
