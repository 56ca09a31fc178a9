"""Driven as an operator would: three `edgekit inspect` processes follow a channel over HTTP,
`edgekit release --mqtt` wakes them, `edgekit fleet status` shows what each runs, SIGTERM stops them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgekit.cli import main
from edgekit.fleet.release import write_release
from tests.conftest import shared_model
from tests.edgekit.fleet.conftest import Broker, Kit, kite_line, wait_until

cv2 = pytest.importorskip("cv2")
pytestmark = pytest.mark.slow


def fleet_status(broker: Broker, capsys: pytest.CaptureFixture[str]) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["fleet", "status", "--broker", f"127.0.0.1:{broker.port}", "--json", "--wait", "0.3"]) == 0
    return {r["device"]: r for r in json.loads(capsys.readouterr().out)}


def test_inspect_processes_follow_a_release_and_the_status_table_tells(
        kit: Kit, broker: Broker, tmp_path: Path, shared_models: Path, shared_images: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    video = kite_line(shared_images, tmp_path, (320, 213), 5, 300)
    ssd = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    folder = kit.www / "procs"
    write_release(ssd, 1, folder, kit.key, golden=tmp_path / "golden.npz")
    procs = {}
    for i in range(3):
        home = tmp_path / f"cell-{i}"
        home.mkdir()
        (home / "inspection.toml").write_text(kit.cell_toml(
            f"cell-{i}", video, "procs", broker.port, shared_models / "coco_labels.txt", fleet="poll_seconds = 3600\nhealth_baseline = 20",
            tail='[[rules]]\nlabel = "kite"\nmin = 1\n'))
        procs[f"cell-{i}"] = subprocess.Popen(
            [sys.executable, "-m", "edgekit", "inspect", "-c", str(home / "inspection.toml"), "-q"], cwd=home,
            env={**os.environ, "EDGEKIT_ISOLATE": "0"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: {n: r["running"] for n, r in fleet_status(broker, capsys).items()} == dict.fromkeys(procs, 1),
                   timeout=40, what="three cells serving version 1")
        t0 = time.monotonic()
        assert main(["release", str(ssd), "--version", "2", "--to", str(folder), "--key",
                     str(kit.root / "keys" / "signing.key"), "--golden", str(tmp_path / "golden.npz"),
                     "--mqtt", f"127.0.0.1:{broker.port}", "--topic", "edgekit/channel/procs"]) == 0
        wait_until(lambda: {n: r["running"] for n, r in fleet_status(broker, capsys).items()} == dict.fromkeys(procs, 2),
                   timeout=40, what="three cells serving version 2")
        assert time.monotonic() - t0 < 35  # woken by the notification: their own polls are an hour apart
        for name in procs:  # what each process says it runs is what its folder holds
            assert (tmp_path / name / "models" / "2" / "model.tflite").is_file()
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        errors = {n: p.communicate(timeout=30)[1].decode() for n, p in procs.items()}
    assert all(p.returncode == 0 for p in procs.values()), errors
    rows = fleet_status(broker, capsys)
    assert {n: (r["state"], r["running"]) for n, r in rows.items() if n in procs} == dict.fromkeys(procs, ("stopped", 2))
    for name in procs:
        state = json.loads((tmp_path / name / "state" / "fleet.json").read_text())
        assert state["running"] is False and state["rejected"] == {}
