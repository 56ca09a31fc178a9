"""The MQTT sink against a real Mosquitto broker on localhost (apt-get install mosquitto).

The broker is started per test on a free port with a generated config, stopped and
restarted where the test needs an outage. A paho subscriber plays the plant's receiver.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from edgekit.errors import ConfigError
from edgekit.inspect.events import Event, EventEmitter, EventKind
from edgekit.sinks.mqtt import MqttConfig, MqttSink

mqtt = pytest.importorskip("paho.mqtt.client")

MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
pytestmark = pytest.mark.skipif(MOSQUITTO is None, reason="mosquitto not installed: apt-get install -y mosquitto")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """A Mosquitto process with a generated config; stop() and start() keep the same port."""

    def __init__(self, folder: Path, extra: str = "", persistence: bool = False, anonymous: bool = True) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.conf = folder / "mosquitto.conf"
        # autosave on every change: a killed broker still knows the receiver's session
        persist = (f"persistence true\npersistence_location {folder}/\nautosave_on_changes true\n"
                   "autosave_interval 1\n" if persistence else "persistence false\n")
        self.conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous {str(anonymous).lower()}\n{persist}"
                             f"max_queued_messages 100000\nlog_dest file {folder}/mosquitto.log\n"
                             # as root, mosquitto switches to user "mosquitto", who cannot read tmp_path
                             + ("user root\n" if os.geteuid() == 0 else "")
                             + textwrap.dedent(extra))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_port: int | None = None) -> None:
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited: {self.proc.stderr.read().decode()}")  # type: ignore[union-attr]
            try:
                socket.create_connection(("127.0.0.1", wait_port or self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("mosquitto did not start listening")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path / "broker-plain")
    b.start()
    yield b
    b.stop()


class Receiver:
    """The plant side: a paho subscriber collecting events and status messages."""

    def __init__(self, port: int, device: str, persistent: bool = False, client_id: str = "receiver") -> None:
        self.events: list[Event] = []
        self.status: list[tuple[str, bool]] = []
        self.subscribed = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                                  clean_session=not persistent)
        self.client.reconnect_delay_set(min_delay=0.05, max_delay=0.2)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *a: self.subscribed.set()
        self.device = device
        self.client.connect("127.0.0.1", port, keepalive=5)
        self.client.loop_start()
        assert self.subscribed.wait(5), "receiver could not subscribe"

    def _on_connect(self, client: Any, userdata: Any, flags: Any, rc: Any, props: Any) -> None:
        client.subscribe([(f"edgekit/{self.device}/events", 1), (f"edgekit/{self.device}/status", 1)])

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        if msg.topic.endswith("/events"):
            self.events.append(Event.from_json(msg.payload))
        else:
            self.status.append((msg.payload.decode(), bool(msg.retain)))

    def wait_for(self, n: int, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while len({e.seq for e in self.events}) < n and time.monotonic() < deadline:
            time.sleep(0.02)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def in_order_once(events: list[Event], allow_gaps: bool = False) -> tuple[list[int], int]:
    """Sequence numbers as a receiver keeps them (a repeat of one already seen is dropped),
    and how many repeats there were. Raises if anything arrives out of order (or with a gap)."""
    kept: list[int] = []
    repeats = 0
    for e in events:
        if kept and e.seq <= kept[-1]:
            repeats += 1
            continue
        if kept and e.seq != kept[-1] + 1 and not allow_gaps:
            raise AssertionError(f"gap or reordering: {kept[-1]} then {e.seq}")
        kept.append(e.seq)
    return kept, repeats


def make_sink(port: int, tmp: Path, **kw: Any) -> MqttSink:
    cfg = dict(device="cell-1", queue_path=str(tmp / "mqtt-queue.db"), port=port,
               reconnect_min=0.05, reconnect_max=0.3, connect_timeout=2.0, drain_timeout=3.0)
    cfg.update(kw)
    return MqttSink(MqttConfig(**cfg))


def test_events_arrive_in_order_with_status_online_then_offline(broker: Broker, tmp_path: Path) -> None:
    rx = Receiver(broker.port, "cell-1")
    sink = make_sink(broker.port, tmp_path)
    n = 300
    with EventEmitter("cell-1", sinks=[sink]) as em:
        em.model_version = "inspection/1"
        t0 = time.perf_counter()
        for i in range(n):
            em.emit(EventKind.INSPECTION, {"verdict": "PASS" if i % 3 else "FAIL", "frame": i})
        assert sink.flush(20), f"not all acknowledged: {sink.stats()}"
        rate = n / (time.perf_counter() - t0)
    rx.wait_for(n)
    rx.close()
    kept, repeats = in_order_once(rx.events)
    assert kept == list(range(1, n + 1)) and repeats == 0
    assert rx.events[0].model_version == "inspection/1" and rx.events[0].payload["verdict"] == "FAIL"
    assert [s for s, _ in rx.status] == ["online", "offline"]  # clean close says offline itself
    print(f"\nMQTT QoS 1 through the disk queue, localhost: {rate:.0f} events/s")


def test_batches_from_the_background_writer_arrive_in_order(broker: Broker, tmp_path: Path) -> None:
    rx = Receiver(broker.port, "cell-2")
    sink = make_sink(broker.port, tmp_path, device="cell-2")
    n = 200
    with EventEmitter("cell-2", sinks=[sink], background=True, linger=0.05) as em:
        for i in range(n):
            em.emit(EventKind.INSPECTION, {"frame": i})
        em.flush()
        assert sink.flush(20), f"not all acknowledged: {sink.stats()}"
    rx.wait_for(n)
    rx.close()
    kept, repeats = in_order_once(rx.events)
    assert kept == list(range(1, n + 1)) and repeats == 0


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_broker_outage_every_event_arrives_once_in_order(tmp_path: Path, stop_signal: int) -> None:
    # The receiver keeps a persistent session (clean_session=False) on a broker with
    # persistence, as a plant's consumer would: events the device replays before the
    # receiver is back are held for it. Without it the test would measure the receiver.
    broker = Broker(tmp_path / "broker-persist", persistence=True)
    broker.start()
    rx = Receiver(broker.port, "cell-1", persistent=True)
    sink = make_sink(broker.port, tmp_path, max_inflight=10)
    before = during = 0
    try:
        with EventEmitter("cell-1", sinks=[sink]) as em:
            t0 = time.monotonic()
            # > autosave_interval, so a killed broker has saved the receiver's session
            while time.monotonic() - t0 < 1.2:
                em.emit(EventKind.INSPECTION, {"phase": "before"})
                before += 1
                time.sleep(0.005)
            broker.stop(stop_signal)
            t_down = time.monotonic()
            time.sleep(0.2)  # PUBACKs already in the socket buffer are still counted
            acked_before = sink.stats().acked  # the broker took responsibility for seq 1..acked_before
            while time.monotonic() - t_down < 1.5:  # the outage
                em.emit(EventKind.INSPECTION, {"phase": "outage"})
                during += 1
                time.sleep(0.005)
            assert len(sink.queue) >= during, "outage events must wait on disk"
            broker.start()
            t_up = time.monotonic()
            while sink.stats().queued > 0 and time.monotonic() - t_up < 20:
                time.sleep(0.005)
            replay_s = time.monotonic() - t_up
            for _ in range(50):
                em.emit(EventKind.INSPECTION, {"phase": "after"})
                time.sleep(0.002)
            assert sink.flush(20), f"queue not drained after the broker returned: {sink.stats()}"
            total = em.counter.last
        rx.wait_for(total)
    finally:
        rx.close()
        broker.stop()
    kept, repeats = in_order_once(rx.events, allow_gaps=stop_signal == signal.SIGKILL)
    lost = sorted(set(range(1, total + 1)) - set(kept))
    if stop_signal == signal.SIGTERM:
        assert kept == list(range(1, total + 1))
        assert repeats <= 10, "only events in flight when the broker stopped may come twice (QoS 1)"
    else:
        # A killed broker loses what it had acknowledged but not yet delivered or saved: that
        # is the broker's part. The sink's part: everything not acknowledged arrives, in order.
        assert kept[-1] == total and all(s <= acked_before for s in lost), (lost, acked_before)
    print(f"\noutage ({signal.Signals(stop_signal).name}): {during} events produced while the broker was "
          f"down, all delivered; backlog replayed {replay_s:.2f} s after restart; "
          f"{repeats} repeat(s) dropped by seq; {len(lost)} acknowledged by the broker and lost with it")


def test_queue_survives_process_restart(tmp_path: Path) -> None:
    folder = tmp_path / "broker-late"
    folder.mkdir(exist_ok=True)
    broker = Broker(folder)  # not started: unreachable at first
    sink = make_sink(broker.port, tmp_path)
    with EventEmitter("cell-1", sinks=[sink]) as em:
        for i in range(20):
            em.emit(EventKind.INSPECTION, {"i": i})
    assert sink.stats().connects == 0
    broker.start()
    try:
        rx = Receiver(broker.port, "cell-1")
        sink2 = make_sink(broker.port, tmp_path)  # the next run, same queue file
        assert sink2.flush(10)
        rx.wait_for(20)
        sink2.close()
        rx.close()
    finally:
        broker.stop()
    kept, _ = in_order_once(rx.events)
    assert kept == list(range(1, 21))


def test_close_reconnects_at_once_to_a_broker_that_is_back(tmp_path: Path) -> None:
    """A stop request soon after the broker returns: the sink, waiting out a long reconnect backoff,
    tries again at once and delivers the backlog before it closes (not on the next run)."""
    broker = Broker(tmp_path / "broker-back")  # down at first
    sink = make_sink(broker.port, tmp_path, reconnect_min=20.0, reconnect_max=40.0, drain_timeout=5.0)
    with EventEmitter("cell-1", sinks=[sink]) as em:
        for i in range(5):
            em.emit(EventKind.INSPECTION, {"i": i})
        time.sleep(0.3)  # the first connect failed: the sender waits 10-20 s
        broker.start()
        try:
            rx = Receiver(broker.port, "cell-1")
            t0 = time.monotonic()
            sink.close()
            closed_in = time.monotonic() - t0
            rx.wait_for(5, timeout=5)
            rx.close()
        finally:
            broker.stop()
    assert sink.stats().queued == 0 and closed_in < 4.0
    assert in_order_once(rx.events)[0] == [1, 2, 3, 4, 5]


def test_last_will_offline_when_the_device_dies(broker: Broker, tmp_path: Path) -> None:
    rx = Receiver(broker.port, "cell-9")
    script = textwrap.dedent(f"""
        import sys, time
        from edgekit.sinks.mqtt import MqttConfig, MqttSink
        sink = MqttSink(MqttConfig(device="cell-9", queue_path=sys.argv[1], port={broker.port}, keepalive=5))
        while not sink.stats().connected:
            time.sleep(0.02)
        print("up", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "q.db")], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"up"
        proc.kill()  # no DISCONNECT: the broker must publish the last will
        proc.wait(5)
        deadline = time.monotonic() + 10
        while [s for s, _ in rx.status][-1:] != ["offline"] and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
        rx.close()
    assert [s for s, _ in rx.status] == ["online", "offline"]


@pytest.mark.parametrize("password, delivered", [("s3cret", True), ("wrong", False)])
def test_username_password(tmp_path: Path, password: str, delivered: bool) -> None:
    passwd = shutil.which("mosquitto_passwd")
    if passwd is None:
        pytest.skip("mosquitto_passwd not found")
    folder = tmp_path / "broker-auth"
    folder.mkdir(exist_ok=True)
    pw = folder / "passwd"
    pw.touch(mode=0o600)
    subprocess.run([passwd, "-b", str(pw), "edge", "s3cret"], check=True, capture_output=True)
    broker = Broker(folder, extra=f"password_file {pw}\n", anonymous=False)
    broker.start()
    try:
        sink = make_sink(broker.port, tmp_path, username="edge", password=password)
        sink.write(Event("cell-1", 1, EventKind.STATUS, time.time()))
        ok = sink.flush(1.5)
        stats = sink.stats()
        sink.close()
    finally:
        broker.stop()
    assert ok is delivered
    if not delivered:
        assert stats.queued == 1 and "refused" in (stats.last_error or "")


def test_tls(tmp_path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl not found")
    folder = tmp_path / "broker-tls"
    folder.mkdir(exist_ok=True)
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    tls_port = free_port()
    broker = Broker(folder, extra=f"""
        listener {tls_port} 127.0.0.1
        cafile {cert}
        certfile {cert}
        keyfile {key}
    """)
    broker.start(wait_port=tls_port)
    try:
        rx = Receiver(broker.port, "cell-1")  # plain listener for the receiver
        sink = make_sink(tls_port, tmp_path, tls=True, ca_certs=str(cert))
        for seq in (1, 2, 3):
            sink.write(Event("cell-1", seq, EventKind.STATUS, time.time(), payload={"tls": True}))
        assert sink.flush(10), sink.stats()
        rx.wait_for(3)
        sink.close()
        rx.close()
    finally:
        broker.stop()
    assert [e.seq for e in rx.events] == [1, 2, 3]


@pytest.mark.parametrize("kwargs, message", [
    ({"device": "cell/1"}, "device must be"),
    ({"device": "cell+"}, "device must be"),
    ({"port": 0}, "mqtt port: expected a port number 1-65535, got 0"),
    ({"password": "x"}, "password given without username"),
    ({"certfile": "c.pem"}, "certfile and keyfile"),
    ({"reconnect_min": 5.0, "reconnect_max": 1.0}, "reconnect_min"),
])
def test_config_errors(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    base: dict[str, Any] = {"device": "cell-1", "queue_path": str(tmp_path / "q.db")}
    base.update(kwargs)
    with pytest.raises(ConfigError, match=message):
        MqttConfig(**base)
