"""Per-part inspection: what tracking costs, whether parts are counted and judged right, how fast a
reject reaches the PLC.

    python benchmarks/parts.py [--demo edgekit-demo] [--rounds 31] [--repeat 2] [--seeds 11-15] [--size 320] [--fps 15]
                               [--only cost|demo|cell|belts|modbus]

(1) Tracking cost: ByteTracker.update and PartInspector.update per frame on generated boxes
    (5, 10, 20 objects), median microseconds.
(2) On the demo's belt video with its int8 model (run `edgekit demo` first; --demo names its
    folder): the seven parts' verdicts against the video's truth and the time from the crossing
    frame's capture to the coil write (p50/p99). Then Detector.stream alone (off) against
    Detector.stream + PartInspector + a Rejector writing coils to a local pymodbus server (on),
    on the demo video --repeat times over in one file (a run of a second or more), in --rounds
    interleaved rounds of alternating order; the median of the rounds' on/off fps ratios, target
    >= 0.95, with the process CPU per frame beside it and the load average (other processes take
    the cores too: the ratio moves with the load, the CPU per frame less).
(2b) The same as `edgekit inspect` runs it: the demo's inspection.toml (per-frame rules, [parts] and
    [line]) against that config without [parts] and [line] (per-frame mode), in interleaved rounds.
(3) Count error and verdict accuracy on belt videos the demo's generator makes with other seeds
    (--seeds), belt speeds (4, 8, 12 px/frame) and spacings (spaced, close, touching), defect mixes
    (--defect-share), parts entering side by side (--abreast), frame sizes (--size) and rates (--fps),
    through the same int8 model; each clip is scored up to a moment no part is crossing, verdicts paired with
    the true parts by crossing frame (missed and extra parts counted apart); verdicts right and reasons right
    (exactly the part's defects).
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
import time
from pathlib import Path

import numpy as np

from edgekit.demo.conveyor import make_video
from edgekit.demo.scene import CLASS_NAMES, PART
from edgekit.inspect.parts import PartInspector, PartsOptions
from edgekit.inspect.parts.report import crossing_truth, score_parts
from edgekit.inspect.plc import ModbusOutput, ModbusTarget, Rejector
from edgekit.results import Detections
from edgekit.runtimes.timing import machine_line
from edgekit.track import ByteTracker, CountingLine

DEFECTS = CLASS_NAMES[1:]
SIZE = 320  # the demo's and the generated belts' frame side


def _serve_modbus(port: int) -> None:
    """pymodbus' own TCP server on 127.0.0.1:``port``, until killed (run in its own process)."""
    from pymodbus.server import ModbusTcpServer
    from pymodbus.simulator import DataType, SimData, SimDevice

    logging.getLogger("pymodbus").setLevel(logging.CRITICAL)
    bits, regs = [SimData(0, count=16, datatype=DataType.BITS)], [SimData(0, count=16, datatype=DataType.REGISTERS)]

    async def serve() -> None:
        await ModbusTcpServer(SimDevice(1, simdata=(bits, bits, regs, regs)),
                              address=("127.0.0.1", port)).serve_forever()

    asyncio.run(serve())


def modbus_server() -> tuple[int, object]:
    """pymodbus' own TCP server on 127.0.0.1 in its own process (the PLC's work is not the loop's:
    its CPU stays out of the process CPU figures); returns its port and a stop function."""
    import multiprocessing

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = multiprocessing.get_context("spawn").Process(target=_serve_modbus, args=(port,), daemon=True)
    proc.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)

    def stop() -> None:
        proc.terminate()
        proc.join(5)

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


def run_video(model: Path, video: Path, *, parts: bool, port: int | None = None, until: int | None = None,
              size: int = SIZE):
    """One pass over a video (its first ``until`` frames); returns (fps, verdicts, reject latencies ms,
    process CPU ms per frame)."""
    from edgekit.sources import VideoSource
    from edgekit.tasks import Detector, DetectorOptions

    # Per-part mode keeps the weak boxes ByteTrack needs (the cell lowers the threshold the same way).
    with Detector(DetectorOptions(model=str(model), threshold=0.1 if parts else 0.4)) as det:
        inspector = PartInspector(PartsOptions(parts=("part",), defects=DEFECTS, defect_threshold=0.4),
                                  CountingLine((size // 2, 0), (size // 2, size), direction="left_to_right"))
        rejector = Rejector([ModbusOutput(ModbusTarget("127.0.0.1", port=port, address=1, pulse=0))]) \
            if parts and port else None
        if rejector:
            rejector.start()
        verdicts, n = [], 0
        t0, c0 = time.perf_counter(), time.process_time()
        for r in det.stream(VideoSource(str(video))):
            if until is not None and r.index >= until:
                break
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


def repeated(video: Path, out: Path, times: int) -> Path:
    """The video's frames ``times`` over in one MJPG file: runs long enough to time (the demo's 300
    frames take a fraction of a second)."""
    import cv2

    cap = cv2.VideoCapture(str(video))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    fps = cap.get(cv2.CAP_PROP_FPS) or 15.0
    cap.release()
    writer = cv2.VideoWriter(str(out), cv2.VideoWriter_fourcc(*"MJPG"), fps, (frames[0].shape[1], frames[0].shape[0]))
    for _ in range(times):
        for frame in frames:
            writer.write(frame)
    writer.release()
    return out


def demo_video(demo: Path, rounds: int, repeat: int, port: int) -> None:
    model, video = demo / "detector_int8.tflite", demo / "belt.avi"
    if not model.exists():
        print(f"(2)(3) skipped: no {model}; run `edgekit demo --out {demo}` first")
        return
    with tempfile.TemporaryDirectory() as tmp:
        truth = make_video(Path(tmp) / "belt.avi", n_frames=300, fps=15.0, seed=0)  # the demo's own video
        expected = crossing_truth(truth.frames, part_class=PART, line_x=truth.size / 2,
                                  defects={p.part_id: p.defects for p in truth.parts})
        _, verdicts, lat, _ = run_video(model, video, parts=True, port=port)
        score = score_parts(verdicts, expected)
        long = repeated(video, Path(tmp) / "long.avi", repeat)
        load0 = os.getloadavg()[0]
        off, on, ratios, cpu_off, cpu_on, cpu_ratios = [], [], [], [], [], []
        for k in range(rounds):  # interleaved, the order alternating so a drift in load favours neither
            for parts in ((False, True) if k % 2 == 0 else (True, False)):
                fps, _, latencies, cpu = run_video(model, long, parts=parts, port=port if parts else None)
                (on if parts else off).append(fps)
                (cpu_on if parts else cpu_off).append(cpu)
                lat += latencies
            ratios.append(on[-1] / off[-1])
            cpu_ratios.append(cpu_off[-1] / cpu_on[-1])
        q1, q3 = np.percentile(ratios, [25, 75])
        c1, c3 = np.percentile(cpu_ratios, [25, 75])
        print(f"(2) demo belt video ({video}, {repeat}x in one file), int8 model, {rounds} interleaved rounds "
              f"(load average {load0:.2f} -> {os.getloadavg()[0]:.2f})")
        print(f"    detect only {statistics.median(off):7.1f} fps   + tracking, parts, rejects "
              f"{statistics.median(on):7.1f} fps   on/off {statistics.median(ratios):.3f} (median of the rounds' "
              f"ratios; quartiles {q1:.3f}-{q3:.3f}; target >= 0.95)")
        print(f"    process CPU per frame: {statistics.median(cpu_off):.3f} ms off, {statistics.median(cpu_on):.3f} ms "
              f"on; off/on {statistics.median(cpu_ratios):.3f} (median of the rounds'; quartiles {c1:.3f}-{c3:.3f})")
        print(f"    parts: {score.counted} counted of {score.expected}, {score.right} verdicts right "
              f"({'exact' if score.exact else 'NOT exact'}): " + " ".join(v.outcome.value for v in verdicts))
        print(f"    crossing frame captured -> coil written: p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms "
              f"({len(lat)} rejects; includes the loop's capture-to-result time)")


def cell_modes(demo: Path, rounds: int, repeat: int) -> None:
    """`edgekit inspect` as users run it: the demo's inspection.toml (per-frame rules, a [parts] table and a
    line) against the same config without [parts] and [line] (per-frame mode), on the demo video."""
    from edgekit.inspect import Cell, load_config

    config = demo / "inspection.toml"
    if not config.exists():
        print(f"(2b) skipped: no {config}; run `edgekit demo --out {demo}` first")
        return
    text = config.read_text()
    if not all(k in text for k in ('path = "belt.avi"', 'path = "detector_int8.tflite"', "\n[parts]")):
        print(f"(2b) skipped: {config} is not the config `edgekit demo` writes (its video, model and [parts])")
        return
    with tempfile.TemporaryDirectory() as tmp:
        long = repeated(demo / "belt.avi", Path(tmp) / "long.avi", repeat)
        text = text.replace('path = "belt.avi"', f'path = "{long}"').replace(
            "realtime = true", "realtime = false").replace(
            'path = "detector_int8.tflite"', f'path = "{demo / "detector_int8.tflite"}"')
        texts = {"frame": text.split("\n[parts]")[0], "part": text}  # [parts] and [line] come last
        runs: dict[str, list[tuple[float, float]]] = {"frame": [], "part": []}
        for k in range(rounds):
            for mode in (("frame", "part") if k % 2 == 0 else ("part", "frame")):
                folder = Path(tmp) / f"{mode}-{k}"
                folder.mkdir()
                (folder / "inspection.toml").write_text(texts[mode])
                c0 = time.process_time()
                with Cell.from_config(load_config(folder / "inspection.toml")) as cell:
                    for _ in cell.run():
                        pass
                    summary = cell.summary
                runs[mode].append((summary.fps, (time.process_time() - c0) * 1e3 / max(summary.processed, 1)))
    ratios = [p[0] / f[0] for p, f in zip(runs["part"], runs["frame"])]
    q1, q3 = np.percentile(ratios, [25, 75])
    fps = {m: statistics.median(r[0] for r in rows) for m, rows in runs.items()}
    cpu = {m: statistics.median(r[1] for r in rows) for m, rows in runs.items()}
    print(f"(2b) `edgekit inspect` on the demo video ({repeat}x), its inspection.toml with and without [parts] and "
          f"[line], {rounds} interleaved rounds: per-frame {fps['frame']:.0f} fps, per-part {fps['part']:.0f} fps, "
          f"ratio {statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f}); process CPU per frame "
          f"{cpu['frame']:.3f} and {cpu['part']:.3f} ms")


SPACINGS = {"spaced": (0.1, 0.45), "close": (0.02, 0.08), "touching": (0.0, 0.02)}


def quiet_end(crossings: list[int], n_frames: int) -> int:
    """The last frame count at which no part is crossing (none from 4 frames before to 2 after, all
    within the clip, whose truth ends with it): a part crossing near a clip's end is judged a frame or
    two from its truth, so the clip is scored up to a quiet moment."""
    return max(e for e in range(n_frames // 2, n_frames - 1) if not any(e - 4 <= c < e + 2 for c in crossings))


def other_belts(demo: Path, frames: int, seeds: list[int], speeds: list[float], *, defect_share: float = 0.5,
                abreast: float = 0.0, size: int = SIZE, fps: float = 15.0) -> None:
    model = demo / "detector_int8.tflite"
    if not model.exists():
        return
    within = max(8, round(8 * fps / 15))
    print(f"(3) generated belt videos ({frames} frames, {size}x{size}, {fps:g} fps, line at x = {size // 2}; defective parts "
          f"{defect_share:.0%}, places with two parts abreast {abreast:.0%}) through the int8 model; "
          f"verdicts paired with the truth by crossing frame (within {within})")
    print("    seed  speed px/f  spacing    parts  counted  missed  extra  verdicts right  reasons right")
    totals = {"err": 0, "missed": 0, "extra": 0, "right": 0, "reasons": 0, "parts": 0, "belts": 0, "exact": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for speed in speeds:
                for name, gap in SPACINGS.items():
                    truth = make_video(Path(tmp) / "b.avi", n_frames=frames, fps=fps, seed=seed, speed=speed,
                                       gap=gap, defect_share=defect_share, abreast=abreast, size=size)
                    expected = crossing_truth(truth.frames, part_class=PART, line_x=size // 2,
                                              defects={p.part_id: p.defects for p in truth.parts})
                    end = quiet_end([p.crossed_frame for p in expected], frames)
                    expected = [p for p in expected if p.crossed_frame < end]
                    _, verdicts, _, _ = run_video(model, Path(tmp) / "b.avi", parts=True, until=end, size=size)
                    s = score_parts(verdicts, expected, within=within)
                    for key, value in (("err", abs(s.count_error)), ("missed", s.missed), ("extra", s.extra),
                                       ("right", s.right), ("reasons", s.reasons_right), ("parts", s.expected),
                                       ("belts", 1),
                                       ("exact", int(s.missed == s.extra == 0))):
                        totals[key] += value
                    print(f"    {seed:4d}  {speed:10.1f}  {name:9s}  {s.expected:5d}  {s.counted:7d}  {s.missed:6d}  "
                          f"{s.extra:5d}  {s.right:5d}/{s.expected}  {s.reasons_right:8d}/{s.expected}")
    t = totals
    print(f"    total: {t['belts']} belts, {t['parts']} parts; count error {t['err']} (sum of |counted - parts|), "
          f"{t['missed']} missed and {t['extra']} extra; {t['exact']} belts counted exactly; verdicts right "
          f"{t['right']}/{t['parts']} ({100 * t['right'] / max(t['parts'], 1):.1f} %), reasons right (exactly the "
          f"part's defects) {t['reasons']}/{t['parts']} ({100 * t['reasons'] / max(t['parts'], 1):.1f} %)")


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
    ap.add_argument("--rounds", type=int, default=31, help="interleaved on/off rounds in (2)")
    ap.add_argument("--repeat", type=int, default=2, help="the demo video this many times over per run in (2)")
    ap.add_argument("--frames", type=int, default=200, help="frames of each generated belt video in (3)")
    ap.add_argument("--seeds", default="11-15", help="belt seeds in (3): 11-15 or 1,2,3 (1-10 were used "
                                                     "while tuning the tracker's belt settings)")
    ap.add_argument("--speeds", default="4,8,12", help="belt speeds in (3), pixels per frame")
    ap.add_argument("--defect-share", type=float, default=0.5, help="chance that a part of (3) has defects")
    ap.add_argument("--abreast", type=float, default=0.0,
                    help="share of places in (3) where two parts ride side by side, entering together")
    ap.add_argument("--size", type=int, default=SIZE, help="frame side of the belt videos in (3), pixels (the "
                                                          "demo's model takes 160: 480 is a 3x shrink)")
    ap.add_argument("--fps", type=float, default=15.0, help="frame rate of the belt videos in (3)")
    ap.add_argument("--only", choices=["cost", "demo", "cell", "belts", "modbus"], help="run one part")
    args = ap.parse_args()
    lo, _, hi = args.seeds.partition("-")
    seeds = list(range(int(lo), int(hi) + 1)) if hi else [int(v) for v in args.seeds.split(",")]
    speeds = [float(v) for v in args.speeds.split(",")]
    print(machine_line())
    if args.only in (None, "cost"):
        tracking_cost()
    port, stop = modbus_server()
    try:
        if args.only in (None, "demo"):
            demo_video(args.demo, args.rounds, args.repeat, port)
        if args.only in (None, "cell"):
            cell_modes(args.demo, max(5, args.rounds // 3), args.repeat)
        if args.only in (None, "belts"):
            other_belts(args.demo, args.frames, seeds, speeds, defect_share=args.defect_share, abreast=args.abreast,
                        size=args.size, fps=args.fps)
        if args.only in (None, "modbus"):
            modbus_latency(port)
    finally:
        stop()
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
