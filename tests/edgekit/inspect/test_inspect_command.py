"""`edgekit inspect`: the real SSD model on a video made from a real photo, with events, metrics,
systemd notifications and a model folder that gets a new version (and a broken one) mid-run."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from edgekit.cli import main
from tests.conftest import shared_model
from tests.edgekit.inspect.conftest import kite_video

cv2 = pytest.importorskip("cv2")
text_string_to_metric_families = pytest.importorskip("prometheus_client.parser").text_string_to_metric_families

SSD = "ssd_mobilenet_v1_coco_quant.tflite"


@pytest.fixture
def video(tmp_path: Path, shared_images: Path) -> Path:
    return kite_video(tmp_path / "line.avi", shared_images, 60)


def deploy(root: Path, version: int, data: bytes) -> None:
    tmp = root / f".{version}.tmp"
    tmp.mkdir(parents=True)
    (tmp / "model.tflite").write_bytes(data)
    os.rename(tmp, root / str(version))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(tmp_path: Path, video: Path, models: Path, labels: Path, rules: str, metrics_port: int) -> Path:
    cfg = tmp_path / "cell.toml"
    cfg.write_text(f"""
device = "cell-9"
state_dir = "state"
[source]
path = "{video}"
[model]
dir = "{models}"
labels = "{labels}"
threshold = 0.4
poll_seconds = 0.1
[[zones]]
name = "sky"
polygon = [[0, 0], [640, 0], [640, 200], [0, 200]]
{rules}
[sinks.jsonl]
directory = "events"
[metrics]
port = {metrics_port}
""")
    return cfg


def read_events(tmp_path: Path) -> list[dict[str, Any]]:
    files = sorted((tmp_path / "events").glob("events-*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


@pytest.fixture
def models(tmp_path: Path, shared_models: Path) -> Path:
    root = tmp_path / "models" / "coco"
    deploy(root, 1, shared_model(shared_models, SSD).read_bytes())
    return root


PASSING = """
[[rules]]
label = "person"
min = 1
[[rules]]
zone = "sky"
label = "kite"
min = 1
"""


def test_hot_swap_mid_run_no_frame_lost(tmp_path: Path, shared_images: Path, models: Path, shared_models: Path,
                                        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Long enough that the switch, the refusal and the scrape all happen while it runs, on a fast machine too.
    frames = 200
    video = kite_video(tmp_path / "line.avi", shared_images, frames)
    notify = tmp_path / "notify.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify))
    listener.settimeout(0.2)
    monkeypatch.setenv("NOTIFY_SOCKET", str(notify))
    monkeypatch.setenv("WATCHDOG_USEC", "100000")
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    notes: list[str] = []
    done = threading.Event()

    def collect() -> None:
        while not done.is_set():
            try:
                notes.append(listener.recv(4096).decode())
            except socket.timeout:
                pass

    data = shared_model(shared_models, SSD).read_bytes()
    port = free_port()
    scraped: list[str] = []

    def deployer() -> None:
        # once the run is underway: a new version, then a broken one
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(e["kind"] == "inspection" for e in _safe(tmp_path)) < 5:
            time.sleep(0.02)
        deploy(models, 2, data)
        while time.monotonic() < deadline and not any(e["kind"] == "model_switch" and e["payload"]["version"] == 2
                                                      for e in _safe(tmp_path)):
            time.sleep(0.02)
        deploy(models, 3, data[: len(data) // 3])
        while time.monotonic() < deadline and not any(e["kind"] == "model_refused" for e in _safe(tmp_path)):
            time.sleep(0.02)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            scraped.append(resp.read().decode())  # while it runs

    threads = [threading.Thread(target=collect), threading.Thread(target=deployer)]
    for t in threads:
        t.start()
    cfg = write_config(tmp_path, video, models, shared_models / "coco_labels.txt", PASSING, port)
    try:
        assert main(["inspect", "--config", str(cfg), "--json"]) == 0
    finally:
        done.set()
        for t in threads:
            t.join()
        listener.close()

    events = read_events(tmp_path)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    inspections = [e for e in events if e["kind"] == "inspection"]
    assert [e["payload"]["frame"] for e in inspections] == list(range(frames)), "every frame of the file inspected"
    assert all(e["payload"]["verdict"] == "PASS" for e in inspections)
    versions = [e["model_version"] for e in inspections]
    assert versions[0] == "coco/1" and versions[-1] == "coco/2" and versions == sorted(versions)
    kinds = [(e["kind"], e["payload"].get("version") or e["payload"].get("state")) for e in events
             if e["kind"] != "inspection"]
    assert kinds == [("status", "starting"), ("model_switch", 1), ("model_switch", 2), ("model_refused", 3),
                     ("status", "stopped")]
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == frames and lines[0]["rules"][0]["count"] >= 1
    assert notes[0].startswith("READY=1") and "WATCHDOG=1" in notes and notes[-1] == "STOPPING=1"
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(scraped[0]) for s in f.samples}
    assert samples[("edgekit_frames_total", (("stage", "processed"),))] >= 5
    assert samples[("edgekit_inspections_total", (("result", "pass"),))] >= 5
    assert samples[("edgekit_model_switches_total", (("outcome", "refused"),))] == 1
    assert samples[("edgekit_inference_seconds_count", ())] >= 5
    assert any(name == "edgekit_model_info" and dict(labels)["version"] == "2" for name, labels in samples)


def _safe(tmp_path: Path) -> list[dict[str, Any]]:
    try:
        return read_events(tmp_path)
    except (ValueError, OSError):
        return []  # a line being written


def test_failing_rule_with_a_fixed_model_file(tmp_path: Path, video: Path, models: Path, shared_models: Path) -> None:
    rules = '[[rules]]\nlabel = "person"\nmax = 0\n'
    cfg = write_config(tmp_path, video, models, shared_models / "coco_labels.txt", rules, free_port())
    cfg.write_text(cfg.read_text().replace(f'dir = "{models}"', f'path = "{models / "1" / "model.tflite"}"'))
    assert main(["inspect", "--config", str(cfg), "--max-frames", "5", "-q"]) == 0
    inspections = [e for e in read_events(tmp_path) if e["kind"] == "inspection"]
    [rule] = inspections[-1]["payload"]["rules"]
    assert len(inspections) == 5 and inspections[-1]["payload"]["verdict"] == "FAIL"
    assert rule["count"] >= 2 and rule["rule"] == "count(person) in frame <= 0"
    assert re.fullmatch(r"model@[0-9a-f]{12}", inspections[0]["model_version"])


@pytest.mark.parametrize("rules, message", [
    ('[[rules]]\nlabel = "persn"\nmin = 1\n',
     "rules label 'persn' is not a label of the model. Did you mean 'person'?"),
    ('[[rules]]\nlabel = "person"\nmin = "1"\n', "rules[0].min: expected an integer >= 0"),
])
def test_config_errors_exit_2(tmp_path: Path, video: Path, models: Path, shared_models: Path, rules: str,
                              message: str, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, video, models, shared_models / "coco_labels.txt", rules, free_port())
    assert main(["inspect", "--config", str(cfg), "--max-frames", "1"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after the log lines, as in the journal
    assert last.startswith(f"edgekit inspect: error: {cfg}:") and message in last


def test_check(tmp_path: Path, video: Path, models: Path, shared_models: Path,
               capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, video, models, shared_models / "coco_labels.txt", PASSING, free_port())
    assert main(["inspect", "--config", str(cfg), "--check"]) == 0
    assert "config OK: 1 zone(s), 2 rule(s), continuous; model coco/1" in capsys.readouterr().out
    shutil.rmtree(models / "1")  # what the run refuses, the check refuses: tests/edgekit/inspect/test_check.py
    assert main(["inspect", "--config", str(cfg), "--check"]) == 2
    assert "has no version" in capsys.readouterr().err
