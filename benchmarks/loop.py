"""The pipelined loop of `edgekit detect` against the usual serial loop, on one model and video.

    python benchmarks/loop.py [-m MODEL] [--frames 150] [--rates 30,150] [--repeat 7]

(a) the bare interpreter: invoke() on a fixed input, nothing else; also (a2) the best a bare
    program can do with the cores: two single-threaded interpreters invoking side by side, which is
    what (c) runs on for a file (edgekit.loop.Performance.THROUGHPUT);
(b) a naive serial loop: read a frame, resize it, invoke, read the outputs;
(c) `edgekit detect`'s loop (Detector.stream, headless).

Throughput: every frame of a 640x480 MJPG video made from a real photo; prints c/a and b/a.
Freshness: the same video played like a camera at each rate in --rates (frames arrive on
their own clock; a camera driver holds --buffers frames for a reader that falls behind);
prints the capture-to-result latency p50/p99 of (b) and (c) against the bare inference time.
(c) reads such a file the way a V4L2 camera is read: frames taken undecoded as they fall due,
only those the model takes decoded, and one over half a frame period old passed over for the
next (edgekit.sources.VideoSource); its fps shows what that freshness costs in throughput.
Targets (issue 4): c/a >= 0.97; latency p50 < 1.5x bare inference when the model is slower
than the camera.
Rounds alternate a, b, c so that other load on the machine hits all three alike; the median
round is reported, with the load average (other programs running distort every figure).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

from edgekit.preprocess import ResizeMode, fit_into
from edgekit.runtimes import load_model
from edgekit.runtimes.loader import default_threads
from edgekit.runtimes.timing import machine_line
from edgekit.sources import VideoSource, parse_source
from edgekit.tasks import Detector

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


def make_video(path: Path, frames: int, fps: float) -> Path:
    photo = cv2.imread(str(SHARED / "images" / "kite_and_cold.jpg"))
    base = cv2.resize(photo, (640, 480), interpolation=cv2.INTER_AREA)
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (640, 480))
    for i in range(frames):
        w.write(np.roll(base, 3 * i, axis=1))  # a slow pan, so no two frames are alike
    w.release()
    return path


def cpu_per_frame(run: Callable[[], float], frames: int) -> tuple[float, float]:
    """``run()`` -> (its rate, process CPU milliseconds per frame, all threads)."""
    c0 = time.process_time()
    rate = run()
    return rate, (time.process_time() - c0) * 1e3 / frames


def bare_pair(path: str, threads: int, n: int) -> float:
    """(a2) inferences per second of two interpreters invoking side by side, each in its own thread."""
    import threading

    models = [load_model(path, num_threads=threads) for _ in range(2)]
    try:
        for m in models:
            m.input_view()[...] = 0
            m.invoke()
        t0 = time.perf_counter()
        threads_ = [threading.Thread(target=_invoke_n, args=(m, n // 2)) for m in models]
        for t in threads_:
            t.start()
        for t in threads_:
            t.join()
        return 2 * (n // 2) / (time.perf_counter() - t0)
    finally:
        for m in models:
            m.close()


def _invoke_n(model: object, n: int) -> None:
    for _ in range(n):
        model.invoke()  # type: ignore[attr-defined]
        for i in range(len(model.outputs)):  # type: ignore[attr-defined]
            model.output(i)  # type: ignore[attr-defined]


def bare(det: Detector, n: int) -> float:
    """(a) inferences per second."""
    t0 = time.perf_counter()
    _invoke_n(det.model, n)
    return n / (time.perf_counter() - t0)


class EmulatedCamera:
    """A video file delivering frames on its own clock, as a V4L2 camera does: read() returns the
    oldest of the last ``buffers`` frames (the driver's queue), waiting for the next if none."""

    def __init__(self, path: Path, fps: float, buffers: int) -> None:
        self.cap = cv2.VideoCapture(str(path))
        self.period, self.buffers = 1.0 / fps, buffers
        self.start = time.perf_counter()
        self.next = 0

    def read(self) -> tuple[np.ndarray | None, float]:
        now = time.perf_counter()
        newest = int((now - self.start) / self.period)
        if newest < self.next:
            time.sleep(self.start + self.next * self.period - now)
        oldest = max(self.next, newest - self.buffers + 1)
        for _ in range(oldest - self.next):
            self.cap.grab()  # overwritten in the driver's queue before anyone read it
        self.next = oldest + 1
        ok, frame = self.cap.read()
        return (frame if ok else None), self.start + oldest * self.period


def naive(det: Detector, video: Path, fps: float | None, buffers: int) -> tuple[float, list[float]]:
    """(b) frames per second and capture-to-result latencies (ms) of the serial loop."""
    model = det.model
    view_shape = model.inputs[0].shape
    cam = EmulatedCamera(video, fps, buffers) if fps else None
    cap = cv2.VideoCapture(str(video)) if cam is None else None
    latencies, n = [], 0
    t0 = time.perf_counter()
    while True:
        if cam is not None:
            frame, captured = cam.read()
        else:
            ok, frame = cap.read()  # type: ignore[union-attr]
            captured = time.perf_counter()
            frame = frame if ok else None
        if frame is None:
            break
        rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        x = np.empty(view_shape, np.uint8)
        fit_into(rgb, x, ResizeMode.STRETCH)
        model.input_view(0)[...] = x
        model.invoke()
        _ = [model.output(i) for i in range(len(model.outputs))]
        latencies.append((time.perf_counter() - captured) * 1e3)
        n += 1
    return n / (time.perf_counter() - t0), latencies


WORKERS: list[int] = []


def pipelined(det: Detector, video: Path, fps: float | None) -> tuple[float, float, float, dict[str, float]]:
    """(c) fps, latency p50 and p99 (ms), stage p50s (ms)."""
    spec = parse_source(video, realtime=fps is not None, fps=fps)
    stream = det.stream(VideoSource(spec))
    with stream:
        for _ in stream:
            pass
    WORKERS.append(stream.workers)
    s = stream.summary
    return s.fps, s.latency_p50_ms, s.latency_p99_ms, s.stages_p50_ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=str(SHARED / "models" / "ssd_mobilenet_v1_coco_quant.tflite"))
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--rates", default="30,150", help="camera frame rates for the freshness runs")
    ap.add_argument("--buffers", type=int, default=4, help="frames a camera driver queues (V4L2 in OpenCV: 4)")
    ap.add_argument("--repeat", type=int, default=7, help="throughput rounds")
    ap.add_argument("--latency-repeat", type=int, default=3, help="rounds per camera rate")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    print(machine_line())
    rates = [float(r) for r in args.rates.split(",") if r]
    with tempfile.TemporaryDirectory() as tmp, Detector.create_from_model_path(
            args.model, num_threads=args.threads, warmup=5) as det:
        video = make_video(Path(tmp) / "pan.avi", args.frames, 30.0)
        print(f"model {Path(args.model).name}, {det.model.describe()['delegate']}, {det.model.num_threads} threads; "
              f"video 640x480 MJPG, {args.frames} frames; median of {args.repeat} rounds; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        pair_threads = max(1, (args.threads or default_threads()) // 2)
        rounds = []
        for _ in range(args.repeat):
            a, a_cpu = cpu_per_frame(lambda: bare(det, args.frames), args.frames)
            a2 = bare_pair(args.model, pair_threads, args.frames)
            b, b_cpu = cpu_per_frame(lambda: naive(det, video, None, args.buffers)[0], args.frames)
            c, c_cpu = cpu_per_frame(lambda: pipelined(det, video, None)[0], args.frames)
            rounds.append((a, b, c, b / a, c / a, a_cpu, b_cpu, c_cpu, a2, c / a2))
        a, b, c, ba, ca, a_cpu, b_cpu, c_cpu, a2, ca2 = (statistics.median(r[i] for r in rounds) for i in range(10))
        print(f"\nthroughput, every frame: (a) bare {a:.1f}/s   (b) naive {b:.1f} fps   (c) edgekit {c:.1f} fps "
              f"on {WORKERS[-1]} interpreter(s)")
        print(f"  b/a = {ba:.3f}   c/a = {ca:.3f}   (per round c/a: {', '.join(f'{r[4]:.3f}' for r in rounds)})")
        print(f"  (a2) two {pair_threads}-thread interpreters side by side, bare: {a2:.1f}/s; c/a2 = {ca2:.3f}")
        # When the interpreters' threads fill every core, decoding and resizing take CPU from them.
        print(f"  CPU time per frame (all threads): (a) {a_cpu:.2f} ms   (b) {b_cpu:.2f} ms   (c) {c_cpu:.2f} ms")
        infer_ms = 1e3 / a
        for fps in rates:
            rows = []
            for _ in range(args.latency_repeat):
                _, lat_b = naive(det, video, fps, args.buffers)
                c_fps, c50, c99, stages = pipelined(det, video, fps)
                rows.append((float(np.percentile(lat_b, 50)), float(np.percentile(lat_b, 99)), c50, c99, c_fps))
            b50, b99, c50, c99, c_fps = (statistics.median(r[i] for r in rows) for i in range(5))
            slower = "model slower than the camera" if infer_ms > 1e3 / fps else "model faster than the camera"
            print(f"\nrealtime {fps:.0f} fps ({slower}; bare inference {infer_ms:.1f} ms):")
            print(f"  latency p50/p99  (b) naive {b50:.1f} / {b99:.1f} ms   (c) edgekit {c50:.1f} / {c99:.1f} ms "
                  f"({c_fps:.1f} fps)")
            print(f"  p50 / bare inference: (b) {b50 / infer_ms:.2f}x   (c) {c50 / infer_ms:.2f}x   (c) stages p50: "
                  + " / ".join(f"{k} {v:.1f}" for k, v in stages.items()) + " ms")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
