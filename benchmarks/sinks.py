"""Event sinks: MQTT throughput with QoS 1, and what all sinks cost the inspection loop.

    python benchmarks/sinks.py [--events 2000] [--frames 200] [--repeat 3]

(1) events per second through the MQTT sink (QoS 1, every event fsync'ed into the disk queue
    first, deleted on PUBACK) to a Mosquitto broker on localhost: the rate `write()` accepts
    them (durable on return) and the rate they are acknowledged end to end;
(2) `edgekit inspect` on every frame of a 640x480 video made from a real photo, SSD model,
    continuous mode, an event per frame: fps with no sink against fps with rotating files +
    MQTT + webhook + Prometheus metrics all on (the emitter's writer hands the sinks batches
    gathered over 50 ms, committed with one fsync each). The broker and the webhook receiver
    run in their own processes, as they would on the network, but on the same cores. Rounds
    alternate off/on so other load on the machine hits both alike; the median round is
    reported. Target: on/off >= 0.95.

Needs mosquitto (apt-get install mosquitto) and the real models in tests/data.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np

from edgekit.inspect import Cell, load_config
from edgekit.inspect.events import EventEmitter, EventKind
from edgekit.runtimes.timing import machine_line
from edgekit.sinks.mqtt import MqttConfig, MqttSink

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    port = free_port()
    conf = folder / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nuser root\n")
    proc = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return serving(proc, port, "mosquitto")


def serving(proc: subprocess.Popen[bytes], port: int, what: str) -> tuple[subprocess.Popen[bytes], int]:
    """``(proc, port)`` once ``proc`` accepts connections on ``port``; it is killed if it never does."""
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise SystemExit(f"{what} did not start")


def mqtt_rate(port: int, folder: Path, n: int) -> tuple[float, float]:
    sink = MqttSink(MqttConfig(device="bench", queue_path=str(folder / f"q-{time.time_ns()}.db"), port=port))
    while not sink.stats().connected:
        time.sleep(0.01)
    with EventEmitter("bench", sinks=[sink]) as em:
        t0 = time.perf_counter()
        for i in range(n):
            em.emit(EventKind.INSPECTION, {"verdict": "PASS", "frame": i, "rules": [{"count": 4}]})
        t_write = time.perf_counter() - t0
        if not sink.flush(120):
            raise SystemExit(f"MQTT queue did not drain: {sink.stats()}")
        t_acked = time.perf_counter() - t0
    return n / t_write, n / t_acked


RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Hook(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Hook).serve_forever()
"""


def start_receiver() -> tuple[subprocess.Popen[bytes], int]:
    """A webhook receiver in its own process, as on the real network (here on the same cores)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", RECEIVER, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    return serving(proc, port, "the webhook receiver")


def make_video(path: Path, frames: int) -> Path:
    base = cv2.resize(cv2.imread(str(DATA / "kite_and_cold.jpg")), (640, 480))
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 30, (640, 480))
    for i in range(frames):
        w.write(np.roll(base, 3 * i, axis=1))
    w.release()
    return path


def config(folder: Path, video: Path, sinks: str) -> Path:
    models = DATA
    path = folder / f"cell-{time.time_ns()}.toml"
    path.write_text(f"""
device = "bench"
state_dir = "{folder / ('state-' + str(time.time_ns()))}"
[source]
path = "{video}"
[model]
path = "{models / 'ssd_mobilenet_v1_coco_quant.tflite'}"
labels = "{models / 'coco_labels.txt'}"
threshold = 0.4
[[rules]]
label = "person"
min = 1
{sinks}
""")
    return path


def fps(cfg: Path) -> float:
    with Cell.from_config(load_config(cfg)) as cell:
        for _ in cell.run():
            pass
    assert cell.summary is not None
    return float(cell.summary.fps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        broker, port = start_broker(folder)
        hook: subprocess.Popen[bytes] | None = None
        try:
            hook, hook_port = start_receiver()
            rates = [mqtt_rate(port, folder, args.events) for _ in range(args.repeat)]
            accepted = statistics.median(r[0] for r in rates)
            acked = statistics.median(r[1] for r in rates)
            print(f"(1) MQTT QoS 1, {args.events} events, localhost: write() {accepted:.0f} events/s (durable on "
                  f"return), acknowledged end to end {acked:.0f} events/s")
            video = make_video(folder / "line.avi", args.frames)
            all_on = (f"[sinks.jsonl]\ndirectory = \"{folder / 'events'}\"\n"
                      f"[sinks.mqtt]\nport = {port}\n"
                      f"[sinks.webhook]\nurl = \"http://127.0.0.1:{hook_port}/events\"\n"
                      f"[metrics]\nport = {free_port()}\n")
            off, on = [], []
            for _ in range(args.repeat):
                off.append(fps(config(folder, video, "")))
                on.append(fps(config(folder, video, all_on.replace("port = 0", f"port = {free_port()}"))))
            f_off, f_on = statistics.median(off), statistics.median(on)
            print(f"(2) edgekit inspect, {args.frames} frames, an event per frame: no sinks {f_off:.1f} fps, "
                  f"files+MQTT+webhook+metrics {f_on:.1f} fps; on/off = {f_on / f_off:.3f} (target >= 0.95)")
            print(f"    per round on/off: {', '.join(f'{b / a:.3f}' for a, b in zip(off, on))}")
        finally:
            if hook is not None:
                hook.terminate()
            broker.terminate()
            broker.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
