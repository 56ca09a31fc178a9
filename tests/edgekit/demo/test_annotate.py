"""annotated.avi: the counting line, the track ids and each part's verdict at its crossing, read back from
the written file (MJPG, so colours are compared with a tolerance)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from edgekit.demo.annotate import VerdictVideo, verdict_text
from edgekit.inspect.stage import JudgedFrame
from edgekit.demo.conveyor import make_video
from edgekit.demo.scene import CLASS_NAMES
from edgekit.drawing import FAIL_COLOR, LINE_COLOR, PASS_COLOR, draw
from edgekit.inspect.parts import PartInspector, PartsOptions
from edgekit.results import Detections, FrameResult
from edgekit.sources.frames import Frame
from edgekit.track import CountingLine, TrackedDetections

cv2 = pytest.importorskip("cv2")
SIZE, FPS = 160, 15.0


def _near(pixels: np.ndarray, rgb: tuple[int, int, int], tol: int = 60) -> np.ndarray:
    """Which BGR pixels are within ``tol`` (sum of channel differences) of the RGB colour."""
    return np.abs(pixels.astype(np.int32) - np.array(rgb[::-1])).sum(axis=-1) <= tol


def _read(path: Path) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, img = cap.read()
        if not ok:
            return frames
        frames.append(img)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):
    """The demo belt's true boxes through the parts logic and VerdictVideo, as the cell runs it."""
    folder = tmp_path_factory.mktemp("annotate")
    truth = make_video(folder / "belt.avi", n_frames=120, fps=FPS, seed=0, size=SIZE)
    line = CountingLine((SIZE // 2, 0), (SIZE // 2, SIZE), direction="left_to_right")
    inspector = PartInspector(PartsOptions(parts=("part",), defects=CLASS_NAMES[1:]), line)
    video = VerdictVideo(folder / "annotated.avi", FPS)
    video.open(SimpleNamespace(config=SimpleNamespace(parts=SimpleNamespace(line=line)),  # type: ignore[arg-type]
                               checking=False))
    cap = cv2.VideoCapture(str(folder / "belt.avi"))
    verdicts, tracked = [], []
    for t, f in enumerate(truth.frames):
        ok, image = cap.read()
        assert ok
        dets = Detections(f.boxes, np.full(len(f.boxes), 0.9, np.float32), f.class_ids,
                          tuple(CLASS_NAMES[c] for c in f.class_ids))
        frame = inspector.update(dets, frame=t, timestamp=t / FPS, captured_at=t / FPS)
        result = FrameResult(t, t / FPS, t / FPS, 0.0, dets, captured=Frame(t, image, t / FPS, t / FPS, 0.0, bgr=True))
        video.process(JudgedFrame(result, [], list(frame.verdicts), frame))
        verdicts += frame.verdicts
        tracked.append(frame.parts.confirmed())
    video.close()
    video.close()  # safe twice
    return _read(folder / "annotated.avi"), verdicts, tracked, _read(folder / "belt.avi")


def test_every_frame_is_written_with_the_counting_line(written) -> None:
    frames, _, _, plain = written
    assert len(frames) == len(plain) == 120
    for img, raw in zip(frames[::10], plain[::10]):
        on_line = _near(img[:, SIZE // 2 - 1:SIZE // 2 + 2], LINE_COLOR).any(axis=1)
        assert on_line.mean() > 0.6  # amber down the middle, parts crossing it hide some rows
        assert not _near(raw[:, SIZE // 2 - 1:SIZE // 2 + 2], LINE_COLOR).any(axis=1).mean() > 0.2


def test_each_verdict_is_drawn_on_its_part_from_the_crossing(written) -> None:
    frames, verdicts, _, plain = written
    assert len(verdicts) >= 3 and {v.passed for v in verdicts} == {True, False}
    for v in verdicts:
        colour = PASS_COLOR if v.passed else FAIL_COLOR
        x1, y1, x2, y2 = (int(round(c)) for c in v.box)
        region = (slice(max(0, y1 - 14), min(SIZE, y2 + 2)), slice(max(0, x1 - 2), min(SIZE, x2 + 2)))
        shown = _near(frames[v.judged_frame][region], colour).sum()
        before = _near(frames[max(0, v.judged_frame - 2)][region], colour).sum()
        raw = _near(plain[v.judged_frame][region], colour).sum()
        assert shown > max(3 * raw, 40) and shown > 2 * before, (verdict_text(v), shown, before, raw)
    assert verdict_text(verdicts[0]).startswith(f"#{verdicts[0].track_id} ")


def test_tracked_parts_are_drawn_with_their_ids(written) -> None:
    """The frames hold the drawing of the tracked parts with "#id" labels: the same image as drawing them here
    (up to MJPG's loss), which is not the drawing without ids."""
    frames, _, tracked, plain = written
    t = next(i for i, p in enumerate(tracked) if len(p) and i > 5)
    parts = tracked[t]
    with_ids = draw(plain[t], parts.as_detections(), bgr=True)
    without = draw(plain[t], Detections(parts.detections.xyxy, parts.detections.scores, parts.detections.class_ids,
                                        parts.detections.labels), bgr=True)
    assert isinstance(parts.as_detections(), TrackedDetections) and (parts.track_ids >= 1).all()
    x1, y1, x2, _ = (int(v) for v in parts.detections.xyxy[0])
    label = (slice(max(0, y1 - 12), y1 + 2), slice(max(0, x1), min(SIZE, x2)))
    got = frames[t][label].astype(np.int32)
    assert np.abs(got - with_ids[label]).mean() < np.abs(got - without[label]).mean()
