"""Per-part mode through a real Mosquitto broker that goes down mid-run, with a stop request (what
SIGTERM does) later in the same run: the plant's subscriber gets every `part` event once, in order,
and the PLC gets one reject per failed part, those made during the outage too."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from edgekit.inspect import Cell
from edgekit.inspect.config import parse_config
from edgekit.inspect.parts import PartVerdict
from tests.edgekit.inspect.test_perpart import HEAD, PARTS, _Detector
from tests.edgekit.sinks.test_mqtt import MOSQUITTO, Broker, Receiver, in_order_once

pytestmark = pytest.mark.skipif(MOSQUITTO is None, reason="mosquitto not installed: apt-get install -y mosquitto")


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGKILL], ids=["broker-stopped", "broker-killed"])
def test_broker_outage_then_stop_loses_no_part_event(tmp_path: Path, make_parts_belt, modbus_server,
                                                     stop_signal: int) -> None:
    belt = make_parts_belt(11, n_parts=9)
    broker = Broker(tmp_path / "broker", persistence=True)
    broker.start()
    rx = Receiver(broker.port, "cell-9", persistent=True)
    (tmp_path / "model.tflite").write_bytes(b"not read by the fake detector")
    (tmp_path / "belt.avi").write_bytes(b"")
    text = (HEAD + PARTS + f'[sinks.jsonl]\ndirectory = "events"\n'
            f'[sinks.mqtt]\nport = {broker.port}\nreconnect_min = 0.05\nreconnect_max = 0.2\n'
            f'[plc]\nhost = "127.0.0.1"\nport = {modbus_server.port}\ncoil = 3\ndelay = 0\npulse = 0\n')
    config = parse_config(text, name="cell.toml", base=tmp_path)
    seen: list[PartVerdict] = []
    try:
        time.sleep(1.2)  # > the broker's autosave interval: a killed broker has saved the receiver's session
        with Cell(config, detector=_Detector(belt.frames, tmp_path / "model.tflite")) as cell:
            for verdict in cell.run():
                seen.append(verdict)
                if len(seen) == 2:
                    time.sleep(0.3)  # the first two are out (acknowledged) before the outage
                    broker.stop(stop_signal)
                elif len(seen) == 5:
                    time.sleep(0.3)  # three verdicts made while the broker is down
                    broker.start()
                elif len(seen) == 7:
                    cell.stop("SIGTERM")
        rx.wait_for(len(seen) + 1)  # the parts and the "stopped" status event, at least
    finally:
        rx.close()
        broker.stop()
    assert 7 <= len(seen) < 9, "the stop ends the run after the frames already inferred"
    kept, repeats = in_order_once(rx.events)
    by_seq = {e.seq: e for e in rx.events}
    parts = [by_seq[s].payload["part"] for s in kept if by_seq[s].kind.value == "part"]
    assert parts == [v.sequence for v in seen], f"the subscriber's parts {parts}, the cell's {seen}"
    assert repeats <= 5, "only events in flight when the broker stopped may come twice (QoS 1)"
    # the same parts in the files, and one reject per failed part at the PLC
    events = [json.loads(line) for f in sorted((tmp_path / "events").glob("events-*.jsonl"))
              for line in f.read_text().splitlines()]
    assert [e["payload"]["part"] for e in events if e["kind"] == "part"] == parts
    failed = [v for v in seen if not v.passed]
    assert failed and [(fc, addr) for fc, addr, _ in modbus_server.sets] == [(5, 3)] * len(failed)
    assert [tuple(sorted(v.reasons)) for v in seen] == belt.truth[:len(seen)]
