"""Sources: what a source string means, cameras that are absent, newest-frame vs every-frame
reading, realtime playback, undecodable frames, and reopening a source that vanishes."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import cv2
import numpy as np
import pytest

from edgekit.errors import InputError, SourceError
from edgekit.sources import (Handoff, Frame, ReadMode, Reconnect, SourceKind, SourceSpec, VideoSource, is_lazy,
                             open_reader, parse_source)
from edgekit.sources.capture import ThreadedReading
from edgekit.sources.lazy import LazyReading
from edgekit.sources.reading import PulledReading
from tests.conftest import FakeReader, opener_of, write_mjpg


def drain(src: VideoSource, every: float = 0.0) -> list[int]:
    seen = []
    while (frame := src.get(timeout=5.0)) is not None:
        seen.append(int(frame.image[0, 0, 0]))
        if every:
            time.sleep(every)
    return seen


def write_video(path: Path, frames: int, fps: float, size: tuple[int, int] = (64, 48),
                value: Callable[[int], int] = lambda i: i) -> Path:
    return write_mjpg(path, (np.full((size[1], size[0], 3), value(i) % 256, dtype=np.uint8) for i in range(frames)), fps)


# --- what a source is -------------------------------------------------------------------
@pytest.fixture()
def files(tmp_path: Path) -> Path:
    (tmp_path / "imgs").mkdir()
    for name in ("b.jpg", "a.png", "notes.txt"):
        (tmp_path / "imgs" / name).write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "clip.avi").write_bytes(b"x")
    (tmp_path / "one.bmp").write_bytes(b"x")
    return tmp_path


@pytest.mark.parametrize("given, kind, target", [
    (0, SourceKind.CAMERA, 0),
    ("2", SourceKind.CAMERA, 2),
    ("/dev/video1", SourceKind.CAMERA, "/dev/video1"),
    ("rtsp://user:pw@cam/stream1", SourceKind.STREAM, "rtsp://user:pw@cam/stream1"),
    ("HTTP://cam/mjpg", SourceKind.STREAM, "HTTP://cam/mjpg"),
    ("{tmp}/clip.avi", SourceKind.FILE, "{tmp}/clip.avi"),
    ("{tmp}/one.bmp", SourceKind.IMAGES, "{tmp}/one.bmp"),
    ("{tmp}/imgs", SourceKind.IMAGES, "{tmp}/imgs"),
    ("{tmp}/imgs/*.jpg", SourceKind.IMAGES, "{tmp}/imgs/*.jpg"),
])
def test_parse_source(files: Path, given: object, kind: SourceKind, target: object) -> None:
    def fix(v: object) -> object:
        return v.format(tmp=files) if isinstance(v, str) else v

    spec = parse_source(fix(given))  # type: ignore[arg-type]
    assert (spec.kind, spec.target) == (kind, fix(target))


def test_a_folder_lists_its_images_in_order(files: Path) -> None:
    assert [Path(p).name for p in parse_source(files / "imgs").images] == ["a.png", "b.jpg"]


@pytest.mark.parametrize("given, fragment", [
    ("{tmp}/missing.mp4", "does not exist"),
    ("{tmp}/empty", "no images in"),
    ("{tmp}/imgs/*.gif", "no images in"),
])
def test_parse_source_errors(files: Path, given: str, fragment: str) -> None:
    with pytest.raises(SourceError, match=fragment):
        parse_source(given.format(tmp=files))


@pytest.mark.parametrize("spec, live, reconnects", [
    (SourceSpec(SourceKind.CAMERA, 0), True, True),
    (SourceSpec(SourceKind.STREAM, "rtsp://x"), True, True),
    (SourceSpec(SourceKind.FILE, "a.mp4"), False, False),
    (SourceSpec(SourceKind.FILE, "a.mp4", realtime=True), True, False),
    (SourceSpec(SourceKind.IMAGES, "d", images=("a.jpg",)), False, False),
])
def test_live_and_reconnecting_sources(spec: SourceSpec, live: bool, reconnects: bool) -> None:
    assert (spec.live, spec.reconnects) == (live, reconnects)


# --- errors that tell what to do -----------------------------------------------------------
def test_camera_that_cannot_be_opened_lists_the_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("edgekit.sources.readers.video_devices", lambda: ["/dev/video0", "/dev/video2"])
    with pytest.raises(SourceError, match=r"cannot open camera 7 .*/dev/video0, /dev/video2"):
        VideoSource(7).start()


def test_no_camera_at_all_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("edgekit.sources.readers.video_devices", lambda: [])
    with pytest.raises(SourceError, match=r"no video devices found .*--picamera"):
        VideoSource(SourceSpec(SourceKind.CAMERA, 7)).start()


def test_picamera_absent_is_a_clear_error() -> None:
    pytest.importorskip("cv2")
    try:
        import picamera2  # type: ignore[import-not-found]  # noqa: F401
        pytest.skip("picamera2 is installed here")
    except ImportError:
        pass
    with pytest.raises(SourceError, match="picamera2.*apt install"):
        open_reader(SourceSpec(SourceKind.PICAMERA))


def test_unreadable_video_file(tmp_path: Path) -> None:
    bad = tmp_path / "noise.avi"
    bad.write_bytes(b"RIFF" + bytes(300))
    with pytest.raises(SourceError, match="cannot read video file"):
        VideoSource(bad).start()


# --- every frame, newest frame, realtime --------------------------------------------------
def test_a_file_yields_every_frame_in_order_even_to_a_slow_reader(tmp_path: Path) -> None:
    video = write_video(tmp_path / "v.avi", 20, 30.0, value=lambda i: i * 10)
    with VideoSource(video) as src:
        frames = []
        while (f := src.get(timeout=5)) is not None:
            frames.append(f)
            time.sleep(0.005)
    assert [f.index for f in frames] == list(range(20))
    assert [round(float(f.image.mean()) / 10) for f in frames] == list(range(20))
    assert frames[0].image.shape == (48, 64, 3) and frames[0].image.dtype == np.uint8
    assert src.stats.dropped == 0 and src.stats.captured == 20


def test_frames_are_rgb(tmp_path: Path) -> None:
    red = np.dstack([np.zeros((32, 32)), np.zeros((32, 32)), np.full((32, 32), 255)]).astype(np.uint8)
    path = write_mjpg(tmp_path / "red.avi", [red] * 3, 10)  # pure red written in OpenCV's BGR order
    with VideoSource(path) as src:
        r, g, b = src.get(timeout=5).image[16, 16]  # type: ignore[union-attr]
    assert r > 200 and g < 50 and b < 50


def test_realtime_plays_at_the_file_rate_and_drops_for_a_slow_reader(tmp_path: Path) -> None:
    video = write_video(tmp_path / "v.avi", 30, 60.0)  # 0.5 s of video
    t0 = time.perf_counter()
    with VideoSource(parse_source(video, realtime=True)) as src:
        frames = []
        while (f := src.get(timeout=5)) is not None:
            frames.append(f.index)
            time.sleep(0.05)  # a 20 fps consumer of a 60 fps camera
    elapsed = time.perf_counter() - t0
    assert 0.45 < elapsed < 1.5
    assert frames == sorted(frames) and len(set(frames)) == len(frames)
    assert len(frames) < 20
    assert len(frames) + src.stats.dropped == 30  # every frame of the file was either handed out or dropped


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread CPU priority is Linux's")
@pytest.mark.parametrize("realtime", [False, True])
def test_a_file_is_read_at_background_priority_but_a_live_source_is_not(tmp_path: Path, realtime: bool) -> None:
    video = write_video(tmp_path / "v.avi", 10, 30.0)
    own = os.getpriority(os.PRIO_PROCESS, 0)
    with VideoSource(parse_source(video, realtime=realtime)) as src:
        assert src.get(timeout=5) is not None
        assert isinstance(src._reading, LazyReading if realtime else ThreadedReading)
        thread = src._reading._thread
        assert thread is not None and thread.native_id is not None
        nice = os.getpriority(os.PRIO_PROCESS, thread.native_id)
    assert nice == (own if realtime else 19)


def test_channel_keeps_only_the_newest_item() -> None:
    ch: Handoff[int] = Handoff(keep_latest=True)
    for i in range(5):
        ch.put(i)
    assert ch.get(timeout=0.1) == 4 and ch.dropped == 4
    ch.close()
    assert ch.get() is None and ch.done


def test_channel_fifo_waits_for_room_and_close_releases_the_writer() -> None:
    ch: Handoff[int] = Handoff(2)
    assert ch.put(1) and ch.put(2)
    results: list[bool] = []
    t = threading.Thread(target=lambda: results.append(ch.put(3)))
    t.start()
    time.sleep(0.05)
    assert t.is_alive()  # no room: the writer waits
    assert ch.get() == 1
    t.join(1)
    assert results == [True] and [ch.get(), ch.get()] == [2, 3]
    t2 = threading.Thread(target=lambda: [ch.put(i) for i in range(5)])
    t2.start()
    time.sleep(0.05)
    ch.close(discard=True)
    t2.join(1)
    assert not t2.is_alive() and ch.get() is None


# --- damage and disappearance -----------------------------------------------------------
def test_undecodable_frames_are_skipped_and_counted() -> None:
    spec = SourceSpec(SourceKind.FILE, "fake")
    with VideoSource(spec, opener=opener_of(FakeReader(0, 6, bad=frozenset({2, 4})))) as src:
        seen = drain(src)
    assert seen == [0, 1, 3, 5]
    assert src.stats.undecodable == 2 and src.stats.captured == 4


def test_a_folder_with_a_broken_image_skips_it(tmp_path: Path) -> None:
    good = np.full((20, 30, 3), 200, np.uint8)
    cv2.imwrite(str(tmp_path / "a.png"), good)
    (tmp_path / "b.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    cv2.imwrite(str(tmp_path / "c.png"), good)
    with VideoSource(tmp_path) as src:
        frames = [f for f in iter(lambda: src.get(timeout=5), None)]
    assert [f.index for f in frames] == [0, 2]
    assert src.stats.undecodable == 1


def test_a_stream_that_vanishes_is_reopened_with_backoff() -> None:
    spec = SourceSpec(SourceKind.STREAM, "rtsp://fake")
    first, second = FakeReader(0, 5, delay=0.02), FakeReader(5, 5, delay=0.02)
    opener = opener_of(first, SourceError("not back yet"), SourceError("not yet"), second)
    t0 = time.perf_counter()
    with VideoSource(spec, opener=opener, reconnect=Reconnect(first_delay=0.02, max_delay=0.05,
                                                              give_up_after=0.5)) as src:
        seen = []
        with pytest.raises(SourceError, match="could not be reopened"):
            while (f := src.get(timeout=5)) is not None:
                seen.append(int(f.image[0, 0, 0]))
                time.sleep(0.002)
    assert 4 in seen and seen[-1] == 9 and seen == sorted(seen)
    assert src.stats.reopens == 1 and first.closed and second.closed
    assert time.perf_counter() - t0 >= 0.02 + 0.04 + 0.05  # the pauses grew


def test_a_replaced_video_file_is_read_again(tmp_path: Path) -> None:
    """A "stream" whose file is swapped while it is away (a camera replugged) goes on with the new one."""
    path = write_video(tmp_path / "cam.avi", 5, 30.0, value=lambda i: 40)
    opens = []

    def reopen_replaced(spec: SourceSpec) -> object:
        if opens:
            write_video(path, 5, 30.0, value=lambda i: 200)
        opens.append(1)
        if len(opens) > 2:
            raise SourceError("unplugged")
        return open_reader(spec)

    spec = SourceSpec(SourceKind.STREAM, str(path))
    with VideoSource(spec, opener=reopen_replaced,  # type: ignore[arg-type]
                     reconnect=Reconnect(first_delay=0.01, give_up_after=0.05)) as src:
        values = []
        with pytest.raises(SourceError):
            while (f := src.get(timeout=5)) is not None:
                values.append(round(float(f.image.mean()), -1))
                time.sleep(0.05)  # slower than the file: the newest-frame rule applies
    assert values[0] == 40 and values[-1] == 200 and src.stats.reopens == 1


def test_close_is_safe_twice_and_stops_the_thread() -> None:
    src = VideoSource(SourceSpec(SourceKind.STREAM, "x"), opener=opener_of(FakeReader(0, 10**6, delay=0.001)))
    src.start()
    assert src.get(timeout=5) is not None
    src.close()
    src.close()
    assert not any(t.name == "edgekit-capture" and t.is_alive() for t in threading.enumerate())


# --- a realtime file is read lazily, like a V4L2 camera ------------------------------------------
def test_a_realtime_mjpg_file_decodes_only_the_frames_handed_out(tmp_path: Path) -> None:
    video = write_video(tmp_path / "v.avi", 40, 80.0, value=lambda i: 6 * i)  # 0.5 s; frame i is gray 6*i
    src = VideoSource(parse_source(video, realtime=True))
    src.open()
    reader = src._reader
    assert reader is not None and is_lazy(reader) and reader._raw  # type: ignore[attr-defined]
    decoded: list[int] = []
    retrieve = reader.retrieve  # type: ignore[attr-defined]

    def counting_retrieve() -> np.ndarray:
        decoded.append(1)
        return retrieve()

    reader.retrieve = counting_retrieve  # type: ignore[attr-defined]
    frames = []
    with src:
        assert isinstance(src._reading, LazyReading)
        while (f := src.get(timeout=5)) is not None:
            frames.append(f)
            time.sleep(0.03)  # a consumer slower than the 80 fps "camera"
    assert len(decoded) == len(frames) < 25
    for f in frames:  # each frame handed out is the one its index names
        assert abs(int(f.image[5, 5, 0]) - (6 * f.index) % 256) <= 3, f.index
        assert f.capture_ms > 0 and f.pixels[1] is False  # read as RGB by the caller above
    stats = src.stats
    assert stats.captured == 40 and len(frames) + stats.dropped == 40 and stats.undecodable == 0


def test_mjpg_that_libjpeg_cannot_read_falls_back_to_ffmpeg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some MJPG files leave out the Huffman tables; only FFmpeg fills them in."""
    from edgekit.sources import readers

    video = write_video(tmp_path / "v.avi", 10, 50.0, value=lambda i: 20 * i)
    monkeypatch.setattr(readers.cv2, "imdecode", lambda *a, **k: None)
    with VideoSource(parse_source(video, realtime=True)) as src:
        assert isinstance(src._reading, LazyReading) and not src._reading.reader._raw  # type: ignore[union-attr]
        frames = []
        while (f := src.get(timeout=5)) is not None:
            frames.append(f)
    assert frames and all(abs(int(f.image[5, 5, 0]) - (20 * f.index) % 256) <= 3 for f in frames)
    assert src.stats.undecodable == 0


@pytest.mark.parametrize("fresh", [True, False])
def test_a_slow_consumer_of_a_live_file_gets_frames_fresher_than_half_a_period(tmp_path: Path, fresh: bool) -> None:
    """20 fps "camera" (P = 50 ms), a consumer busy 70 ms per frame: taking the newest frame at once
    gives ages spread over 0..P (median ~P/2); waiting for the next when the newest is over P/4
    old (reading.FRESH_AGE) keeps them under P/4."""
    video = write_video(tmp_path / "v.avi", 40, 20.0)
    src = VideoSource(parse_source(video, realtime=True), fresh=fresh)
    ages = []
    with src:
        while (f := src.get(timeout=5)) is not None:
            ages.append((time.perf_counter() - f.capture_ts) * 1e3)
            time.sleep(0.07)
    median = float(np.median(ages))
    if fresh:  # a frame whose next never comes (the file's last) is handed out after at most P of waiting
        assert median < 15 and float(np.percentile(ages, 90)) < 25 and max(ages) < 70, ages
    else:
        assert median > 12, ages


def test_an_eager_live_source_swaps_a_stale_frame_for_the_next() -> None:
    spec = SourceSpec(SourceKind.CAMERA, 0, fps=10.0)
    src = ThreadedReading(spec, FakeReader(0, 1), opener=opener_of())  # not started: frames put by hand
    now = time.perf_counter()
    fresh = Frame(1, np.zeros((2, 2, 3), np.uint8), now - 0.02, 0.0, 0.0)
    assert src._fresher(fresh) is fresh  # 20 ms old of a 100 ms period: handed out at once
    middling = Frame(1, np.zeros((2, 2, 3), np.uint8), now - 0.035, 0.0, 0.0)
    newest = Frame(2, np.zeros((2, 2, 3), np.uint8), now, 0.0, 0.0)
    threading.Timer(0.01, src._buffer.put, args=(newest,)).start()
    assert src._fresher(middling) is newest and src.stats.dropped == 1  # 35 ms: over a quarter period
    stale = Frame(2, np.zeros((2, 2, 3), np.uint8), now - 0.08, 0.0, 0.0)
    newer = Frame(3, np.zeros((2, 2, 3), np.uint8), now, 0.0, 0.0)
    threading.Timer(0.01, src._buffer.put, args=(newer,)).start()
    assert src._fresher(stale) is newer and src.stats.dropped == 2
    t0 = time.perf_counter()
    assert src._fresher(Frame(4, np.zeros((2, 2, 3), np.uint8), time.perf_counter() - 0.08, 0.0, 0.0)).index == 4
    assert time.perf_counter() - t0 < 0.2  # nothing newer came: the old frame, after P - age + P/4 (45 ms)


def test_pull_mode_reads_a_file_in_the_callers_thread() -> None:
    """The loop's throughput workers read the file themselves: same frames, counts and end."""
    src = VideoSource(SourceSpec(SourceKind.FILE, "fake"), mode=ReadMode.PULL,
                      opener=opener_of(FakeReader(0, 6, bad=frozenset({2}))))
    with src:
        assert isinstance(src._reading, PulledReading)  # no capture thread
        threads = {threading.get_ident()}
        seen = drain(src)
        assert src.finished and src.get() is None
    assert seen == [0, 1, 3, 4, 5] and threads == {threading.get_ident()}
    assert src.stats.captured == 5 and src.stats.undecodable == 1


class _Exploding(FakeReader):
    def read(self) -> np.ndarray | None:
        raise RuntimeError("driver crashed")


def test_pull_mode_turns_a_reader_crash_into_a_source_error() -> None:
    src = VideoSource(SourceSpec(SourceKind.FILE, "fake"), mode=ReadMode.PULL, opener=opener_of(_Exploding(0, 3)))
    with src, pytest.raises(SourceError, match="driver crashed"):
        src.get()


@pytest.mark.parametrize("size, single", [((64, 48), True), ((1920, 1088), False)])
def test_small_video_files_are_decoded_on_one_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     size: tuple[int, int], single: bool) -> None:
    from edgekit.sources import readers

    video = write_video(tmp_path / "v.avi", 2, 10.0, size=size)
    opened: list[tuple] = []
    real = cv2.VideoCapture

    def recording(*args: object) -> object:
        opened.append(args[1:])
        return real(*args)

    monkeypatch.setattr(readers.cv2, "VideoCapture", recording)
    with VideoSource(video) as src:
        assert src.get(timeout=5) is not None
    if not hasattr(cv2, "CAP_PROP_N_THREADS"):  # OpenCV 4.6 (Debian bookworm): FFmpeg's threads, opened once
        assert opened == [()]
        return
    one_thread = (cv2.CAP_FFMPEG, [cv2.CAP_PROP_N_THREADS, 1])
    assert (one_thread in opened) is single


def test_video_files_open_on_an_opencv_without_the_threads_property(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenCV 4.6 (Debian bookworm's, pip's 4.6.0.66) has no CAP_PROP_N_THREADS: frames still come."""
    from edgekit.sources import readers

    video = write_video(tmp_path / "v.avi", 3, 10.0, size=(64, 48))
    monkeypatch.delattr(readers.cv2, "CAP_PROP_N_THREADS", raising=False)
    with VideoSource(video) as src:
        frames = [src.get(timeout=5) for _ in range(3)]
    assert all(f is not None and f.image.shape == (48, 64, 3) for f in frames)


# --- the read mode is chosen when the source is made ------------------------------------------------
class _LazyFake(FakeReader):
    lazy = True

    def grab(self) -> bool:
        return self.skip()

    def retrieve(self) -> np.ndarray:
        return np.full((self.size[1], self.size[0], 3), (self.next - 1) % 256, dtype=np.uint8)


FILE = SourceSpec(SourceKind.FILE, "fake")
LIVE_FILE = SourceSpec(SourceKind.FILE, "fake", fps=100.0, realtime=True)
STREAM = SourceSpec(SourceKind.STREAM, "rtsp://fake")


@pytest.mark.parametrize("spec, mode, consumers, reader, reading", [
    (FILE, ReadMode.AUTO, 1, FakeReader, ThreadedReading),
    (FILE, ReadMode.AUTO, 2, FakeReader, PulledReading),  # the loop's throughput workers take turns
    (FILE, ReadMode.THREAD, 2, FakeReader, ThreadedReading),  # asked for: a capture thread all the same
    (FILE, ReadMode.PULL, 1, FakeReader, PulledReading),
    (STREAM, ReadMode.AUTO, 2, FakeReader, ThreadedReading),  # live: never pulled
    (LIVE_FILE, ReadMode.AUTO, 1, _LazyFake, LazyReading),  # a reader that grabs now, decodes later
    (LIVE_FILE, ReadMode.THREAD, 1, FakeReader, ThreadedReading),
    (FILE, ReadMode.AUTO, 1, _LazyFake, ThreadedReading),  # lazy only matters when frames are dropped
])
def test_the_reading_follows_the_mode_chosen_at_construction(spec: SourceSpec, mode: ReadMode, consumers: int,
                                                             reader: type[FakeReader], reading: type) -> None:
    with VideoSource(spec, mode=mode, opener=opener_of(reader(0, 5))).start(consumers) as src:
        assert type(src._reading) is reading and src.mode is mode
        assert src.get(timeout=5) is not None


def test_a_live_source_cannot_be_pulled() -> None:
    with pytest.raises(InputError, match="live.*ReadMode.PULL is for files"):
        VideoSource(STREAM, mode=ReadMode.PULL, opener=opener_of(FakeReader(0, 1)))


def test_get_starts_reading_and_close_releases_a_source_only_opened() -> None:
    first, second = FakeReader(0, 3), FakeReader(0, 3)
    src = VideoSource(FILE, opener=opener_of(first, second))
    assert [f.index for f in iter(lambda: src.get(timeout=5), None)] == [0, 1, 2] and src.finished
    src.close()
    opened = VideoSource(FILE, opener=opener_of(second)).open()
    opened.close()
    assert first.closed and second.closed and opened.finished and opened.get() is None
