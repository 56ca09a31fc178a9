"""`edgekit detect --track` on the real SSD model: a track_id in every JSON detection, the same id on
the same object from frame to frame, and "#id" drawn on the saved video."""

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
    assert all("track_id" in d for dets in frames for d in dets)
    assert all(d["track_id"] is not None for d in frames[0])  # the first frame confirms every track
    # the people and kites stand still in the scene, which pans 3 pixels a frame: a steady track keeps
    # one label and its box moves with the pan (SSD keeps its 10 best boxes, so weak ones come and go)
    seen: dict[int, list[tuple[int, str, float]]] = {}
    for i, dets in enumerate(frames):
        for d in dets:
            if d["track_id"] is not None:
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
