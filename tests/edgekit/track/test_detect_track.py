"""`edgekit detect --track` on the real SSD model: a track_id in every JSON detection (boxes no confirmed
track took are left out, as supervision's ByteTrack leaves them out), the same id on the same object from
frame to frame, and "#id" drawn on the saved video."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgekit.drawing import draw
from edgekit.results import Detections
from edgekit.track import TrackedDetections
from tests.conftest import shared_model, write_mjpg

cv2 = pytest.importorskip("cv2")
FRAMES = 12


@pytest.fixture(scope="module")
def panning_video(tmp_path_factory: pytest.TempPathFactory, shared_images: Path) -> Path:
    """kite_and_cold.jpg sliding 4 pixels a frame to the right."""
    img = cv2.resize(cv2.imread(str(shared_images / "kite_and_cold.jpg")), (640, 426))
    return write_mjpg(tmp_path_factory.mktemp("track") / "pan.avi",
                      (np.ascontiguousarray(img[:, 40 - 3 * i:640 - 3 * i]) for i in range(FRAMES)), 10)


def test_detect_track_json_and_save(panning_video: Path, shared_models: Path, tmp_path: Path) -> None:
    ssd = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    saved = tmp_path / "tracked.avi"
    out = subprocess.run([sys.executable, "-m", "edgekit", "detect", "-m", str(ssd), "--labels",
                          str(shared_models / "coco_labels.txt"), "--source", str(panning_video), "--json", "-t",
                          "0.4", "--track", "--save", str(saved)], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "DISPLAY": ""})
    assert out.returncode == 0, out.stderr
    frames = [json.loads(line)["detections"] for line in out.stdout.splitlines()]
    assert len(frames) == FRAMES
    assert sum(len(dets) for dets in frames) > 3 * FRAMES
    assert all(isinstance(d["track_id"], int) for dets in frames for d in dets)  # every detection written has an id
    # the people and kites stand still in the scene, which pans 3 pixels a frame: a steady track keeps
    # one label and its box moves with the pan (SSD keeps its 10 best boxes, so weak ones come and go)
    seen: dict[int, list[tuple[int, str, float]]] = {}
    for i, dets in enumerate(frames):
        for d in dets:
            seen.setdefault(d["track_id"], []).append((i, d["label"], (d["box"][0] + d["box"][2]) / 2))
    assert all(len({label for _, label, _ in rows}) == 1 for rows in seen.values())
    steady = {tid: rows for tid, rows in seen.items() if len(rows) >= 9}
    assert len(steady) >= 3
    speeds = [(rows[-1][2] - rows[0][2]) / (rows[-1][0] - rows[0][0]) for rows in steady.values()]
    assert 2.0 <= float(np.median(speeds)) <= 4.0, speeds
    cap = cv2.VideoCapture(str(saved))
    count = 0
    while cap.read()[0]:
        count += 1
    assert count == FRAMES


def test_draw_shows_track_ids() -> None:
    frame = np.zeros((120, 200, 3), np.uint8)
    plain = Detections([[20, 40, 120, 100]], [0.9], [0], ("part",))
    tracked = TrackedDetections(plain.xyxy, plain.scores, plain.class_ids, plain.labels, [7])
    a, b = draw(frame, plain), draw(frame, tracked)
    label_row = slice(0, 40)
    assert (b[label_row] != 0).any(axis=2).sum() > (a[label_row] != 0).any(axis=2).sum()  # "#7 part 0.90" is wider
    assert tracked.to_list()[0]["track_id"] == 7
    assert TrackedDetections(plain.xyxy, plain.scores, plain.class_ids, plain.labels, [-1]).to_list()[0][
        "track_id"] is None


@pytest.mark.parametrize("score", [0.5, 0.5 + 1 / 256, 0.9])
def test_detect_tracker_takes_a_box_at_exactly_the_threshold(score: float) -> None:
    """detect keeps boxes scoring >= -t; ByteTrack's high boxes score > its threshold: one at exactly 0.5
    (a uint8 score step) must still start and keep a track, so it is written with its id."""
    from edgekit.track import ByteTracker

    tracker = ByteTracker.at_threshold(0.5)
    ids = []
    for x in range(0, 40, 8):
        d = Detections(np.array([[x, 10, x + 60, 70]], np.float32), np.array([score], np.float32), [0])
        ids.append(int(tracker.follow(d).track_ids[0]))
    assert len(set(ids)) == 1 and ids[0] >= 1


def test_a_library_user_tracks_through_the_stream(panning_video: Path, shared_models: Path) -> None:
    """Detector.stream(track=True) is what `detect --track` runs: the same ids on the same boxes, and a
    classifier refuses it in one sentence."""
    from edgekit import Classifier, ClassifierOptions, Detector, DetectorOptions
    from edgekit.errors import InputError
    from edgekit.track import ByteTracker

    ssd = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    with Detector(DetectorOptions(model=str(ssd), threshold=0.4)) as det:
        tracked = [r.result for r in det.stream(str(panning_video), track=True, performance="latency")]
        plain = [r.result for r in det.stream(str(panning_video), performance="latency")]
    assert len(tracked) == len(plain) == FRAMES
    assert all(isinstance(t, TrackedDetections) and (t.track_ids >= 0).all() for t in tracked)
    by_hand = ByteTracker.at_threshold(0.4)
    for t, p in zip(tracked, plain):
        assert isinstance(p, Detections)
        expected = by_hand.follow(p)
        np.testing.assert_array_equal(t.track_ids, expected.track_ids)
        np.testing.assert_allclose(t.xyxy, expected.xyxy)
    with Classifier(ClassifierOptions(model=str(shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite")))) as cls:
        with pytest.raises(InputError, match="track=True follows boxes"):
            cls.stream(str(panning_video), track=True)
