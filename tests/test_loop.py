"""The pipelined loop with a stand-in engine (so each stage's timing is known) and with the real
SSD model: results belong to their frames, live sources stay fresh, stages overlap, and the
loop stops, fails and cleans up as it should."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import InputError, ModelError, SourceError
from edgekit.loop import LoopOptions, Stream
from edgekit.preprocess import Transform
from edgekit.results import Classes, FrameResult
from edgekit.tasks import Detector
from edgekit.video import Reconnect, SourceKind, SourceSpec, VideoSource
from tests.conftest import shared_model
from tests.test_video import FakeReader, opener_of


class FakeEngine:
    """A model stand-in: the "tensor" holds the frame's pixel value; inference sleeps."""

    def __init__(self, infer_s: float = 0.0, fail_at: int | None = None) -> None:
        self.lock = threading.Lock()
        self.tensor = np.zeros(4, np.uint8)
        self.infer_s, self.fail_at = infer_s, fail_at
        self.direct_writes = self.loads = 0

    def staging(self) -> np.ndarray:
        return np.zeros(4, np.uint8)

    def write(self, image: np.ndarray, dest: np.ndarray | None = None) -> Transform:
        target = self.tensor if dest is None else dest
        target[...] = image[0, 0, 0]
        self.direct_writes += dest is None
        h, w = image.shape[:2]
        return Transform((w, h), (w, h), 1.0, 1.0)

    def load(self, staged: np.ndarray) -> None:
        self.tensor[...] = staged
        self.loads += 1

    def infer(self) -> list[np.ndarray]:
        if self.infer_s:
            time.sleep(self.infer_s)
        if self.fail_at is not None and int(self.tensor[0]) == self.fail_at:
            raise ModelError("the interpreter failed")
        return [self.tensor.copy()]

    def decode(self, outputs: list[np.ndarray], transform: Transform) -> Classes:
        return Classes(np.array([int(outputs[0][0])]), np.array([1.0]))


def stream_of(engine: FakeEngine, spec: SourceSpec, *readers: FakeReader, **options: object) -> Stream:
    source = VideoSource(spec, opener=opener_of(*readers), reconnect=Reconnect(first_delay=0.01, give_up_after=0.1))
    return Stream(engine, source, LoopOptions(**options))  # type: ignore[arg-type]


FILE = SourceSpec(SourceKind.FILE, "fake")
CAMERA = SourceSpec(SourceKind.CAMERA, 0)
LIVE_FILE = SourceSpec(SourceKind.FILE, "fake", fps=200.0, realtime=True)  # a 200 fps camera that ends


def test_a_file_gives_one_result_per_frame_belonging_to_that_frame() -> None:
    engine = FakeEngine()
    with stream_of(engine, FILE, FakeReader(0, 40)) as s:
        results = list(s)
    assert [r.index for r in results] == list(range(40))
    assert [r.classes.top.id for r in results] == list(range(40))  # type: ignore[union-attr]
    assert engine.loads == 40 and engine.direct_writes == 0  # preprocessed ahead, then copied in
    summary = s.summary
    assert (summary.captured, summary.processed, summary.dropped, summary.stopped_by) == (40, 40, 0, "end of source")
    r = results[0]
    assert isinstance(r, FrameResult) and r.frame is not None and r.latency_ms >= r.stages.inference >= 0


def test_a_live_source_is_processed_fresh_and_straight_into_the_tensor() -> None:
    engine = FakeEngine(infer_s=0.05)
    with stream_of(engine, LIVE_FILE, FakeReader(0, 100)) as s:  # 0.5 s of a 200 fps camera
        results = list(s)
    idx = [r.index for r in results]
    assert idx == sorted(idx) and len(idx) < 20
    assert [r.classes.top.id for r in results] == [i % 256 for i in idx]  # type: ignore[union-attr]
    assert engine.direct_writes == len(results) and engine.loads == 0
    summary = s.summary
    assert summary.dropped > 0 and summary.processed + summary.dropped == 100
    # The newest frame waits for the model at most once (< 50 + 5 ms); a queue of 4 stale frames
    # in front of it would make that 4 x 50 ms more.
    assert summary.latency_p50_ms < 150


def test_stages_overlap_instead_of_adding_up() -> None:
    """Reading (15 ms), inference (20 ms) and output (10 ms) in turn would take 45 ms a frame."""
    engine = FakeEngine(infer_s=0.02)
    n = 20
    t0 = time.perf_counter()
    with stream_of(engine, FILE, FakeReader(0, n, delay=0.015)) as s:
        for _ in s:
            time.sleep(0.01)
    elapsed = time.perf_counter() - t0
    assert elapsed < n * 0.045 * 0.75, f"{elapsed:.2f} s for {n} frames: the stages do not overlap"


@pytest.mark.parametrize("options, expected, reason", [
    ({"max_frames": 7}, 7, "max frames"),
    ({"duration": 0.15}, None, "duration"),
])
def test_the_loop_stops_when_asked(options: dict, expected: int | None, reason: str) -> None:
    with stream_of(FakeEngine(), FILE, FakeReader(0, 10**6, delay=0.002), **options) as s:
        results = list(s)
    if expected is not None:
        assert len(results) == expected
    assert s.summary.stopped_by == reason
    assert not any(t.name.startswith("edgekit-") and t.is_alive() for t in threading.enumerate()
                   if t.name != "edgekit-stop")


def test_stop_from_another_thread_ends_iteration_and_close_is_safe_twice() -> None:
    s = stream_of(FakeEngine(), CAMERA, FakeReader(0, 10**6, delay=0.002))
    threading.Timer(0.1, s.stop, args=("SIGTERM",)).start()
    n = sum(1 for _ in s)
    assert n > 0 and s.summary.stopped_by == "SIGTERM"
    s.close()
    s.close()


def test_breaking_out_early_stops_every_thread() -> None:
    s = stream_of(FakeEngine(), FILE, FakeReader(0, 10**6))
    for r in s:
        if r.index == 3:
            break
    s.close()
    time.sleep(0.05)
    assert not any(t.name in ("edgekit-capture", "edgekit-preprocess", "edgekit-inference") and t.is_alive()
                   for t in threading.enumerate())


def test_an_inference_error_reaches_the_caller() -> None:
    with stream_of(FakeEngine(fail_at=5), FILE, FakeReader(0, 50)) as s:
        got = []
        with pytest.raises(ModelError, match="interpreter failed"):
            for r in s:
                got.append(r.index)
    assert got == list(range(5))


def test_a_source_lost_mid_run_is_reopened_while_the_loop_runs() -> None:
    readers = (FakeReader(0, 10, delay=0.005), FakeReader(10, 10, delay=0.005))
    with stream_of(FakeEngine(), CAMERA, *readers) as s:
        ids = []
        with pytest.raises(SourceError, match="could not be reopened"):
            for r in s:
                ids.append(r.classes.top.id)  # type: ignore[union-attr]
    assert ids[-1] == 19 and any(i < 10 for i in ids) and s.summary.reopens == 1


def test_a_stream_is_iterated_once() -> None:
    with stream_of(FakeEngine(), FILE, FakeReader(0, 3)) as s:
        list(s)
        with pytest.raises(InputError, match="iterated once"):
            list(s)


# --- the real model ---------------------------------------------------------------------
def test_detector_stream_with_a_callback_on_a_real_video(shared_models: Path, shared_images: Path,
                                                         tmp_path: Path) -> None:
    import cv2

    frame = cv2.resize(cv2.imread(str(shared_images / "grace_hopper.bmp")), (256, 300))
    video = tmp_path / "g.avi"
    w = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 15, (256, 300))
    for _ in range(12):
        w.write(frame)
    w.release()
    seen: list[FrameResult] = []
    model = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    with Detector.create_from_model_path(model, labels=shared_models / "coco_labels.txt") as det:
        summary = det.stream(video, callback=seen.append)
    assert summary.processed == 12 == len(seen) and summary.stopped_by == "end of source"
    assert all("person" in r.detections.labels for r in seen)
    assert set(summary.stages_p50_ms) == {"capture", "preprocess", "inference", "postprocess"}
