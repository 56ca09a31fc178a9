"""A fleet of --devices followers against one Mosquitto and one static file server, no inference.

    python benchmarks/fleet_scale.py [--devices 200] [--canary 0.1]

Each device is a FleetFollower with its MQTT status publisher (its own connection, as on a real
device) in threads of this process; one driver thread stands in for every device's serving loop:
it reports a model switch when a version appears in the device's folder and feeds frames (20 fps,
top score 0.9, PASS) so baselines fill and trials pass. The file server (`python -m
edgekit.fleet.serve`) runs in its own process. Releases: version 2 to --canary of the fleet (the
canary fraction counted exactly against the bucket formula), then widened to 100 %, each followed
by `edgekit release --mqtt`'s notification. Printed: release-to-serving p50/p99 after each
notification, the broker's connections and messages ($SYS), bytes received per device.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import cpu_name  # noqa: E402
from edgekit.fleet.follower import FleetFollower  # noqa: E402
from edgekit.fleet.health import HealthThresholds  # noqa: E402
from edgekit.fleet.manifest import selected  # noqa: E402
from edgekit.fleet.release import set_rollout, write_release  # noqa: E402
from edgekit.fleet.status import StatusPublisher, publish_notification  # noqa: E402
from edgekit.inspect.modelwatch import find_versions  # noqa: E402
from tests.conftest import SHARED_IMAGES, SHARED_MODELS  # noqa: E402
from tests.edgekit.fleet.conftest import MOSQUITTO, Kit, free_port, wait_until  # noqa: E402


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]


class Sys:
    """The broker's own counters ($SYS/broker/...), as mosquitto publishes them every second."""

    def __init__(self, port: int) -> None:
        import paho.mqtt.client as mqtt

        self.values: dict[str, str] = {}
        self.c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="sys-reader")
        self.c.on_message = lambda cl, u, m: self.values.__setitem__(m.topic, m.payload.decode())
        self.c.connect("127.0.0.1", port)
        self.c.subscribe("$SYS/broker/#")
        self.c.loop_start()

    def get(self, key: str) -> float:
        return float(self.values.get(f"$SYS/broker/{key}", "nan").split()[0])

    def close(self) -> None:
        self.c.loop_stop()
        self.c.disconnect()


def drive(followers: list[FleetFollower], serving: dict[str, tuple[int, float]], stop: threading.Event) -> None:
    """Every device's serving loop: switch to the highest version in its folder, one frame a tick."""
    while not stop.wait(0.05):
        for f in followers:
            versions = find_versions(f.root)
            v = max(versions) if versions else None
            if v is not None and serving.get(f.device, (None, 0.0))[0] != v:
                serving[f.device] = (v, time.perf_counter())
                f.on_model_event("model_switch", {"version": v})
            f.observe(0.9, False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=200)
    ap.add_argument("--canary", type=float, default=0.1)
    a = ap.parse_args()
    if MOSQUITTO is None:
        sys.exit("needs mosquitto: apt-get install -y mosquitto")
    import logging

    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        kit = Kit(home / "kit", SHARED_MODELS, SHARED_IMAGES)
        port = free_port()
        conf = home / "mosquitto.conf"
        conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\nsys_interval 1\n"
                        + ("user root\n" if os.geteuid() == 0 else ""))
        broker = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        server = subprocess.Popen([sys.executable, "-m", "edgekit.fleet.serve", str(kit.www), "--port", "0"],
                                  stdout=subprocess.PIPE, text=True)
        assert server.stdout is not None
        base = server.stdout.readline().split(" on ")[1].strip().rstrip("/")
        time.sleep(0.5)
        sysinfo = Sys(port)
        folder = kit.www / "scale"
        write_release(kit.model, 1, folder, kit.key)
        settings = replace(kit.settings("scale", poll_seconds=3600.0, health=HealthThresholds(window=10, baseline=10)),
                           channel=f"{base}/scale/channel.json", jitter=0.2, notify_spread=1.0)
        followers: list[FleetFollower] = []
        serving: dict[str, tuple[int, float]] = {}
        stop = threading.Event()
        try:
            t0 = time.perf_counter()
            for i in range(a.devices):
                name = f"cell-{i:04d}"
                f = FleetFollower(settings, device=name, model_dir=home / name / "models",
                                  state_dir=home / name / "state", isolate=False)
                f.publisher = StatusPublisher("127.0.0.1", port, device=name, notify_topic=settings.notification_topic,
                                              on_notify=f.notify)
                f.recover()
                f.ensure_version(60)
                followers.append(f)
            driver = threading.Thread(target=drive, args=(followers, serving, stop), daemon=True)
            driver.start()
            for f in followers:
                f.start()
            wait_until(lambda: len(serving) == a.devices and all(f.health.baseline_ready for f in followers),
                       120, "every device serving version 1 with its baseline")
            print(f"{a.devices} devices up in {time.perf_counter() - t0:.1f} s")
            time.sleep(2.5)
            msgs0 = (sysinfo.get("messages/received"), sysinfo.get("messages/sent"))
            before = {f.device: f.downloaded for f in followers}
            rows = []
            for step, rollout in (("canary", a.canary), ("widen", 1.0)):
                t1 = time.perf_counter()
                if step == "canary":
                    channel = write_release(kit.model, 2, folder, kit.key, rollout=rollout).channel
                else:
                    channel = set_rollout(folder, 2, kit.key, rollout=rollout)
                publish_notification("127.0.0.1", port, settings.notification_topic,
                                     {"serial": channel.serial, "version": 2, "rollout": rollout})
                want = {f.device for f in followers if selected(f.device, rollout, 2)}
                wait_until(lambda: all(serving[d][0] == 2 for d in want), 120, f"the {step} to serve version 2")
                time.sleep(3.0)  # any device outside it that wrongly took it would show by now
                took = [serving[d][1] - t1 for d in want if serving[d][1] >= t1]
                got = {f.device for f in followers if serving[f.device][0] == 2}
                rows.append((step, rollout, len(want), len(got), pct(took, 50), pct(took, 99), max(took)))
            msgs1 = (sysinfo.get("messages/received"), sysinfo.get("messages/sent"))
            connected = sysinfo.get("clients/connected")
            received = [f.downloaded - before[f.device] for f in followers]
        finally:
            stop.set()
            for f in followers:
                f.close()
            sysinfo.close()
            server.terminate()
            broker.terminate()
            server.wait(10)
            broker.wait(10)
            kit.close()
    release = kit.model.stat().st_size
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; {a.devices} followers "
          "(no inference), one mosquitto, one edgekit.fleet.serve process")
    print("step     rollout  selected  serving v2  release-to-serving p50 s  p99 s  max s")
    for step, rollout, want, got, p50, p99, mx in rows:
        print(f"{step:<8} {rollout:>7.0%}  {want:>8}  {got:>10}  {p50:>24.2f}  {p99:>5.2f}  {mx:>5.2f}")
    print(f"canary fraction: {rows[0][2]} of {a.devices} = {rows[0][2] / a.devices:.3f} for --canary {a.canary} "
          f"(the bucket formula; serving v2 after the canary step: {rows[0][3]})")
    print(f"broker: {connected:.0f} clients connected; during the two releases {msgs1[0] - msgs0[0]:.0f} messages "
          f"received and {msgs1[1] - msgs0[1]:.0f} sent")
    print(f"bytes received per device over both steps: median {statistics.median(received):,.0f}, max "
          f"{max(received):,}; the model is {release:,} bytes")


if __name__ == "__main__":
    main()
