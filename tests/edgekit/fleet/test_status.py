"""Fleet status over a real Mosquitto broker: devices woken by `edgekit release --mqtt`, the
`edgekit fleet status` table compared with what each device runs, an inspection cell following a
channel (its events and edgekit_model_info), and no key material in logs, status or events."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from edgekit.cli import main
from edgekit.fleet.release import write_release
from edgekit.fleet.status import StatusPublisher
from tests.conftest import shared_model
from tests.edgekit.fleet.conftest import Broker, Device, Kit, free_port, kite_line, wait_until

mqtt = pytest.importorskip("paho.mqtt.client")


def listen(broker: Broker, topic: str, into: list[tuple[str, bytes]]) -> Any:
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"listener-{time.monotonic_ns()}")
    ready = threading.Event()
    c.on_message = lambda cl, u, m: into.append((m.topic, bytes(m.payload)))
    c.on_subscribe = lambda *a: ready.set()
    c.connect("127.0.0.1", broker.port)
    c.subscribe(topic, qos=1)
    c.loop_start()
    assert ready.wait(5)
    return c


def secrets_of(kit: Kit) -> list[str]:
    """Every form the private key could leak in: its PEM body and its raw bytes (base64, hex)."""
    from cryptography.hazmat.primitives import serialization

    pem = (kit.root / "keys" / "signing.key").read_text()
    raw = kit.key._private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                         serialization.NoEncryption())
    body = "".join(pem.strip().splitlines()[1:-1])
    return [body[:40], base64.b64encode(raw).decode()[:40], raw.hex()[:40]]


@pytest.mark.slow
def test_devices_wake_on_the_notification_and_the_status_table_tells_what_they_run(
        kit: Kit, broker: Broker, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    folder = kit.www / "mq"
    write_release(kit.model, 1, folder, kit.key, golden=kit.golden)
    seen: list[tuple[str, bytes]] = []
    listener = listen(broker, "edgekit/#", seen)
    devices = []
    for i in range(4):
        name = f"mq-{i}"
        settings = kit.settings("mq", poll_seconds=3600.0)  # only the notification wakes them
        d = Device(name, tmp_path / name, settings, kit.images)
        d.follower.publisher = StatusPublisher("127.0.0.1", broker.port, device=name,
                                               notify_topic=settings.notification_topic,
                                               on_notify=d.follower.notify)
        devices.append(d.start())
    try:
        assert all(d.follower.publisher.connected.wait(5) for d in devices)
        t0 = time.monotonic()
        assert main(["release", str(kit.model), "--version", "2", "--to", str(folder), "--key",
                     str(kit.root / "keys" / "signing.key"), "--golden", str(kit.golden),
                     "--mqtt", f"127.0.0.1:{broker.port}"]) == 0
        wait_until(lambda: all(d.serving == 2 for d in devices), timeout=15, what="the notified devices to serve 2")
        assert time.monotonic() - t0 < 10  # woken, not polled (their polls are an hour apart)
        for d in devices:
            d.follower.publish_status()
        time.sleep(0.3)
        capsys.readouterr()
        assert main(["fleet", "status", "--broker", f"127.0.0.1:{broker.port}", "--json", "--wait", "0.5"]) == 0
        rows = {r["device"]: r for r in json.loads(capsys.readouterr().out)}
        assert {n: (r["running"], r["state"]) for n, r in rows.items()} == {
            d.name: (d.serving, d.follower.phase.value) for d in devices}
        assert main(["fleet", "status", "--broker", f"127.0.0.1:{broker.port}", "--wait", "0.5"]) == 0
        table = capsys.readouterr().out.splitlines()
        assert table[0].split()[:3] == ["DEVICE", "STATE", "RUNNING"]
        assert sorted(line.split()[0] for line in table[1:]) == [d.name for d in devices]
        rollout = [json.loads(p) for t, p in seen if t.endswith("/rollout")]
        assert {(e["device"], e["action"], e["version"]) for e in rollout} >= {
            (d.name, "installed", 2) for d in devices}
    finally:
        for d in devices:
            d.stop()
        listener.loop_stop()
        listener.disconnect()
    offline = [json.loads(p) for t, p in seen if t.endswith("/fleet")]
    assert {s["device"] for s in offline if s["state"] == "stopped"} == {d.name for d in devices}
    # no key material anywhere a device writes or says
    texts = [caplog.text, *(p.decode(errors="replace") for _, p in seen)]
    texts += [p.read_text() for d in devices for p in d.state_dir.glob("*.json")]
    texts += [json.dumps(e) for d in devices for e in d.events]
    for secret in secrets_of(kit):
        assert not any(secret in t for t in texts)
    assert "PRIVATE" not in repr(kit.key) and kit.public.id in repr(kit.key)


cv2 = pytest.importorskip("cv2")


@pytest.mark.slow
def test_an_inspection_cell_follows_a_channel(kit: Kit, broker: Broker, tmp_path: Path, shared_models: Path,
                                              shared_images: Path) -> None:
    from edgekit.inspect import Cell, load_config

    video = kite_line(shared_images, tmp_path, (640, 426), 10, 100)
    folder = kit.www / "cell"
    ssd = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    write_release(ssd, 1, folder, kit.key, golden=tmp_path / "golden.npz")
    port = free_port()
    cfg = tmp_path / "inspection.toml"
    cfg.write_text(kit.cell_toml("cell-9", video, "cell", broker.port, shared_models / "coco_labels.txt",
                                 fleet="poll_seconds = 0.3\nhealth_window = 10\nhealth_baseline = 10",
                                 tail=f'[metrics]\nport = {port}\n[sinks.jsonl]\ndirectory = "events"\n'))
    seen: list[tuple[str, bytes]] = []
    listener = listen(broker, "edgekit/cell-9/fleet", seen)
    try:
        with Cell.from_config(load_config(cfg)) as cell:
            assert cell.fleet is not None and cell.fleet.serving == 1
            frames = []
            for decision in cell.run():  # 100 frames at 10 fps; version 2 is released at the fifth
                frames.append(decision)
                if len(frames) == 5:
                    write_release(ssd, 2, folder, kit.key, golden=tmp_path / "golden.npz")
                if any(e["kind"] == "rollout" and e["payload"]["action"] == "healthy" for e in events_of(tmp_path)):
                    cell.stop("version 2 found healthy")
            metrics = cell.metrics.text() if cell.metrics else ""
            assert cell.fleet.serving == 2
            cell.fleet.publish_status()
            wait_until(lambda: any(json.loads(p).get("running") == 2 for _, p in seen), 5, "the cell's status")
    finally:
        listener.loop_stop()
        listener.disconnect()
    assert 5 < len(frames) < 100  # stopped once version 2 passed its trial
    assert 'edgekit_model_info{' in metrics and 'version="2"' in metrics
    events = events_of(tmp_path)
    steps = [(e["payload"]["action"], e["payload"]["version"], e["model_version"]) for e in events
             if e["kind"] == "rollout"]
    assert steps == [("installed", 1, None), ("installed", 2, "models/1"), ("trial", 2, "models/2"),
                     ("healthy", 2, "models/2")]
    switches = [e["payload"]["to"] for e in events if e["kind"] == "model_switch"]
    assert switches == ["models/1", "models/2"]
    for e in events:  # each version's golden self-test ran where it serves, and it says so
        if e["kind"] == "model_switch":
            assert e["payload"]["selftest"]["cases"] == 1 and e["payload"]["selftest"]["compared"] == 1
        if e["kind"] == "rollout" and e["payload"]["action"] == "installed":
            test = e["payload"]["selftest"]  # the serving loop's own self-test, spelled the same
            assert (test["version"], test["cases"], test["compared"], test["passed"]) == \
                (e["payload"]["version"], 1, 1, True) and set(test) == {
                    "version", "cases", "compared", "max_error", "load_ms", "warmup_ms", "passed"}
    last = json.loads(next(p for _, p in reversed(seen) if json.loads(p).get("running") == 2))
    assert last["pending"] is None and last["selftest"]["version"] == 2 and last["selftest"]["passed"]
    assert (tmp_path / "models" / "2" / "manifest.json.sig").is_file()


def events_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted((folder / "events").glob("*.jsonl")) for line in f.read_text().splitlines()]


def test_release_notifies_the_uploaded_channel_without_rewriting_it(kit: Kit, broker: Broker, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    folder = kit.www / "notifyonly"
    write_release(kit.model, 1, folder, kit.key)
    channel = (folder / "channel.json").read_bytes()
    key = str(kit.root / "keys" / "signing.key")
    seen: list[tuple[str, bytes]] = []
    listener = listen(broker, "edgekit/channel/notifyonly", seen)
    try:  # the README's order: release, upload, then wake the devices
        assert main(["release", "--version", "1", "--to", str(folder), "--key", key,
                     "--mqtt", f"127.0.0.1:{broker.port}"]) == 0
        wait_until(lambda: bool(seen), 5, "the notification")
    finally:
        listener.loop_stop()
        listener.disconnect()
    assert json.loads(seen[-1][1])["serial"] == 1 and (folder / "channel.json").read_bytes() == channel
    capsys.readouterr()
    assert main(["release", "--version", "2", "--to", str(folder), "--key", key,
                 "--mqtt", f"127.0.0.1:{broker.port}"]) == 2
    assert "no channel rolling out version 2" in capsys.readouterr().err


def test_a_release_on_channel_x_notifies_the_follower_of_x(kit: Kit, broker: Broker, tmp_path: Path) -> None:
    """`edgekit release --channel X` names the topic (channel_topic(X)); a device following the folder it
    was uploaded to (another name) listens there once it has read the signed channel, and says X."""
    folder = kit.www / "upload-7"
    key = str(kit.root / "keys" / "signing.key")
    write_release(kit.model, 1, folder, kit.key, channel_name="line-x")
    settings = kit.settings("upload-7", poll_seconds=3600.0)  # only the notification wakes it
    assert settings.notification_topic == "edgekit/channel/upload-7"  # the URL's folder, until it reads the channel
    assert settings.notification_topic_for("line-x") == "edgekit/channel/line-x"
    d = Device("x-1", tmp_path / "x-1", settings, kit.images)
    publisher = d.follower.publisher = StatusPublisher("127.0.0.1", broker.port, device="x-1",
                                                       notify_topic=settings.notification_topic,
                                                       on_notify=d.follower.notify)
    d.start()
    try:
        assert publisher.connected.wait(5)
        wait_until(lambda: publisher._notify_topic == "edgekit/channel/line-x", 5, "the channel's own topic")
        time.sleep(0.3)  # the subscription reaches the broker
        t0 = time.monotonic()
        assert main(["release", str(kit.model), "--version", "2", "--to", str(folder), "--key", key,
                     "--channel", "line-x", "--mqtt", f"127.0.0.1:{broker.port}"]) == 0
        wait_until(lambda: d.serving == 2, timeout=15, what="the notified device to serve 2")
        assert time.monotonic() - t0 < 10  # woken, not polled
        assert d.follower.status().channel == "line-x"
    finally:
        d.stop()
