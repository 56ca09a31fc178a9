"""Per-part inspection: what tracking costs, whether parts are counted and judged right, how fast a
reject reaches the PLC.

    python benchmarks/parts.py [--demo edgekit-demo] [--rounds 5] [--frames 200]

(1) Tracking cost: ByteTracker.update and PartInspector.update per frame on generated boxes
    (5, 10, 20 objects), median microseconds.
(2) On the demo's belt video with its int8 model (run `edgekit demo` first; --demo names its
    folder): Detector.stream alone (off) against Detector.stream + PartInspector + a Rejector
    writing coils to a local pymodbus server (on), rounds interleaved, median fps; target on/off
    >= 0.95. The seven parts' verdicts against the video's truth, and the time from the crossing
    frame's capture to the coil write (p50/p99) inside that loop.
(3) Count error and verdict accuracy on belt videos the demo's generator makes with other seeds,
    belt speeds and spacing (parts touching), through the same int8 model.
(4) Line crossing to Modbus coil write alone: a verdict handed to the Rejector (delay 0) until
    pymodbus' server has the coil, p50/p99 over 200 rejects.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from edgekit.demo.conveyor import make_video
from edgekit.demo.scene import CLASS_NAMES, PART
from edgekit.inspect.parts import PartInspector, PartsOptions
from edgekit.inspect.partsreport import crossing_truth, score_parts
from edgekit.inspect.plc import ModbusOutput, ModbusTarget, Rejector
from edgekit.results import Detections
from edgekit.track import ByteTracker, CountingLine

DEFECTS = CLASS_NAMES[1:]


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def modbus_server() -> tuple[int, object]:
    """pymodbus' own TCP server on 127.0.0.1 (a thread); returns its port and a stop function."""
    from pymodbus.server import ModbusTcpServer
    from pymodbus.simulator import DataType, SimData, SimDevice

    logging.getLogger("pymodbus").setLevel(logging.CRITICAL)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    bits, regs = [SimData(0, count=16, datatype=DataType.BITS)], [SimData(0, count=16, datatype=DataType.REGISTERS)]
    loop, holder = asyncio.new_event_loop(), {}

    async def serve() -> None:
        holder["server"] = ModbusTcpServer(SimDevice(1, simdata=(bits, bits, regs, regs)), address=("127.0.0.1", port))
        await holder["server"].serve_forever()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.02)

    def stop() -> None:
        asyncio.run_coroutine_threadsafe(holder["server"].shutdown(), loop).result(5)
        thread.join(5)

    return port, stop


def generated(n_objects: int, frames: int = 300, seed: int = 0) -> list[Detections]:
    rng = np.random.default_rng(seed)
    starts = rng.uniform(-600, 0, n_objects)
    ys = rng.uniform(0, 400, n_objects)
    out = []
    for t in range(frames):
        x = starts + 4 * t
        parts = np.stack([x, ys, x + 60, ys + 50], 1) + rng.normal(0, 1, (n_objects, 4))
        defects = parts[: n_objects // 2] + [10, 10, -30, -20]
        boxes = np.concatenate([parts, defects])
        ids = np.r_[np.zeros(n_objects, int), np.ones(len(defects), int)]
        out.append(Detections(boxes, rng.uniform(0.5, 0.95, len(boxes)), ids, tuple(CLASS_NAMES[i] for i in ids)))
    return out


def tracking_cost() -> None:
    print("(1) tracking cost per frame (median of 300 frames, generated boxes)")
    print("    objects  ByteTracker.update  PartInspector.update (parts + defects)")
    for n in (5, 10, 20):
        frames = generated(n)
        tracker = ByteTracker()
        t_track = []
        for d in frames:
            t0 = time.perf_counter()
            tracker.update(d[d.class_ids == 0])
            t_track.append(time.perf_counter() - t0)
        inspector = PartInspector(PartsOptions(parts=("part",), defects=DEFECTS), CountingLine((320, 0), (320, 480)))
        t_parts = []
        for i, d in enumerate(frames):
            t0 = time.perf_counter()
            inspector.update(d, frame=i, timestamp=0.0, captured_at=0.0)
            t_parts.append(time.perf_counter() - t0)
        print(f"    {n:7d}  {statistics.median(t_track) * 1e6:15.0f} us  {statistics.median(t_parts) * 1e6:15.0f} us")


def run_video(model: Path, video: Path, truth, *, parts: bool, port: int | None = None, threads: int | None = None):
    """One pass over a video; returns (fps, verdicts, reject latencies ms, process CPU ms per frame)."""
    from edgekit.sources import VideoSource
    from edgekit.tasks import Detector, DetectorOptions

    size = truth.size
    with Detector(DetectorOptions(model=str(model), threshold=0.1 if parts else 0.4, num_threads=threads)) as det:
        inspector = PartInspector(PartsOptions(parts=("part",), defects=DEFECTS, defect_threshold=0.4),
                                  CountingLine((size // 2, 0), (size // 2, size), direction="left_to_right"))
        rejector = Rejector([ModbusOutput(ModbusTarget("127.0.0.1", port=port, address=1, pulse=0))]) \
            if parts and port else None
        if rejector:
            rejector.start()
        verdicts, n = [], 0
        t0, c0 = time.perf_counter(), time.process_time()
        for r in det.stream(VideoSource(str(video))):
            n += 1
            if parts:
                for v in inspector.update(r.detections, frame=r.index, timestamp=r.timestamp,
                                          captured_at=r.capture_ts, image_bgr=r.frame_bgr).verdicts:
                    verdicts.append(v)
                    if rejector and not v.passed:
                        rejector.reject(v.sequence, v.track_id, v.captured_at)
        fps, cpu_ms = n / (time.perf_counter() - t0), (time.process_time() - c0) * 1e3 / max(n, 1)
        latencies = []
        if rejector:
            rejector.close()
            latencies = list(rejector.latencies_ms)
    return fps, verdicts, latencies, cpu_ms


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def demo_video(demo: Path, rounds: int, port: int) -> None:
    model, video = demo / "detector_int8.tflite", demo / "belt.avi"
    if not model.exists():
        print(f"(2)(3) skipped: no {model}; run `edgekit demo --out {demo}` first")
        return
    with tempfile.TemporaryDirectory() as tmp:
        truth = make_video(Path(tmp) / "belt.avi", n_frames=300, fps=15.0, seed=0)  # the demo's own video
        expected = crossing_truth(truth.frames, part_class=PART, line_x=truth.size / 2,
                                  defects={p.part_id: p.defects for p in truth.parts})
        off, on, lat, cpu_off, cpu_on = [], [], [], [], []
        for _ in range(rounds):
            fps, _, _, cpu = run_video(model, video, truth, parts=False)
            off.append(fps)
            cpu_off.append(cpu)
            fps, verdicts, latencies, cpu = run_video(model, video, truth, parts=True, port=port)
            on.append(fps)
            cpu_on.append(cpu)
            lat += latencies
        score = score_parts(verdicts, expected)
        print(f"(2) demo belt video ({video}), int8 model, {rounds} interleaved rounds, median fps")
        print(f"    detect only {statistics.median(off):7.1f} fps   + tracking, parts, rejects "
              f"{statistics.median(on):7.1f} fps   on/off {statistics.median(on) / statistics.median(off):.3f} "
              "(target >= 0.95)")
        print(f"    process CPU per frame: {statistics.median(cpu_off):.2f} ms off, "
              f"{statistics.median(cpu_on):.2f} ms on; off/on "
              f"{statistics.median(cpu_off) / statistics.median(cpu_on):.3f} (about the fps ratio of a machine "
              "running nothing else: the loop keeps the cores busy)")
        print(f"    parts: {score.counted} counted of {score.expected}, {score.right} verdicts right "
              f"({'exact' if score.exact else 'NOT exact'}): "
              + " ".join(v.outcome.value for v in verdicts))
        print(f"    crossing frame captured -> coil written: p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms "
              f"({len(lat)} rejects; includes the loop's capture-to-result time)")


def other_belts(demo: Path, frames: int) -> None:
    model = demo / "detector_int8.tflite"
    if not model.exists():
        return
    print(f"(3) generated belt videos ({frames} frames, 320x320, 15 fps) through the int8 model")
    print("    seed  speed px/f  spacing    parts  counted  count error  verdicts right")
    total_err, total_right, total = 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (1, 2, 3):
            for speed in (320 / 60, 320 / 40):
                for name, gap in (("normal", (0.1, 0.45)), ("touching", (0.0, 0.02))):
                    truth = make_video(Path(tmp) / "b.avi", n_frames=frames, fps=15.0, seed=seed, speed=speed,
                                       gap=gap)
                    expected = crossing_truth(truth.frames, part_class=PART, line_x=160,
                                              defects={p.part_id: p.defects for p in truth.parts})
                    _, verdicts, _, _ = run_video(model, Path(tmp) / "b.avi", truth, parts=True)
                    s = score_parts(verdicts, expected)
                    total_err += abs(s.count_error)
                    total_right += s.right
                    total += s.expected
                    print(f"    {seed:4d}  {speed:10.1f}  {name:9s}  {s.expected:5d}  {s.counted:7d}  "
                          f"{s.count_error:+11d}  {s.right:5d}/{s.expected}")
    print(f"    total: count error {total_err} (sum of |errors|), verdicts right {total_right}/{total} "
          f"({100 * total_right / max(total, 1):.1f} %)")


def modbus_latency(port: int, n: int = 200) -> None:
    rejector = Rejector([ModbusOutput(ModbusTarget("127.0.0.1", port=port, address=2, pulse=0))]).start()
    for i in range(n):
        rejector.reject(i + 1, i + 1, time.perf_counter())
        time.sleep(0.01)
    rejector.close()
    lat = list(rejector.latencies_ms)
    print(f"(4) verdict -> Modbus coil written (pymodbus server on 127.0.0.1, delay 0, {len(lat)} rejects): "
          f"p50 {pct(lat, 50):.2f} ms, p99 {pct(lat, 99):.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", type=Path, default=Path("edgekit-demo"), help="the folder `edgekit demo` wrote")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--frames", type=int, default=200, help="frames of each generated belt video in (3)")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load average {load:.2f} at start")
    tracking_cost()
    port, stop = modbus_server()
    try:
        demo_video(args.demo, args.rounds, port)
        other_belts(args.demo, args.frames)
        modbus_latency(port)
    finally:
        stop()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
