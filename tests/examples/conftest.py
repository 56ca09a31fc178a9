"""Fixtures for examples/raspberrypi: a short video of real objects and a cell config for it.

The video stands in for the camera: the people-and-kites photo from ../shared/images, at
676x450, some frames with the people blacked out, so a cell's verdicts change from PASS to FAIL
and back (the real SSD model finds 4-5 persons in the photo and none in the blacked frames).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from tests.conftest import missing, shared_model, write_mjpg

VIDEO_SIZE = (676, 450)
# True: the photo as it is; False: the people (lower left) blacked out.
VIDEO_FRAMES = (True, True, False, False, True, False, True, True)

CellConfig = Callable[..., str]


def write_kites_video(path: Path, images: Path) -> Path:
    """An MJPG .avi of VIDEO_FRAMES built from kite_and_cold.jpg (OpenCV writes MJPG everywhere), at 10 fps."""
    import cv2

    photo = cv2.imread(str(images / "kite_and_cold.jpg"))
    if photo is None:
        pytest.skip(missing("kite_and_cold.jpg", images))
    small = cv2.resize(photo, VIDEO_SIZE, interpolation=cv2.INTER_AREA)
    blacked = small.copy()
    blacked[200:, :300] = 0
    return write_mjpg(path, (small if keep else blacked for keep in VIDEO_FRAMES), 10.0)


@pytest.fixture(scope="session")
def kites_video(tmp_path_factory: pytest.TempPathFactory, shared_images: Path) -> Path:
    return write_kites_video(tmp_path_factory.mktemp("video") / "line.avi", shared_images)


@pytest.fixture(scope="session")
def ssd_model(shared_models: Path) -> tuple[Path, Path]:
    """The COCO SSD model (no labels in its metadata) and its labels file."""
    return shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite"), shared_models / "coco_labels.txt"


def golden_input(images: Path) -> np.ndarray:
    """A uint8 (300, 300, 3) golden input for the SSD model: the photo, resized."""
    import cv2

    return cv2.resize(cv2.imread(str(images / "kite_and_cold.jpg")), (300, 300))[:, :, ::-1].copy()


@pytest.fixture(scope="session")
def cell_config() -> CellConfig:
    """cell_config(source=..., model_dir=..., labels=..., state_dir=..., extra=...) -> TOML text:
    continuous verdicts for the kites video (person >= 2, a kite in the sky zone, at most 8
    persons counted from score 0.3), events to state_dir/events."""

    def make(*, source: str, model_dir: str, labels: str, state_dir: str, events: str | None = None,
             extra: str = "") -> str:
        w, h = VIDEO_SIZE
        return f"""
device = "cell-ci"
state_dir = "{state_dir}"

[source]
{source}

[model]
dir = "{model_dir}"
labels = "{labels}"
threshold = 0.5

[trigger]
mode = "continuous"

[[zones]]
name = "sky"
polygon = [[0, 0], [{w}, 0], [{w}, 150], [0, 150]]

[[rules]]
label = "person"
min = 2

[[rules]]
zone = "sky"
label = "kite"
min = 1

[[rules]]
label = "person"
max = 8
min_score = 0.3

[sinks.jsonl]
directory = "{events or state_dir + '/events'}"
{extra}
"""

    return make
