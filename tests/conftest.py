"""Shared fixtures: the real models and photos in tests/data (or $EDGEKIT_TEST_MODELS/IMAGES, ../shared), and a
fake video reader for the sources and the loop."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pytest

from edgekit.errors import SourceError
from edgekit.sources import BadFrame, SourceSpec

# Session fixtures that build models (tiny_models, vision_models): any test may ask for them by name.
pytest_plugins = ["tests.fixtures_models"]

ROOT = Path(__file__).resolve().parent.parent
# The isolation cache of passed files (edgekit.runtimes.passed) is off, so that every test that
# loads a model with isolation runs the child as it did before the cache; the tests of the cache
# turn it on, in a folder of their own. Whatever writes a per-user cache writes it here.
os.environ["EDGEKIT_ISOLATE_CACHE"] = "0"
os.environ["XDG_CACHE_HOME"] = _CACHE = tempfile.mkdtemp(prefix="edgekit-test-cache-")
atexit.register(shutil.rmtree, _CACHE, True)
DATA = ROOT / "tests" / "data"
WHERE = ("tests/data in this repository (see tests/data/README.md: google-coral/test_data and TensorFlow's "
         "COCO SSD MobileNet v1 release, Apache-2.0)")


def _shared(env: str, name: str) -> Path | None:
    """The folder of real test models or photos: tests/data first, then $<env>, then ../shared/<name>."""
    for c in (DATA, os.environ.get(env), ROOT.parent / "shared" / name):
        if c and Path(c).is_dir():
            return Path(c)
    return None


SHARED_MODELS = _shared("EDGEKIT_TEST_MODELS", "models")
SHARED_IMAGES = _shared("EDGEKIT_TEST_IMAGES", "images")


def missing(name: str, folder: Path | None) -> str:
    """The skip reason for a real model or photo that is not here: what is missing, where it was looked for,
    and where it comes from."""
    looked = folder if folder is not None else "tests/data, $EDGEKIT_TEST_MODELS/$EDGEKIT_TEST_IMAGES or ../shared"
    return f"{name} is not in {looked}; it belongs in {WHERE}"


@pytest.fixture(scope="session")
def shared_models() -> Path:
    if SHARED_MODELS is None:
        pytest.skip(missing("the real test models", None))
    return SHARED_MODELS


@pytest.fixture(scope="session")
def shared_images() -> Path:
    if SHARED_IMAGES is None:
        pytest.skip(missing("the real test photos", None))
    return SHARED_IMAGES


def shared_model(shared_models: Path, name: str) -> Path:
    p = shared_models / name
    if not p.exists():
        pytest.skip(missing(name, shared_models))
    return p


def write_mjpg(path: Path, frames: Iterable[np.ndarray], fps: float) -> Path:
    """An MJPG video at ``path`` of the BGR ``frames`` (all of one size), as a camera would record them."""
    import cv2

    writer = None
    for frame in frames:
        if writer is None:
            writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (frame.shape[1], frame.shape[0]))
        writer.write(frame)
    if writer is None:
        raise ValueError("write_mjpg needs at least one frame")
    writer.release()
    return path


class FakeReader:
    """A video reader (edgekit.sources.Reader) whose frames' pixels all equal their number (mod 256);
    ``bad`` numbers fail to decode. RGB, read eagerly."""

    fps = 30.0
    frames = None
    bgr = False
    lazy = False

    def __init__(self, start: int, count: int, *, delay: float = 0.0, bad: frozenset[int] = frozenset(),
                 size: tuple[int, int] = (32, 24)) -> None:
        self.next, self.end, self.delay, self.bad, self.size = start, start + count, delay, bad, size
        self.closed = False

    def read(self) -> np.ndarray | None:
        if self.next >= self.end:
            return None
        if self.delay:
            time.sleep(self.delay)
        n, self.next = self.next, self.next + 1
        if n in self.bad:
            raise BadFrame(f"frame {n} is damaged")
        return np.full((self.size[1], self.size[0], 3), n % 256, dtype=np.uint8)

    def skip(self) -> bool:
        self.next += 1
        return self.next <= self.end

    def close(self) -> None:
        self.closed = True


def opener_of(*readers: FakeReader | Exception) -> Callable[[SourceSpec], FakeReader]:
    """Each open returns the next reader (or raises the next exception); then it keeps failing."""
    queue = list(readers)

    def open_(spec: SourceSpec) -> FakeReader:
        item = queue.pop(0) if queue else SourceError("gone for good")
        if isinstance(item, Exception):
            raise item
        return item

    return open_


@pytest.fixture()
def passed_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The per-user cache of models that passed isolation (edgekit.runtimes.passed), turned on in a
    folder of the test's own: the path of its file."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("EDGEKIT_ISOLATE_CACHE", raising=False)
    return tmp_path / "xdg" / "edgekit" / "isolation-passed.json"


def _has_schema() -> bool:
    """edgekit meta writes through the TFLite schema module of ai-edge-litert or TensorFlow
    (tflite-runtime, 32-bit Pi OS's interpreter, has none)."""
    import importlib.util

    return any(importlib.util.find_spec(m) is not None for m in ("ai_edge_litert", "tensorflow"))


needs_schema = pytest.mark.skipif(not _has_schema(), reason="edgekit meta needs the TFLite schema module of "
                                  "ai-edge-litert or TensorFlow (pip install ai-edge-litert); this venv has neither")
