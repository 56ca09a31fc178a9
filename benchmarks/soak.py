"""Soak: run the detection/classification loop on a looping video and watch memory, fps and latency.

    python benchmarks/soak.py --minutes 30 [--model M.tflite] [--video clip.avi] [--json soak.json]
    python benchmarks/soak.py --frames 20000            # the short version the tests run

The video plays again from its start whenever it ends (the same pipeline, reader reopened),
so the loop sees an endless file source. Every --every seconds it records the process's
resident memory (VmRSS), frames, fps and latency percentiles over the interval; at the end
it prints the samples and the memory growth after warm-up (RSS at the end minus RSS when
warm-up ended), the figure README's reliability section quotes, and the trend of the samples
after warm-up (a least-squares line, what tests/edgekit/test_soak.py bounds: a leak grows
steadily and reads in full, while one of the allocator's one-off steps reads as less than its size).

Without --model it uses mobilenet_v1_0.25_128_quant.tflite from tests/data (a
classifier) or, absent that, a tiny int8 model it builds itself; without --video it writes
a 64-frame MJPG clip of kite_and_cold.jpg (or of noise) to a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.runtimes.timing import machine_line

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


@dataclass(frozen=True)
class Sample:
    t_s: float
    frames: int
    rss_mb: float
    fps: float
    latency_p50_ms: float
    latency_p99_ms: float


@dataclass(frozen=True)
class SoakResult:
    model: str
    video: str
    frames: int
    seconds: float
    warmup_frames: int
    rss_after_warmup_mb: float
    rss_end_mb: float
    rss_max_mb: float
    growth_mb: float
    loops: int
    samples: list[Sample]
    trend_mb: float = 0.0  # the least-squares slope of RSS over the frames sampled after warm-up, times those frames


    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rss_mb() -> float:
    """This process's resident memory now (Linux /proc; ru_maxrss elsewhere, an upper bound)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024 if sys.platform == "darwin" else 1024)


class LoopingReader:
    """A reader (edgekit.sources.Reader) that starts its file again at the end: an endless source
    made of one clip, read eagerly in the decoder's order."""

    frames = None  # endless
    lazy = False

    def __init__(self, spec: Any, opener: Any) -> None:
        self._spec, self._opener = spec, opener
        self._inner = opener(spec)
        self.loops = 0
        self.fps = self._inner.fps
        self.bgr = self._inner.bgr

    def read(self) -> np.ndarray | None:
        image = self._inner.read()
        if image is None:
            self._restart()
            image = self._inner.read()
        return image

    def skip(self) -> bool:
        if self._inner.skip():
            return True
        self._restart()
        return bool(self._inner.skip())

    def _restart(self) -> None:
        self._inner.close()
        self._inner = self._opener(self._spec)
        self.loops += 1

    def close(self) -> None:
        self._inner.close()


def write_clip(path: Path, frames: int = 64, size: tuple[int, int] = (320, 240)) -> Path:
    """An MJPG .avi that pans over kite_and_cold.jpg (noise when the photo is absent)."""
    import cv2

    photo = DATA / "kite_and_cold.jpg"
    base = cv2.imread(str(photo)) if photo.exists() else None
    if base is None:
        base = np.random.default_rng(0).integers(0, 256, (900, 1352, 3), dtype=np.uint8)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 30, size)
    h, w = base.shape[:2]
    for i in range(frames):
        x = int((w - w // 2) * i / max(frames - 1, 1))
        writer.write(cv2.resize(base[:, x:x + w // 2], size))
    writer.release()
    return path


def default_model(folder: Path) -> Path:
    shared = DATA / "mobilenet_v1_0.25_128_quant.tflite"
    if shared.exists():
        return shared
    sys.path.insert(0, str(ROOT))
    from tests.fuzz.seeds import build  # a tiny int8 classifier, no TensorFlow needed

    path = folder / "tiny_classifier.tflite"
    path.write_bytes(build("conv"))
    return path


def soak(model: Path, video: Path, *, frames: int | None, seconds: float | None, every: float,
         warmup_frames: int, log: Any = None) -> SoakResult:
    """Run the loop on `video`, looping, until `frames` or `seconds`; sample every `every` seconds."""
    from edgekit.runtimes import load_model
    from edgekit.tasks import Classifier, Detector
    from edgekit.sources import VideoSource, open_reader, parse_source

    with load_model(model) as probe:
        task = Classifier if (probe.metadata or {}).get("task") != "detect" and len(probe.outputs) == 1 else Detector
    readers: list[LoopingReader] = []

    def opener(spec: Any) -> LoopingReader:
        readers.append(LoopingReader(spec, open_reader))
        return readers[-1]

    samples: list[Sample] = []
    state = {"n": 0, "t_last": 0.0, "n_last": 0, "lat": [], "rss_warm": 0.0, "rss_max": 0.0}
    t0 = time.perf_counter()

    def on_frame(fr: Any) -> None:
        state["n"] += 1
        state["lat"].append(fr.latency_ms)
        now = time.perf_counter()
        if state["n"] == warmup_frames:
            state["rss_warm"] = rss_mb()
        if now - state["t_last"] >= every:
            rss = rss_mb()
            state["rss_max"] = max(state["rss_max"], rss)
            dt = now - state["t_last"] if state["t_last"] else now - t0
            lat = np.asarray(state["lat"]) if state["lat"] else np.asarray([np.nan])
            samples.append(Sample(round(now - t0, 2), state["n"], round(rss, 1),
                                  round((state["n"] - state["n_last"]) / dt, 1),
                                  round(float(np.percentile(lat, 50)), 2), round(float(np.percentile(lat, 99)), 2)))
            if log:
                s = samples[-1]
                print(f"{s.t_s:8.1f} s {s.frames:9d} frames  RSS {s.rss_mb:7.1f} MB  {s.fps:7.1f} fps  "
                      f"latency p50 {s.latency_p50_ms:6.2f} ms p99 {s.latency_p99_ms:6.2f} ms", file=log, flush=True)
            state.update(t_last=now, n_last=state["n"], lat=[])

    with task.create_from_model_path(model) as runner:
        source = VideoSource(parse_source(str(video)), opener=opener)
        runner.stream(source, callback=on_frame, max_frames=frames, duration=seconds)
    end = rss_mb()
    warm = state["rss_warm"] or end
    return SoakResult(str(model), str(video), state["n"], round(time.perf_counter() - t0, 2), warmup_frames,
                      round(warm, 1), round(end, 1), round(max(state["rss_max"], end), 1), round(end - warm, 2),
                      sum(r.loops for r in readers), samples, round(trend(samples, warmup_frames), 2))


def trend(samples: list[Sample], after: int) -> float:
    """MB the RSS grows over the sampled frames after ``after``, by a least-squares line through the
    samples: a leak grows steadily and reads in full, while one of the allocator's one-off steps (a new
    arena, a bigger free list) reads as less than its size (a step of 4.4 MB before the last two of 17
    samples: 2.6 MB). 0.0 with fewer than 3 samples."""
    pts = [(s.frames, s.rss_mb) for s in samples if s.frames >= after]
    if len(pts) < 3:
        return 0.0
    x, y = np.array(pts, dtype=np.float64).T
    slope = np.polyfit(x, y, 1)[0]
    return float(slope * (x[-1] - x[0]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, help="the .tflite model (default: see above)")
    p.add_argument("--video", type=Path, help="the clip to loop (default: one written for the run)")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--minutes", type=float, help="run this long")
    stop.add_argument("--frames", type=int, help="run this many frames (default 20000)")
    p.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--warmup", type=int, default=2000, help="frames before memory growth is counted")
    p.add_argument("--json", type=Path, help="write the samples and figures here")
    args = p.parse_args(argv)
    print(machine_line())
    with tempfile.TemporaryDirectory(prefix="edgekit-soak-") as tmp:
        model = args.model or default_model(Path(tmp))
        video = args.video or write_clip(Path(tmp) / "clip.avi")
        frames = None if args.minutes else (args.frames or 20_000)
        result = soak(model, video, frames=frames, seconds=args.minutes * 60 if args.minutes else None,
                      every=args.every, warmup_frames=min(args.warmup, (frames or 10**12) // 2), log=sys.stdout)
    print(f"\n{result.frames} frames in {result.seconds:.0f} s ({result.frames / result.seconds:.0f} fps), "
          f"the clip looped {result.loops} times; RSS {result.rss_after_warmup_mb:.1f} MB after "
          f"{result.warmup_frames} warm-up frames, {result.rss_end_mb:.1f} MB at the end "
          f"(growth {result.growth_mb:+.2f} MB; trend over the samples {result.trend_mb:+.2f} MB), "
          f"peak {result.rss_max_mb:.1f} MB")
    if args.json:
        args.json.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
