"""The dashboard's cost to the loop: fps with 0, 1 and 5 viewers reading the live view.

    python benchmarks/dashboard.py [--rounds 5] [--frames 200] [--models tests/data]

The SSD MobileNet model from tests/data on a 640x480 MJPG video of the kites photo panning by,
every frame of the file (Detector.stream, as `edgekit detect` runs a file), each result handed to a
Dashboard (what a cell with [dashboard] and `edgekit detect --serve` do). Viewers are HTTP clients
reading /stream.mjpg in processes of their own, started before the run. Conditions:

    off        no dashboard at all
    0 viewers  the dashboard serving, nobody looking (the baseline: ratio 1)
    1 viewer   one /stream.mjpg client
    5 viewers  five /stream.mjpg clients

Rounds are interleaved (each round runs every condition once, in a rotating order); fps is compared
as the median of each round's ratio to 0 viewers in that round. Target: 1 and 5 viewers >= 0.95x the
fps of 0 viewers on the 2-core machine. CPU time per frame of the loop's process (the encoding
happens in it) is printed beside (median ratio): on a machine shared with other jobs it is steadier
than fps. (2) then measures the dashboard alone: frames handed over at 30 fps without a model,
the process's CPU per second with 0, 1 and 5 viewers.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine_line, rotated  # noqa: E402

VIEWER = r"""
import signal, sys, time, urllib.request
frames, cpu0 = 0, None
def done(*_):  # frames received, and CPU seconds spent since the first one (not the start-up)
    print(frames, 0.0 if cpu0 is None else time.process_time() - cpu0, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, done)
url = sys.argv[1]
while True:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            while True:
                chunk = resp.read(65536)
                if not chunk:
                    break
                if cpu0 is None:
                    cpu0 = time.process_time()
                frames += chunk.count(b"--edgekitframe")
    except OSError:
        time.sleep(0.05)
"""


def make_video(path: Path, images: Path, frames: int) -> None:
    import cv2

    photo = cv2.imread(str(images / "kite_and_cold.jpg"))
    if photo is None:
        raise SystemExit(f"kite_and_cold.jpg not found in {images}")
    photo = cv2.resize(photo, (640, 480))
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (640, 480))
    for i in range(frames):
        writer.write(np.roll(photo, 5 * i, axis=1))
    writer.release()


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def run(model: Path, labels: Path, video: Path, viewers: int | None) -> tuple[float, float, float, int, int]:
    """One pass over the video; returns (fps, CPU ms per frame of this process, of the viewers' processes
    while they read, frames encoded, frames the viewers received)."""
    from edgekit.inspect.dashboard import Dashboard, DashboardConfig
    from edgekit.tasks import Detector, DetectorOptions

    with Detector(DetectorOptions(model=str(model), labels=str(labels), threshold=0.4)) as det:
        dash = Dashboard(DashboardConfig(port=0)).start() if viewers is not None else None
        procs = []
        try:
            if dash is not None:
                procs = [subprocess.Popen([sys.executable, "-c", VIEWER, f"{dash.url}/stream.mjpg"],
                                          stdout=subprocess.PIPE, text=True) for _ in range(viewers or 0)]
                deadline = time.monotonic() + 10
                while dash.state.viewers < len(procs) and time.monotonic() < deadline:
                    time.sleep(0.02)
            cpu0 = cpu_seconds(resource.RUSAGE_SELF)
            stream = det.stream(str(video))
            for result in stream:
                if dash is not None:
                    dash.observe(result)
            cpu = cpu_seconds(resource.RUSAGE_SELF) - cpu0
            fps, frames = stream.summary.fps, max(1, stream.summary.processed)
        finally:
            received, kids = 0, 0.0
            for p in procs:
                p.terminate()
                out, _ = p.communicate(timeout=10)
                got, spent = (out.split() + ["0", "0"])[:2]
                received, kids = received + int(got), kids + float(spent)
            encoded = dash.encoder.encoded if dash is not None else 0
            if dash is not None:
                dash.close()
    return fps, cpu * 1e3 / frames, kids * 1e3 / frames, encoded, received


def server_cost(images: Path, seconds: float = 3.0, rate: float = 30.0) -> None:
    """(2) The dashboard alone: frames handed over at ``rate`` fps (no model), CPU of this process per
    second with 0, 1 and 5 /stream.mjpg viewers (what the server's threads take from the loop)."""
    import cv2

    from edgekit.inspect.dashboard import Dashboard, DashboardConfig
    from edgekit.results import Detections, FrameResult
    from edgekit.sources.frames import Frame

    photo = cv2.resize(cv2.imread(str(images / "kite_and_cold.jpg")), (640, 480))
    dets = Detections(np.array([[40 + 60 * i, 100, 90 + 60 * i, 220] for i in range(8)], np.float32),
                      np.full(8, 0.8, np.float32), np.zeros(8, np.int32), ("person",) * 8)
    costs: dict[int, list[float]] = {0: [], 1: [], 5: []}
    for _ in range(3):
        for n in costs:
            with Dashboard(DashboardConfig(port=0)) as dash:
                procs = [subprocess.Popen([sys.executable, "-c", VIEWER, f"{dash.url}/stream.mjpg"],
                                          stdout=subprocess.PIPE, text=True) for _ in range(n)]
                while dash.state.viewers < n:
                    time.sleep(0.01)
                c0, t0, i = cpu_seconds(resource.RUSAGE_SELF), time.perf_counter(), 0
                while time.perf_counter() - t0 < seconds:
                    now = time.perf_counter()
                    dash.observe(FrameResult(i, time.time(), now, 5.0, dets,
                                             captured=Frame(i, photo, now, time.time(), 1.0, bgr=True)))
                    i += 1
                    time.sleep(max(0.0, t0 + i / rate - time.perf_counter()))
                costs[n].append((cpu_seconds(resource.RUSAGE_SELF) - c0) / seconds * 1e3)
                for p in procs:
                    p.terminate()
                    p.communicate(timeout=10)
    base = statistics.median(costs[0])
    print(f"\n(2) the dashboard alone, 640x480 frames handed over at {rate:g} fps (no model), max_fps 5, "
          "median of 3 rounds: CPU of the process per second")
    for n, values in costs.items():
        extra = statistics.median(values) - base
        print(f"  {n} viewer(s): {statistics.median(values):6.1f} ms/s ({extra:+.1f} ms/s against none: "
              f"{extra / 20:.2f} % of the 2 cores)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--models", type=Path, default=ROOT / "tests" / "data")
    ap.add_argument("--images", type=Path, default=ROOT / "tests" / "data")
    args = ap.parse_args()
    model, labels = args.models / "ssd_mobilenet_v1_coco_quant.tflite", args.models / "coco_labels.txt"
    if not model.is_file():
        raise SystemExit(f"{model} not found (pass --models)")
    print(machine_line())
    conditions: list[tuple[str, int | None]] = [("off", None), ("0 viewers", 0), ("1 viewer", 1), ("5 viewers", 5)]
    fps: dict[str, list[float]] = {name: [] for name, _ in conditions}
    encoded: dict[str, list[int]] = {name: [] for name, _ in conditions}
    cpu: dict[str, list[float]] = {name: [] for name, _ in conditions}
    kids: dict[str, list[float]] = {name: [] for name, _ in conditions}
    received: dict[str, list[int]] = {name: [] for name, _ in conditions}
    with tempfile.TemporaryDirectory() as tmp:
        video = Path(tmp) / "pan.avi"
        make_video(video, args.images, args.frames)
        run(model, labels, video, None)  # warm-up: file cache, interpreter
        for r in range(args.rounds):
            for name, viewers in rotated(conditions, r):
                f, c, k, e, got = run(model, labels, video, viewers)
                fps[name].append(f)
                cpu[name].append(c)
                kids[name].append(k)
                encoded[name].append(e)
                received[name].append(got)
            print(f"round {r + 1}: " + ", ".join(f"{n} {fps[n][-1]:.1f}" for n, _ in conditions) + " fps", flush=True)
    cpu_base = statistics.median(cpu["0 viewers"])
    print(f"\nSSD MobileNet v1 int8, 640x480 MJPG, {args.frames} frames, every frame of the file; "
          f"median of {args.rounds} interleaved rounds")
    print(f"{'condition':<10} {'fps':>7} {'ratio':>7} {'rounds (ratio in the round)':<44} {'CPU ms/frame':>12} {'ratio':>6} "
          f"{'viewers CPU':>11} {'encoded':>8} {'received':>9}")
    for name, _ in conditions:
        med = statistics.median(fps[name])
        paired = [v / b for v, b in zip(fps[name], fps["0 viewers"])]  # against 0 viewers in the same round
        rounds = " ".join(f"{v:.2f}" for v in paired)
        c = statistics.median(cpu[name])
        print(f"{name:<10} {med:7.1f} {statistics.median(paired):7.3f} {rounds:<44} {c:12.2f} {c / cpu_base:6.3f} "
              f"{statistics.median(kids[name]):11.2f} {statistics.median(encoded[name]):8.0f} "
              f"{statistics.median(received[name]):9.0f}")
    worst = min(statistics.median([v / b for v, b in zip(fps[n], fps["0 viewers"])]) for n in ("1 viewer", "5 viewers"))
    print(f"\nviewers against none: {worst:.3f}x the fps at worst (target >= 0.95: "
          f"{'met' if worst >= 0.95 else 'NOT met'}); CPU per frame of the loop's process "
          f"{max(statistics.median(cpu[n]) for n in ('1 viewer', '5 viewers')) / cpu_base:.3f}x at worst "
          "(viewers' own CPU, in ms per loop frame, beside it)")
    server_cost(args.images)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
