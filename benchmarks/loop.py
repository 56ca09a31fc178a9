"""The pipelined loop of `edgekit detect` against the usual serial loop, on one model and video.

    python benchmarks/loop.py [-m MODEL] [--frames 150] [--rates 30,150] [--repeat 9] [--latency-repeat 21]

(a) the bare interpreter: invoke() on a fixed input, nothing else; also (a2) the best a bare
    program can do with the cores: two single-threaded interpreters invoking side by side, which is
    what (c) runs on for a file (edgekit.loop.Performance.THROUGHPUT);
(a2d) those two interpreters, each also decoding its frame's JPEG and resizing it into the input
    first: what any program that sees every frame of the file must do at least, with no loop;
(b) a naive serial loop: read a frame, resize it, invoke, read the outputs; for latency also
    (b+) the same loop decoding its outputs into detections (edgekit's decoder), as (c) does;
(c) `edgekit detect`'s loop (Detector.stream, headless).

Throughput: every frame of a 640x480 MJPG video made from a real photo; prints c/a, c/a2, b/a
and CPU per frame, with the range over rounds.
Freshness: such a video of --latency-seconds played like a camera at each rate in --rates
(frames arrive on their own clock; a camera driver holds --buffers frames for a reader that
falls behind); prints the capture-to-result latency p50/p99 of (b) and (c), and per round c/b, c/b+
and each against the bare inference time (a: 20 invokes back to back in the same round). (c) reads such a file the way a V4L2 camera is read: frames taken undecoded
as they fall due, only those the model takes decoded (edgekit.sources.VideoSource); its fps
shows what that freshness costs in throughput.
Memory: peak RSS of `edgekit detect` on the video (a file: THROUGHPUT; --realtime: LATENCY)
against a bare loop in its own process (the interpreter, OpenCV reading and resizing), from
os.wait4 of each child.
Targets (issue 29): c/a >= 0.97, c/a2 >= 0.95, CPU per frame <= 1.1x bare; latency p50 at a
camera rate the model keeps up with <= the naive loop's and <= 1.3x bare inference, 1.2x where
the model is slower than the camera; peak memory <= 1.3x the bare loop's. Beside latency, the
reaction time: from an event at a random moment to the first result whose frame was captured
after it (what a reject waits for; capture-to-result latency alone rewards inferring fewer frames).
The second model, slower than a 30 fps camera: a YOLOv8n int8 at 640x640, written by
benchmarks/yolov8n_model.py (Ultralytics in its own environment; not committed, AGPL-3.0), run as
`-m yolov8n_640_int8.tflite --frames 60 --repeat 5 --latency-repeat 9` (about 5 minutes).
Rounds run every case once in an order that rotates (benchmarks/_common.rotated), so drift in
clock speed or other load hits every case alike; medians are printed with the range of rounds,
and the load average (other programs running distort every figure).
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
DATA = ROOT / "tests" / "data"  # the real models and photos a clone carries (tests/data/README.md)
sys.path.insert(0, str(ROOT))
from benchmarks._common import rotated  # noqa: E402
from benchmarks.startup import run_once  # noqa: E402 - peak RSS of a child, through GNU time


def make_video(path: Path, frames: int, fps: float) -> Path:
    photo = cv2.imread(str(DATA / "kite_and_cold.jpg"))
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


def jpeg_packets(video: Path) -> list[np.ndarray]:
    """The video's frames as the undecoded JPEG packets an MJPG file holds."""
    cap = cv2.VideoCapture(str(video))
    cap.set(cv2.CAP_PROP_FORMAT, -1)
    packets = []
    while True:
        ok, packet = cap.read()
        if not ok:
            return packets
        packets.append(packet.reshape(-1).copy())


def bare_pair_decoding(path: str, threads: int, packets: list[np.ndarray]) -> float:
    """(a2d) frames per second of two interpreters side by side, each decoding its frame's JPEG
    (libjpeg, cv2.imdecode) and writing it into its input as edgekit's engine does (resized, and
    quantized for an int8 input) before invoking: the least work a program that sees every frame
    of the file does, with no loop around it."""
    import threading

    dets = [Detector.create_from_model_path(path, num_threads=threads, warmup=1) for _ in range(2)]
    try:
        t0 = time.perf_counter()
        threads_ = [threading.Thread(target=_decode_invoke, args=(d, packets[i::2])) for i, d in enumerate(dets)]
        for t in threads_:
            t.start()
        for t in threads_:
            t.join()
        return len(packets) / (time.perf_counter() - t0)
    finally:
        for d in dets:
            d.close()


def _decode_invoke(det: Detector, packets: list[np.ndarray]) -> None:
    engine = det._engine
    for packet in packets:
        engine.write(cv2.imdecode(packet, cv2.IMREAD_COLOR), bgr=True)
        engine.infer()


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


def reaction_ms(marks: list[tuple[float, float]], n: int = 2000) -> float:
    """The median time from an event at a random moment to the first result whose frame was
    captured at or after it (ms): what a reject waits for. Fewer frames inferred, each fresher,
    can leave it unchanged while capture-to-result latency falls."""
    caps, ends = (np.asarray(m) for m in zip(*marks)) if marks else (np.zeros(0), np.zeros(0))
    if len(caps) < 4:
        return float("nan")
    events = np.random.default_rng(0).uniform(caps[1], caps[-2], n)
    return float(np.median(ends[np.searchsorted(caps, events)] - events) * 1e3)


def naive(det: Detector, video: Path, fps: float | None, buffers: int,
          decode: bool = False, marks: list[tuple[float, float]] | None = None) -> tuple[float, list[float]]:
    """(b) frames per second and capture-to-result latencies (ms) of the serial loop; ``decode``
    (b+): its outputs also decoded into detections, by edgekit's decoder for the model, as (c) does.
    ``marks`` gets (captured, done) of each frame."""
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
        transform = fit_into(rgb, x, ResizeMode.STRETCH)
        model.input_view(0)[...] = x
        model.invoke()
        outputs = [model.output(i) for i in range(len(model.outputs))]
        if decode:
            det._engine.decode(outputs, transform)
        done = time.perf_counter()
        latencies.append((done - captured) * 1e3)
        if marks is not None:
            marks.append((captured, done))
        n += 1
    return n / (time.perf_counter() - t0), latencies


WORKERS: list[int] = []


def pipelined(det: Detector, video: Path, fps: float | None,
              marks: list[tuple[float, float]] | None = None) -> tuple[float, float, float, dict[str, float]]:
    """(c) fps, latency p50 and p99 (ms), stage p50s (ms); ``marks`` gets (captured, in the caller's
    hands) of each result."""
    spec = parse_source(video, realtime=fps is not None, fps=fps)
    stream = det.stream(VideoSource(spec))
    with stream:
        for r in stream:
            if marks is not None:
                marks.append((r.capture_ts, time.perf_counter()))
    WORKERS.append(stream.workers)
    s = stream.summary
    return s.fps, s.latency_p50_ms, s.latency_p99_ms, s.stages_p50_ms


def spread(values: list[float], fmt: str = "{:.3f}") -> str:
    """The median of ``values`` and their range over rounds."""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


BARE_LOOP = """
import sys, cv2, numpy as np
from ai_edge_litert.interpreter import Interpreter
it = Interpreter(model_path=sys.argv[1], num_threads=int(sys.argv[3]))
it.allocate_tensors()
inp, outs = it.get_input_details()[0], it.get_output_details()
h, w = inp["shape"][1:3]
cap = cv2.VideoCapture(sys.argv[2])
while True:
    ok, frame = cap.read()
    if not ok:
        break
    x = cv2.resize(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB), (int(w), int(h)))
    it.set_tensor(inp["index"], x[None].astype(inp["dtype"]))
    it.invoke()
    _ = [it.get_tensor(o["index"]) for o in outs]
"""


# Two single-threaded interpreters reading the file in turn, each in its own thread: what a bare
# program that runs a file as edgekit's THROUGHPUT does holds in memory.
BARE_PAIR_LOOP = """
import sys, threading, cv2, numpy as np
from ai_edge_litert.interpreter import Interpreter
cap, lock = cv2.VideoCapture(sys.argv[2]), threading.Lock()
def work():
    it = Interpreter(model_path=sys.argv[1], num_threads=1)
    it.allocate_tensors()
    inp, outs = it.get_input_details()[0], it.get_output_details()
    h, w = inp["shape"][1:3]
    while True:
        with lock:
            ok, frame = cap.read()
        if not ok:
            return
        x = cv2.resize(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB), (int(w), int(h)))
        it.set_tensor(inp["index"], x[None].astype(inp["dtype"]))
        it.invoke()
        _ = [it.get_tensor(o["index"]) for o in outs]
threads = [threading.Thread(target=work) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def memory(model: str, video: Path, threads: int, repeat: int) -> None:
    """Peak RSS of `edgekit detect` (a file read in full, and played like a camera; default threads),
    of a bare loop on ``threads`` threads and of a bare pair of 1-thread interpreters (THROUGHPUT's twin)."""
    edgekit = [sys.executable, "-m", "edgekit", "detect", "-m", model, "--source", str(video), "-q"]
    cases = {"bare": [sys.executable, "-c", BARE_LOOP, model, str(video), str(threads)],
             "bare pair": [sys.executable, "-c", BARE_PAIR_LOOP, model, str(video)],
             "edgekit": edgekit, "edgekit --realtime": [*edgekit, "--realtime"]}
    got: dict[str, list[float]] = {k: [] for k in cases}
    with tempfile.TemporaryDirectory() as scratch:
        for r in range(repeat):
            for name in rotated(list(cases), r):
                got[name].append(run_once(cases[name], dict(os.environ), Path(scratch))[1])
    bare, pair = statistics.median(got["bare"]), statistics.median(got["bare pair"])
    print(f"\npeak memory (RSS, median of {repeat} processes each): bare loop {bare:.0f} MB; "
          + "; ".join(f"{k} {statistics.median(v):.0f} MB = {statistics.median(v) / bare:.2f}x"
                      for k, v in got.items() if k != "bare")
          + f"; edgekit (a file: THROUGHPUT's two interpreters) against the bare pair "
            f"{statistics.median(got['edgekit']) / pair:.2f}x")


def bare_invoke_ms(det: Detector, n: int = 20) -> float:
    """(a) for latency: the median time of ``n`` invokes back to back, outputs read."""
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        _invoke_n(det.model, 1)
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts))


def latency(det: Detector, tmp: Path, fps: float, args: argparse.Namespace) -> None:
    """(b) and (c) on a --latency-seconds video played like a camera at ``fps``, and (a) the bare
    invoke time, in rounds of rotating order; prints medians and ranges of the per-round ratios."""
    video = make_video(tmp / f"pan{fps:g}.avi", max(10, int(fps * args.latency_seconds)), fps)
    got: dict[str, list[tuple[float, float, float]]] = {"a": [], "b": [], "b+": [], "c": []}
    reaction: dict[str, list[float]] = {"b": [], "c": []}
    stages: dict[str, float] = {}
    for r in range(args.latency_repeat):
        for name in rotated(list(got), r):
            if name == "a":
                got["a"].append((bare_invoke_ms(det), 0.0, 0.0))
            elif name in ("b", "b+"):
                marks: list[tuple[float, float]] = []
                _, lat_b = naive(det, video, fps, args.buffers, decode=name == "b+", marks=marks)
                got[name].append((float(np.percentile(lat_b, 50)), float(np.percentile(lat_b, 99)), 0.0))
                if name == "b":
                    reaction["b"].append(reaction_ms(marks))
            else:
                marks = []
                fps_c, p50_c, p99_c, stages = pipelined(det, video, fps, marks)
                got["c"].append((p50_c, p99_c, fps_c))
                reaction["c"].append(reaction_ms(marks))
    a50, b50, bd50, c50 = ([x[0] for x in got[k]] for k in ("a", "b", "b+", "c"))
    b99, c99 = (statistics.median(x[1] for x in got[k]) for k in ("b", "c"))
    c_fps, infer_ms = statistics.median(x[2] for x in got["c"]), statistics.median(a50)
    slower = "model slower than the camera" if infer_ms > 1e3 / fps else "model faster than the camera"
    print(f"\nrealtime {fps:.0f} fps ({slower}; bare inference {spread(a50, '{:.1f}')} ms; "
          f"{args.latency_repeat} rounds of {args.latency_seconds:g} s; load average {os.getloadavg()[0]:.1f}):")
    print(f"  latency p50 (b) naive {spread(b50, '{:.1f}')} ms   (c) edgekit {spread(c50, '{:.1f}')} ms "
          f"({c_fps:.1f} fps); p99 (b) {b99:.1f} (c) {c99:.1f} ms")
    print(f"  (b+) naive decoding its detections too: p50 {spread(bd50, '{:.1f}')} ms; c/b+ = "
          f"{spread([x / y for x, y in zip(c50, bd50)])}")
    print(f"  p50 c/b = {spread([x / y for x, y in zip(c50, b50)])}   / bare inference: "
          f"(b) {spread([x / y for x, y in zip(b50, a50)])}   (c) {spread([x / y for x, y in zip(c50, a50)])}")
    print(f"  reaction (an event to the first result whose frame saw it) p50: (b) {spread(reaction['b'], '{:.1f}')} "
          f"(c) {spread(reaction['c'], '{:.1f}')} ms")
    print("  (c) stages p50 (last round): " + " / ".join(f"{k} {v:.1f}" for k, v in stages.items()) + " ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", default=str(DATA / "ssd_mobilenet_v1_coco_quant.tflite"))
    ap.add_argument("--frames", type=int, default=150)
    ap.add_argument("--rates", default="30,150", help="camera frame rates for the freshness runs")
    ap.add_argument("--buffers", type=int, default=4, help="frames a camera driver queues (V4L2 in OpenCV: 4)")
    ap.add_argument("--repeat", type=int, default=9, help="throughput rounds")
    ap.add_argument("--latency-repeat", type=int, default=21, help="rounds per camera rate")
    ap.add_argument("--latency-seconds", type=float, default=2.0, help="length of each camera round's video")
    ap.add_argument("--memory-repeat", type=int, default=3, help="processes per case for peak memory (0: skip)")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    print(machine_line())
    rates = [float(r) for r in args.rates.split(",") if r]
    with tempfile.TemporaryDirectory() as tmp, Detector.create_from_model_path(
            args.model, num_threads=args.threads, warmup=5) as det:
        video = make_video(Path(tmp) / "pan.avi", args.frames, 30.0)
        print(f"model {Path(args.model).name}, {det.model.describe()['delegate']}, {det.model.num_threads} threads; "
              f"video 640x480 MJPG, {args.frames} frames; medians (ranges) of {args.repeat} rounds; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        pair_threads = max(1, (args.threads or default_threads()) // 2)
        packets = jpeg_packets(video)
        cases: dict[str, Callable[[], float]] = {
            "a": lambda: bare(det, args.frames), "a2": lambda: bare_pair(args.model, pair_threads, args.frames),
            "a2d": lambda: bare_pair_decoding(args.model, pair_threads, packets),
            "b": lambda: naive(det, video, None, args.buffers)[0], "c": lambda: pipelined(det, video, None)[0]}
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for r in range(args.repeat):
            for name in rotated(list(cases), r):
                got[name].append(cpu_per_frame(cases[name], args.frames))
        rate = {k: [v[0] for v in got[k]] for k in got}
        cpu = {k: [v[1] for v in got[k]] for k in got}

        def ratio(x: str, y: str, of: dict[str, list[float]] = rate) -> list[float]:
            return [p / q for p, q in zip(of[x], of[y])]

        a, b, c, a2, a2d = (statistics.median(rate[k]) for k in ("a", "b", "c", "a2", "a2d"))
        print(f"\nthroughput, every frame: (a) bare {a:.1f}/s   (b) naive {b:.1f} fps   (c) edgekit {c:.1f} fps "
              f"on {WORKERS[-1]} interpreter(s); (a2) two {pair_threads}-thread interpreters side by side, bare "
              f"{a2:.1f}/s; (a2d) the same two, each decoding and resizing its frame first, {a2d:.1f} fps")
        print(f"  c/a = {spread(ratio('c', 'a'))}   c/a2 = {spread(ratio('c', 'a2'))}   b/a = {spread(ratio('b', 'a'))}")
        # Neither a nor a2 decodes a frame: every frame of an MJPG file costs a JPEG decode and a
        # resize on the same cores, so a2d/a2 bounds c/a2 for any loop.
        print(f"  c/a2d = {spread(ratio('c', 'a2d'))} (the loop against the least work that sees every frame)   "
              f"a2d/a2 = {spread(ratio('a2d', 'a2'))} (the bound of c/a2)")
        # When the interpreters' threads fill every core, decoding and resizing take CPU from them.
        print(f"  CPU time per frame (all threads): (a) {spread(cpu['a'], '{:.2f}')}   (b) {spread(cpu['b'], '{:.2f}')}"
              f"   (c) {spread(cpu['c'], '{:.2f}')} ms; c/a = {spread(ratio('c', 'a', cpu))}")
        print(f"  load average {os.getloadavg()[0]:.1f}")
        for fps in rates:
            latency(det, Path(tmp), fps, args)
        if args.memory_repeat:
            memory(args.model, video, det.model.num_threads, args.memory_repeat)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
