"""The Prometheus endpoint, scraped over HTTP and parsed with prometheus_client's own parser."""

from __future__ import annotations

import socket
import urllib.request
from typing import Any, Iterator

import pytest

from edgekit.errors import ConfigError
from edgekit.inspect.metrics import CellMetrics

parser = pytest.importorskip("prometheus_client.parser")


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out = {}
    for family in parser.text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items())))] = s.value
    return out


@pytest.fixture
def metrics() -> Iterator[CellMetrics]:
    m = CellMetrics(device="cell-7")
    m.serve(port=0)
    yield m
    m.close()


def test_scrape_after_a_run(metrics: CellMetrics) -> None:
    metrics.frame_counts(captured=10, processed=8, dropped=2)
    metrics.frame_counts(captured=25, processed=20, dropped=5)  # running totals: only the increase counts
    for ms in (4, 6, 30, 250):
        metrics.observe_inference(ms / 1000)
    metrics.observe_capture_to_result(0.045)
    for passed in (True, True, False):
        metrics.observe_verdict(passed)
    metrics.set_model("inspection", 2, path="/m/2/model.tflite", backend="ai_edge_litert", delegate="xnnpack")
    metrics.record_error("mqtt", "broker unreachable")
    metrics.set_queued("mqtt", 17)
    s = scrape(metrics.port)  # type: ignore[arg-type]

    assert s[("edgekit_frames_total", (("stage", "captured"),))] == 25
    assert s[("edgekit_frames_total", (("stage", "processed"),))] == 20
    assert s[("edgekit_frames_total", (("stage", "dropped"),))] == 5
    assert s[("edgekit_inference_seconds_count", ())] == 4
    assert s[("edgekit_inference_seconds_sum", ())] == pytest.approx(0.29)
    assert s[("edgekit_inference_seconds_bucket", (("le", "0.005"),))] == 1
    assert s[("edgekit_inference_seconds_bucket", (("le", "0.3"),))] == 4
    assert s[("edgekit_capture_to_result_seconds_count", ())] == 1
    assert s[("edgekit_inspections_total", (("result", "pass"),))] == 2
    assert s[("edgekit_inspections_total", (("result", "fail"),))] == 1
    model = [k for k in s if k[0] == "edgekit_model_info"]
    assert dict(model[0][1]) == {"name": "inspection", "version": "2", "path": "/m/2/model.tflite",
                                 "backend": "ai_edge_litert", "delegate": "xnnpack"}
    assert s[("edgekit_last_error_info", (("component", "mqtt"), ("message", "broker unreachable")))] == 1
    assert s[("edgekit_errors_total", (("component", "mqtt"),))] == 1
    assert s[("edgekit_events_queued", (("sink", "mqtt"),))] == 17
    assert s[("edgekit_device_info", (("device", "cell-7"),))] == 1


def test_zero_series_present_from_the_start(metrics: CellMetrics) -> None:
    s = scrape(metrics.port)  # type: ignore[arg-type]
    for stage in ("captured", "processed", "dropped"):
        assert s[("edgekit_frames_total", (("stage", stage),))] == 0
    assert s[("edgekit_inspections_total", (("result", "fail"),))] == 0


def test_bound_to_localhost_by_default(metrics: CellMetrics) -> None:
    assert metrics._server.server_address[0] == "127.0.0.1"  # type: ignore[union-attr]


def test_registries_are_private() -> None:
    a, b = CellMetrics(device="a"), CellMetrics(device="b")
    a.observe_verdict(True)
    assert 'edgekit_inspections_total{result="pass"} 1.0' in a.text()
    assert 'edgekit_inspections_total{result="pass"} 0.0' in b.text()


def test_port_taken_is_a_config_error(metrics: CellMetrics) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(ConfigError, match=r"cannot serve metrics on 127\.0\.0\.1"):
            CellMetrics().serve(port=s.getsockname()[1])
    with pytest.raises(ConfigError, match="already served"):
        metrics.serve(port=0)


def test_close_twice_and_stops_serving() -> None:
    m = CellMetrics()
    port = m.serve(port=0)
    m.close()
    m.close()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1)


def test_last_error_is_cut(metrics: CellMetrics) -> None:
    metrics.record_error("loop", "x" * 1000)
    s: dict[Any, float] = scrape(metrics.port)  # type: ignore[arg-type]
    [labels] = [dict(k[1]) for k in s if k[0] == "edgekit_last_error_info"]
    assert len(labels["message"]) == 200
