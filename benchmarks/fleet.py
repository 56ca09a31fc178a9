"""Fleet rollout figures on localhost: 20 devices following one channel over HTTP.

    python benchmarks/fleet.py [--devices 20] [--rounds 3] [--poll 2.0]

Needs tests/data (mobilenet_v1_0.25_128_quant and its photos) and, for the notification
rounds, mosquitto. Each device is a FleetFollower, a ModelWatcher and an inference loop at 10 fps
in threads of this process (tests/edgekit/fleet/conftest.py's Device). Two fleets run side by side:
one woken by the MQTT notification of `edgekit release --mqtt` (its own polls an hour apart),
one polling every --poll seconds (+-20% jitter); their rounds are interleaved. Printed:

- time from the start of write_release to each device serving the new version (p50/p99 over
  devices and rounds), per fleet; a round starts once every device holds its baseline (the
  frames a new version is held for) and runs no trial;
- bytes each device received per release (bodies: channel, signatures, manifest, model, golden);
- the loop fps of one device running flat out, in the second around each swap against seconds far
  from one (interleaved; the median of the rounds), and the longest frame gap in each.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks._common import cpu_name  # noqa: E402
from edgekit.fleet.release import write_release  # noqa: E402
from edgekit.fleet.status import StatusPublisher, publish_notification  # noqa: E402
from tests.conftest import SHARED_IMAGES, SHARED_MODELS  # noqa: E402
from tests.edgekit.fleet.conftest import MOSQUITTO, Broker, Device, Kit  # noqa: E402


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def fleet(kit: Kit, base: str, name: str, n: int, home: Path, poll: float, broker: Broker | None) -> list[Device]:
    from dataclasses import replace

    write_release(kit.model, 1, kit.www / name, kit.key, golden=kit.golden)
    devices = []
    for i in range(n):
        settings = replace(kit.settings(name, poll_seconds=3600.0 if broker else poll),
                           channel=f"{base}/{name}/channel.json", jitter=0.2)
        # 2 fps: forty inference loops on two shared cores would otherwise time the CPU, not the rollout
        d = Device(f"{name}-{i:02d}", home / f"{name}-{i:02d}", settings, kit.images, fps=2.0)
        if broker is not None:
            d.follower.publisher = StatusPublisher("127.0.0.1", broker.port, device=d.name,
                                                   notify_topic=settings.notification_topic, on_notify=d.follower.notify)
        devices.append(d)
    threads = [threading.Thread(target=d.start) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return devices


def release_round(kit: Kit, name: str, version: int, devices: list[Device], broker: Broker | None,
                  timeout: float = 60.0) -> tuple[list[float], list[float], list[int]]:
    """Seconds from the release to each device having `version` in its folder (downloaded, verified,
    self-tested) and to serving it; bytes each received. Each device first has its baseline (the
    health_baseline frames a version is held for) and no trial running: the figures are the rollout's,
    not the 2 fps loop's."""
    deadline = time.perf_counter() + timeout
    while not all(d.follower.health.baseline_ready and d.follower.health.on_trial is None for d in devices):
        if time.perf_counter() > deadline:
            raise SystemExit(f"{name}: devices without a baseline after {timeout} s")
        time.sleep(0.05)
    before = {d.name: d.follower.downloaded for d in devices}
    t0 = time.perf_counter()
    channel = write_release(kit.model, version, kit.www / name, kit.key, golden=kit.golden).channel
    if broker is not None:
        publish_notification("127.0.0.1", broker.port, f"edgekit/channel/{name}",
                             {"serial": channel.serial, "version": version})
    done: dict[str, float] = {}
    placed: dict[str, float] = {}
    while len(done) < len(devices) and time.perf_counter() - t0 < timeout:
        for d in devices:
            if d.name not in placed and (d.model_dir / str(version)).is_dir():
                placed[d.name] = time.perf_counter() - t0
            if d.name not in done and d.serving == version:
                done[d.name] = time.perf_counter() - t0
        time.sleep(0.005)
    if len(done) < len(devices):
        raise SystemExit(f"{name}: {len(devices) - len(done)} devices did not serve version {version} in {timeout} s")
    return list(placed.values()), list(done.values()), [d.follower.downloaded - before[d.name] for d in devices]


def swap_fps(kit: Kit, home: Path, rounds: int) -> tuple[list[float], list[float], list[float], list[float]]:
    """One device looping flat out: fps and longest gap in the second around each swap and in
    seconds between swaps."""
    write_release(kit.model, 1, kit.www / "fps", kit.key, golden=kit.golden)
    d = Device("fps-0", home / "fps-0", kit.settings("fps", poll_seconds=3600.0), kit.images, fps=10_000).start()
    stamps: list[float] = []
    old_observe = d.follower.observe

    def observe(*a: object, **kw: object) -> None:
        stamps.append(time.perf_counter())
        old_observe(*a, **kw)  # type: ignore[arg-type]

    d.follower.observe = observe  # type: ignore[method-assign]
    swap_fps_, steady_fps, swap_gap, steady_gap = [], [], [], []

    def window(a: float, b: float) -> tuple[float, float]:
        ts = [t for t in stamps if a <= t < b]
        gaps = np.diff(ts) if len(ts) > 1 else np.array([b - a])
        return len(ts) / (b - a), float(gaps.max()) * 1e3

    try:
        for v in range(2, rounds + 2):
            time.sleep(1.5)
            s0 = time.perf_counter()
            time.sleep(1.0)
            fps, gap = window(s0, s0 + 1.0)
            steady_fps.append(fps)
            steady_gap.append(gap)
            t0 = time.perf_counter()
            write_release(kit.model, v, kit.www / "fps", kit.key, golden=kit.golden)
            d.follower.notify()
            while d.serving != v:
                time.sleep(0.001)
            t_swap = time.perf_counter()
            time.sleep(0.6)
            fps, gap = window(max(t0, t_swap - 0.5), t_swap + 0.5)
            swap_fps_.append(fps)
            swap_gap.append(gap)
    finally:
        d.stop()
    return swap_fps_, steady_fps, swap_gap, steady_gap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--poll", type=float, default=2.0, help="poll interval of the polling fleet (s)")
    args = ap.parse_args()
    import logging

    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        kit = Kit(home / "kit", SHARED_MODELS, SHARED_IMAGES)
        broker = Broker(home / "broker") if MOSQUITTO else None
        server = subprocess.Popen([sys.executable, "-m", "edgekit.fleet.serve", str(kit.www), "--port", "0"],
                                  stdout=subprocess.PIPE, text=True)  # the file server in its own process
        assert server.stdout is not None
        base = server.stdout.readline().split(" on ")[1].strip().rstrip("/")
        fleets = {"poll": fleet(kit, base, "poll", args.devices, home, args.poll, None)}
        if broker is not None:
            fleets["mqtt"] = fleet(kit, base, "mqtt", args.devices, home, args.poll, broker)
        times: dict[str, list[float]] = {k: [] for k in fleets}
        placed: dict[str, list[float]] = {k: [] for k in fleets}
        sizes: dict[str, list[int]] = {k: [] for k in fleets}
        try:
            for r in range(args.rounds):
                for name, devices in fleets.items():  # interleaved: a round of each in turn
                    p, t, b = release_round(kit, name, r + 2, devices, broker if name == "mqtt" else None)
                    placed[name] += p
                    times[name] += t
                    sizes[name] += b
            release = sum(p.stat().st_size for p in (kit.www / "poll" / "versions" / "2").rglob("*") if p.is_file())
        finally:
            for devices in fleets.values():
                for d in devices:
                    d.stop()
            server.terminate()
            server.wait(10)
        swap, steady, swap_gap, steady_gap = swap_fps(kit, home, args.rounds + 2)
        kit.close()
        if broker is not None:
            broker.stop()
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; {args.devices} devices per fleet, "
          f"{args.rounds} releases each")
    print(f"{'fleet':<26}{'in folder p50':>14}{'serving p50':>12}{'p99 s':>8}{'max s':>8}{'bytes/device/release':>24}")
    for name in fleets:
        label = "MQTT notification" if name == "mqtt" else f"polling every {args.poll:g} s"
        print(f"{label:<26}{pct(placed[name], 50):>14.2f}{pct(times[name], 50):>12.2f}{pct(times[name], 99):>8.2f}"
              f"{max(times[name]):>8.2f}"
              f"{statistics.median(sizes[name]):>24,.0f}")
    print(f"release files (model + golden + manifest + signature): {release:,} bytes")
    if broker is None:
        print("MQTT notification: skipped (mosquitto not installed)")
    print(f"loop fps, one device flat out: steady {statistics.median(steady):.0f}, second around a swap "
          f"{statistics.median(swap):.0f} ({statistics.median(swap) / statistics.median(steady):.2f}x); "
          f"longest frame gap steady {statistics.median(steady_gap):.1f} ms, around a swap "
          f"{statistics.median(swap_gap):.1f} ms")


if __name__ == "__main__":
    main()
