"""The pipelined loop with a stand-in engine (so each stage's timing is known) and with the real
SSD model: results belong to their frames, live sources stay fresh, stages overlap, and the
loop stops, fails and cleans up as it should."""

from __future__ import annotations

import sys
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
from edgekit.sources import Frame, Reconnect, SourceKind, SourceSpec, VideoSource
from tests.conftest import FakeReader, opener_of, shared_model, write_mjpg


class FakeEngine:
    """A model stand-in: the "tensor" holds the frame's pixel value; inference sleeps."""

    def __init__(self, infer_s: float = 0.0, fail_at: int | None = None) -> None:
        self.lock = threading.Lock()
        self.tensor = np.zeros(4, np.uint8)
        self.infer_s, self.fail_at = infer_s, fail_at
        self.direct_writes = self.loads = 0

    def staging(self) -> np.ndarray:
        return np.zeros(4, np.uint8)

    def write(self, image: np.ndarray, dest: np.ndarray | None = None, *, bgr: bool = False) -> Transform:
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


class ThreadNotingEngine(FakeEngine):
    """A FakeEngine that notes the thread of each inference."""

    def __init__(self, infer_s: float = 0.0) -> None:
        super().__init__(infer_s)
        self.threads: list[str] = []

    def infer(self) -> list[np.ndarray]:
        self.threads.append(threading.current_thread().name)
        return super().infer()


def test_a_live_source_the_model_keeps_up_with_is_inferred_in_the_callers_thread() -> None:
    engine = ThreadNotingEngine()
    with stream_of(engine, LIVE_FILE, FakeReader(0, 40)) as s:  # 0.2 s of a 200 fps camera
        results = list(s)
    assert len(results) > 10 and set(engine.threads) == {threading.current_thread().name}
    assert [r.classes.top.id for r in results] == [r.index for r in results]  # type: ignore[union-attr]


@pytest.mark.parametrize("infer_s, caller_s", [(0.02, 0.0), (0.0, 0.02)])
def test_a_live_source_that_outpaces_model_and_caller_gets_an_inference_thread(infer_s: float,
                                                                               caller_s: float) -> None:
    """A 200 fps camera (5 ms a frame) and 20 ms of inference, or of the caller's work per result:
    after LIVE_OVERRUNS frames over the period the model works on the next frame while the caller has this one."""
    from edgekit.loop import LIVE_OVERRUNS

    engine = ThreadNotingEngine(infer_s)
    with stream_of(engine, LIVE_FILE, FakeReader(0, 100)) as s:
        results = []
        for r in s:
            results.append(r)
            time.sleep(caller_s)
    inline = engine.threads.count(threading.current_thread().name)  # the first frame sets no period yet
    assert LIVE_OVERRUNS <= inline <= LIVE_OVERRUNS + 1
    assert set(engine.threads[inline:]) == {"edgekit-inference"} and len(engine.threads) > inline + 2
    idx = [r.index for r in results]
    assert idx == sorted(idx) and [r.classes.top.id for r in results] == idx  # type: ignore[union-attr]


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


def _edgekit_threads() -> dict[str, threading.Thread]:
    return {t.name: t for t in threading.enumerate() if t.name.startswith("edgekit-") and t.is_alive()}


def test_breaking_out_early_stops_every_thread() -> None:
    before = set(_edgekit_threads().values())
    s = stream_of(FakeEngine(), FILE, FakeReader(0, 10**6))
    for r in s:
        if r.index == 3:
            running = {name: t for name, t in _edgekit_threads().items() if t not in before}
            break
    # the threads of a file on one interpreter, found by what they are, not by a list of names to skip
    assert set(running) == {"edgekit-capture", "edgekit-preprocess", "edgekit-inference-0"}
    s.close()
    for t in running.values():
        t.join(timeout=1.0)
    still = [name for name, t in running.items() if t.is_alive()]
    assert not still, f"still running after close(): {still}"


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

    frame = cv2.resize(cv2.imread(str(shared_images / "grace_hopper.png")), (256, 300))
    video = write_mjpg(tmp_path / "g.avi", [frame] * 12, 15)
    seen: list[FrameResult] = []
    model = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    with Detector.create_from_model_path(model, labels=shared_models / "coco_labels.txt") as det:
        summary = det.stream(video, callback=seen.append)
    assert summary.processed == 12 == len(seen) and summary.stopped_by == "end of source"
    assert all("person" in r.detections.labels for r in seen)
    assert set(summary.stages_p50_ms) == {"capture", "preprocess", "inference", "postprocess"}


# --- throughput: several interpreters on one file -----------------------------------------------
def test_workers_share_a_file_and_results_keep_frame_order() -> None:
    """Two engines with uneven speeds finish frames out of order; the stream puts them back."""
    fast, slow = FakeEngine(), FakeEngine(infer_s=0.004)
    source = VideoSource(FILE, opener=opener_of(FakeReader(0, 60)))
    with Stream(fast, source, workers=[fast, slow]) as s:  # type: ignore[list-item]
        results = list(s)
    assert s.workers == 2
    assert [r.index for r in results] == list(range(60))
    assert [r.classes.top.id for r in results] == list(range(60))  # type: ignore[union-attr]
    # each worker resizes its frames straight into its own input: no staging copy
    assert fast.direct_writes > 0 and slow.direct_writes > 0 and fast.direct_writes + slow.direct_writes == 60
    assert fast.loads == slow.loads == 0
    assert s.summary.processed == 60 and s.summary.stopped_by == "end of source"


def test_workers_are_not_used_for_a_live_source() -> None:
    a, b = FakeEngine(), FakeEngine()
    source = VideoSource(LIVE_FILE, opener=opener_of(FakeReader(0, 40)))
    with Stream(a, source, workers=[a, b]) as s:  # type: ignore[list-item]
        list(s)
    assert s.workers == 1 and b.loads == b.direct_writes == 0 and a.direct_writes > 0


def test_a_failing_worker_ends_the_stream_with_its_error_and_on_close_runs_once() -> None:
    closed: list[int] = []
    good, bad = FakeEngine(infer_s=0.001), FakeEngine(fail_at=9)
    source = VideoSource(FILE, opener=opener_of(FakeReader(0, 10**6, delay=0.001)))
    s = Stream(good, source, workers=[good, bad], on_close=lambda: closed.append(1))  # type: ignore[list-item]
    with pytest.raises(ModelError, match="interpreter failed"):
        for _ in s:
            pass
    s.close()
    assert closed == [1]
    time.sleep(0.05)
    assert not any(t.name.startswith("edgekit-inference") and t.is_alive() for t in threading.enumerate())


def test_throughput_and_latency_give_the_same_detections_on_every_frame(shared_models: Path, shared_images: Path,
                                                                        tmp_path: Path) -> None:
    import cv2

    from edgekit.loop import Performance

    kite = cv2.resize(cv2.imread(str(shared_images / "kite_and_cold.jpg")), (480, 320))
    video = write_mjpg(tmp_path / "pan.avi", (np.roll(kite, 7 * i, axis=1) for i in range(24)), 30)
    model = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    with Detector.create_from_model_path(model, labels=shared_models / "coco_labels.txt", threshold=0.3) as det:
        runs = {}
        for perf in (Performance.LATENCY, Performance.THROUGHPUT):
            s = det.stream(video, performance=perf)
            with s:
                runs[perf] = [(r.index, r.detections.labels, np.round(r.detections.boxes, 3).tolist()) for r in s]
            assert s.workers == (2 if perf is Performance.THROUGHPUT else 1)
    assert [r[0] for r in runs[Performance.THROUGHPUT]] == list(range(24))
    assert runs[Performance.THROUGHPUT] == runs[Performance.LATENCY]
    assert all("kite" in labels and "person" in labels for _, labels, _ in runs[Performance.LATENCY])


@pytest.mark.parametrize("cores, threads, kind, expected", [
    (2, None, "file", 2),        # AUTO on a file: two interpreters
    (1, None, "file", 1),        # one core: nothing to share
    (4, 2, "file", 1),           # the user fixed the threads: respected
    (2, None, "camera", 1),      # live: latency
])
def test_auto_performance_picks_workers_only_for_files_on_several_cores(
        shared_models: Path, monkeypatch: pytest.MonkeyPatch, cores: int, threads: int | None, kind: str,
        expected: int) -> None:
    from edgekit.loop import Performance

    model = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    monkeypatch.setattr("edgekit.tasks.os.cpu_count", lambda: cores)
    spec = FILE if kind == "file" else CAMERA
    with Detector.create_from_model_path(model, num_threads=threads, warmup=0) as det:
        workers = det._throughput_workers(spec, Performance.AUTO)
        assert len(workers) in (0, 2) and max(1, len(workers)) == expected
        if workers:
            assert all(w.model.num_threads == 1 for w in workers)
            assert det._throughput_workers(spec, Performance.AUTO) is workers  # made once, kept for the next stream
    assert all(w.model.closed for w in workers)


def test_a_task_loaded_at_a_workers_thread_count_is_one_of_its_workers(shared_models: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`edgekit detect` on a file loads the model single-threaded (throughput_threads): the task's own
    interpreter is one of the two workers, so the file is in memory twice, not three times."""
    from edgekit.loop import Performance, throughput_threads
    from edgekit.runtimes import load_model
    from edgekit.tasks import DetectorOptions

    model = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    monkeypatch.setattr("edgekit.tasks.os.cpu_count", lambda: 2)
    monkeypatch.setattr("edgekit.loop.default_threads", lambda: 2)
    assert throughput_threads(FILE, "auto", None) == 1
    assert throughput_threads(CAMERA, "auto", None) is None and throughput_threads(FILE, "latency", None) is None
    assert throughput_threads(FILE, "auto", 2) is None and throughput_threads(FILE, "throughput", 4) == 2
    own = load_model(model, num_threads=throughput_threads(FILE, Performance.AUTO, None))
    with Detector(DetectorOptions(model=model, warmup=0), own) as det:
        workers = det._throughput_workers(FILE, Performance.AUTO)
        assert len(workers) == 2 and workers[0] is det._engine and workers[1].model is not own
        assert all(w.model.num_threads == 1 for w in workers)
        assert det._throughput_workers(CAMERA, Performance.AUTO) == []  # live: the task's engine alone
    assert own.closed and workers[1].model.closed


def test_interpreters_of_one_file_share_its_bytes(shared_models: Path) -> None:
    from edgekit.runtimes.validate import validate_model_file

    model = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    first, _ = validate_model_file(model)
    again, _ = validate_model_file(model)
    assert again is first  # the interpreter keeps the bytes it was given: one copy for every worker


def test_an_unknown_performance_is_a_clear_error(shared_models: Path) -> None:
    model = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    with Detector.create_from_model_path(model, warmup=0) as det:
        with pytest.raises(InputError, match="performance must be one of auto, latency, throughput"):
            det.stream("x.avi", performance="fastest")


# --- OpenCV's BGR frames become RGB where it matters ----------------------------------------------
def test_a_bgr_frame_reaches_the_model_and_the_caller_as_rgb(shared_models: Path, tmp_path: Path) -> None:
    """A frame that is red in the video is red (255, 0, 0) in the model's input and in result.frame,
    though the loop only swaps the channels of the resized image."""
    bgr = np.zeros((240, 320, 3), np.uint8)
    bgr[:, :, 2] = 255  # red in OpenCV's order
    video = write_mjpg(tmp_path / "red.avi", [bgr] * 3, 10)
    model = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    with Detector.create_from_model_path(model, warmup=0) as det:
        engine = det._engine
        s = det.stream(video, performance="latency")
        with s:
            results = list(s)
        tensor = det.model.input_view(0)[0].copy()
    assert len(results) == 3
    assert engine.direct  # uint8 SSD input: the frame was resized straight into the tensor
    assert np.abs(tensor.reshape(-1, 3).mean(axis=0) - (255, 0, 0)).max() < 8
    frame = results[0].frame
    assert frame is not None and np.abs(frame.reshape(-1, 3).mean(axis=0) - (255, 0, 0)).max() < 8
    assert np.abs(results[0].frame_bgr.reshape(-1, 3).mean(axis=0) - (0, 0, 255)).max() < 8  # type: ignore[union-attr]


def test_frame_converts_to_rgb_once_and_only_when_asked() -> None:
    bgr = np.zeros((4, 5, 3), np.uint8)
    bgr[..., 0] = 200  # blue
    f = Frame(3, bgr, 1.0, 2.0, 0.5, bgr=True)
    assert f.pixels[1] is True and f.pixels[0] is bgr and f.shape == (4, 5, 3)
    rgb = f.image
    assert rgb[0, 0].tolist() == [0, 0, 200] and f.image is rgb  # converted once, then kept
    assert f.pixels[1] is False and f.bgr is bgr
    g = Frame(0, rgb, 0.0, 0.0, 0.0)
    assert g.image is rgb and g.bgr[0, 0].tolist() == [200, 0, 0]


def test_breaking_out_of_a_throughput_stream_stops_its_workers() -> None:
    a, b = FakeEngine(infer_s=0.001), FakeEngine(infer_s=0.001)
    source = VideoSource(FILE, opener=opener_of(FakeReader(0, 10**6)))
    s = Stream(a, source, workers=[a, b])  # type: ignore[list-item]
    for r in s:
        if r.index == 5:
            break
    s.close()
    time.sleep(0.05)
    assert not any(t.name.startswith("edgekit-inference") and t.is_alive() for t in threading.enumerate())
    assert s.summary.processed == 6 and source.finished


def test_the_command_line_fixes_mallocs_mmap_threshold_where_malloc_is_glibcs() -> None:
    import platform

    from edgekit.loop.malloc import release_frames_when_freed

    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert release_frames_when_freed() is glibc
