"""`edgekit inspect` in per-part mode as a service runs it, with the quick demo's model on a belt it
has not seen: the MQTT broker goes down mid-run and comes back, then the process gets SIGTERM. Every
`part` event it wrote to its files reaches the plant's subscriber, once and in order."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.edgekit.sinks.test_mqtt import MOSQUITTO, Broker, Receiver, in_order_once

pytestmark = pytest.mark.skipif(MOSQUITTO is None, reason="mosquitto not installed: apt-get install -y mosquitto")


def _events(folder: Path) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.glob("events-*.jsonl")) for line in f.read_text().splitlines()]


def _part_events(folder: Path) -> list[dict]:
    return [e for e in _events(folder) if e["kind"] == "part"]


@pytest.mark.slow
def test_broker_outage_then_sigterm_loses_no_part_event(demo, tmp_path: Path) -> None:
    from edgekit.demo.conveyor import make_video

    out, _ = demo
    model = next(out.glob("detector_int8*.tflite"))
    make_video(tmp_path / "belt.avi", n_frames=300, fps=15.0, seed=7, speed=12.0)  # 20 s played in real time
    broker = Broker(tmp_path / "broker", persistence=True)
    broker.start()
    rx = Receiver(broker.port, "demo", persistent=True)
    text = (out / "inspection.toml").read_text()
    assert 'path = "belt.avi"' in text and "realtime = true" in text and "[parts]" in text
    text = text.replace('path = "belt.avi"', f'path = "{tmp_path / "belt.avi"}"').replace(
        'path = "detector_int8.tflite"', f'path = "{model}"')
    text += f"\n[sinks.mqtt]\nport = {broker.port}\nreconnect_min = 0.1\nreconnect_max = 1.0\n"
    (tmp_path / "inspection.toml").write_text(text)
    events = tmp_path / "events"
    proc = subprocess.Popen([sys.executable, "-m", "edgekit", "inspect", "-c", str(tmp_path / "inspection.toml"),
                             "--json"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 18  # before the video ends

    def parts_reach(n: int) -> int:
        while (have := len(_part_events(events))) < n and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        return have

    try:
        before = parts_reach(1)
        broker.stop()
        during = parts_reach(before + 2) - before  # judged while the broker is down
        broker.start()
        after = parts_reach(before + during + 1) - before - during
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        written = _events(events)
        rx.wait_for(written[-1]["seq"], timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        rx.close()
        broker.stop()
    assert proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "stopped by SIGTERM" in err
    assert before >= 1 and during >= 2 and after >= 1, (before, during, after, err[-2000:])
    kept, repeats = in_order_once(rx.events)  # raises on a gap or a reordering
    assert kept == [e["seq"] for e in written], "the subscriber has every event the files have, once, in order"
    assert repeats <= 10, "only events in flight when the broker stopped may come twice (QoS 1)"
    parts = [e["payload"]["part"] for e in written if e["kind"] == "part"]
    assert parts == list(range(1, len(parts) + 1)) and len(parts) >= before + during + after
    assert written[-1]["kind"] == "status" and written[-1]["payload"]["state"] == "stopped"
