"""Where the frame time of `edgekit detect`'s loop goes: per step of a frame, per thread.

    python benchmarks/loop_stages.py [-m MODEL] [--frames 150] [--rates 0,30]

For each rate (0: every frame of the file, flat out, on one interpreter and then on the
THROUGHPUT workers, where only stage medians and CPU are shown; else the file played like a camera), runs
Detector.stream on a 640x480 MJPG video and stamps each frame on its way (time.perf_counter):
due/captured -> taken by the inference thread -> decoded (MJPG) -> preprocessed -> inferred ->
results decoded -> in the caller's hands. Prints the median of each step, the CPU time each
thread used per frame (from /proc/self/task, Linux), and the bare invoke time of the same
interpreter when invoked back to back and when invoked once per camera period (a pool of
XNNPACK threads that sleeps between frames has to be woken).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loop import DATA, make_video  # noqa: E402

from edgekit.runtimes import load_model  # noqa: E402
from edgekit.runtimes.timing import machine_line  # noqa: E402
from edgekit.sources import VideoSource, parse_source  # noqa: E402
from edgekit.sources.readers import open_reader  # noqa: E402
from edgekit.tasks import Detector  # noqa: E402


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process by name (Linux; {} elsewhere)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    names = _names()
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = names.get(tid) or stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[f"{name}:{tid}"] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _names() -> dict[str, str]:
    """Python's names of this process's threads by native id (the others are XNNPACK's, OpenCV's)."""
    import threading

    return {str(t.native_id): t.name for t in threading.enumerate()}


def invoke_gaps(path: str, threads: int, period: float, n: int) -> tuple[float, float]:
    """Median invoke ms of a fresh interpreter: back to back, and once every ``period`` s."""
    m = load_model(path, num_threads=threads)
    try:
        m.input_view()[...] = 0
        for _ in range(5):
            m.invoke()
        res = []
        for gap in (0.0, period):
            ts = []
            for _ in range(n):
                if gap:
                    time.sleep(gap)
                t0 = time.perf_counter()
                m.invoke()
                ts.append((time.perf_counter() - t0) * 1e3)
            res.append(float(np.median(ts)))
        return res[0], res[1]
    finally:
        m.close()


def stamped_run(det: Detector, video: Path, fps: float | None,
                performance: str = "latency") -> tuple[dict[str, float], dict[str, float], int]:
    """Median ms of each step (from the frame's capture) and CPU ms per frame of each thread.
    ``performance`` other than latency (a file on two workers): the loop's own stage medians only."""
    decodes: list[tuple[float, float]] = []  # (taken, decoded), in the order frames were decoded
    writes: list[tuple[float, float]] = []
    infers: list[tuple[float, float]] = []
    grabs: list[float] = []
    grabbed: list[float] = []  # when the frame being decoded was grabbed (a live source)
    cpu: dict[str, float] = {}

    def opener(spec):  # type: ignore[no-untyped-def]
        reader = open_reader(spec)
        retrieve, read, grab = getattr(reader, "retrieve", None), reader.read, getattr(reader, "grab", None)
        if grab is not None:
            def timed_grab():  # type: ignore[no-untyped-def]
                ok = grab()
                grabs[-1:] = [time.perf_counter()]  # the newest grabbed frame's
                return ok
            reader.grab = timed_grab
        if retrieve is not None:
            def timed_retrieve():  # type: ignore[no-untyped-def]
                t0 = time.perf_counter()
                grabbed.append(grabs[-1] if grabs else t0)
                image = retrieve()
                decodes.append((t0, time.perf_counter()))
                return image
            reader.retrieve = timed_retrieve
        def timed_read():  # type: ignore[no-untyped-def]
            t0 = time.perf_counter()
            image = read()
            decodes.append((t0, time.perf_counter()))
            return image
        reader.read = timed_read
        return reader

    engine = det._engine
    write, infer = engine.write, engine.infer

    def timed_write(image, dest=None, *, bgr=False):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        t = write(image, dest, bgr=bgr)
        writes.append((t0, time.perf_counter()))
        return t

    def timed_infer():  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        out = infer()
        infers.append((t0, time.perf_counter()))
        return out

    decode = engine.decode
    results: list[tuple[float, float]] = []

    def timed_decode(outputs, transform):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        out = decode(outputs, transform)
        results.append((t0, time.perf_counter()))
        return out

    engine.write, engine.infer, engine.decode = timed_write, timed_infer, timed_decode
    spec = parse_source(video, realtime=fps is not None, fps=fps)
    stream = det.stream(VideoSource(spec, opener=opener), performance=performance)
    cpu0 = thread_cpu()
    cpu1: dict[str, float] = {}
    rows = []
    try:
        with stream:
            for r in stream:
                rows.append((r.capture_ts, time.perf_counter(), r.latency_ms, r.stages))
                if len(rows) % 10 == 0:  # threads that have ended are gone from /proc: sample while they run
                    cpu1 = thread_cpu()
    finally:
        engine.write, engine.infer, engine.decode = write, infer, decode
    n = max(1, len(rows) // 10 * 10)
    cpu = {k: (cpu1[k] - cpu0.get(k, 0.0)) * 1e3 / n for k in cpu1 if cpu1[k] - cpu0.get(k, 0.0) > 0}
    if performance != "latency":
        return {f"{k} p50": v for k, v in stream.summary.stages_p50_ms.items()}, cpu, len(rows)
    if fps is None:  # every frame is decoded; a file read ahead: times from when it was decoded
        starts = [d[1] for d in decodes[:len(rows)]]
    else:  # frames fall due on the camera's clock; only those taken are decoded
        starts = [row[0] for row in rows]
    k = min(len(rows), len(decodes), len(writes), len(infers), len(results))
    marks = {**({"grabbed": [grabbed[i] - starts[i] for i in range(k)]} if fps and grabbed else {}),
             "decode began": [decodes[i][0] - starts[i] for i in range(k)],
             "decoded": [decodes[i][1] - starts[i] for i in range(k)],
             "preprocess began": [writes[i][0] - starts[i] for i in range(k)],
             "preprocessed": [writes[i][1] - starts[i] for i in range(k)],
             "invoke began": [infers[i][0] - starts[i] for i in range(k)],
             "inferred": [infers[i][1] - starts[i] for i in range(k)],
             "results decode began": [results[i][0] - starts[i] for i in range(k)],
             "results decoded": [results[i][1] - starts[i] for i in range(k)],
             "caller has it": [rows[i][1] - starts[i] for i in range(k)]}
    steps = {name: float(np.median(v)) * 1e3 for name, v in marks.items()}
    steps["invoke"] = float(np.median([b - a for a, b in infers[:k]])) * 1e3
    steps["latency p50"] = float(np.median([row[2] for row in rows]))
    return steps, cpu, len(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=str(DATA / "ssd_mobilenet_v1_coco_quant.tflite"))
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--rates", default="0,30", help="0: flat out; else camera frame rates")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp, Detector.create_from_model_path(
            args.model, num_threads=args.threads, warmup=5) as det:
        video = make_video(Path(tmp) / "pan.avi", args.frames, 30.0)
        print(f"model {Path(args.model).name}, {det.model.num_threads} threads; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        for th in (1, 2):
            back, gapped = invoke_gaps(args.model, th, 1 / 30, 60)
            print(f"bare invoke, {th} thread(s): back to back {back:.2f} ms, once per 33 ms {gapped:.2f} ms")
        runs = [(float(r), "latency") for r in args.rates.split(",") if r]
        runs += [(0.0, "auto")] if any(r == 0 for r, _ in runs) else []
        for rate, perf in runs:
            steps, cpu, n = stamped_run(det, video, rate or None, perf)
            print(f"\n{'flat out' if not rate else f'{rate:.0f} fps camera'}, performance {perf}: {n} frames")
            print("  ms " + ("(stage medians)" if perf != "latency" else "after decoding" if not rate
                           else "after falling due") + ": "
                  + ", ".join(f"{k} {v:.2f}" for k, v in steps.items()))
            print("  CPU ms per frame by thread: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(cpu.items())))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
