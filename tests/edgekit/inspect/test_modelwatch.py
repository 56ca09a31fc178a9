"""Hot model updates with the real models in ../shared/models: switch, refuse, roll back."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from edgekit.errors import ModelError
from edgekit.inspect.events import EventKind
from edgekit.inspect.modelwatch import ModelWatcher, find_versions, write_expected_outputs
from tests.conftest import shared_model

SMALL = "mobilenet_v1_0.25_128_quant.tflite"


def _image(path: Path, size: int) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB").resize((size, size)), dtype=np.uint8)


@pytest.fixture
def root(tmp_path: Path, shared_models: Path, shared_images: Path) -> Path:
    """models/inspection with version 1, a golden input and version 1's expected outputs."""
    r = tmp_path / "models" / "inspection"
    deploy(r, 1, shared_model(shared_models, SMALL))
    (r / "golden").mkdir()
    np.save(r / "golden" / "hopper.npy", _image(shared_images / "grace_hopper.png", 128))
    write_expected_outputs(r / "1" / "model.tflite", r, 1)
    return r


def deploy(root: Path, version: int, source: Path | bytes) -> Path:
    """Copy a version in the recommended way: into a hidden folder, then one rename."""
    tmp = root / f".{version}.tmp"
    tmp.mkdir(parents=True)
    target = tmp / "model.tflite"
    if isinstance(source, bytes):
        target.write_bytes(source)
    else:
        shutil.copyfile(source, target)
    os.rename(tmp, root / str(version))
    return root / str(version) / "model.tflite"


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[EventKind, dict[str, Any]]] = []

    def __call__(self, kind: EventKind, payload: dict[str, Any]) -> None:
        self.items.append((kind, payload))

    def kinds(self) -> list[tuple[str, int]]:
        return [(k.value, p["version"]) for k, p in self.items]

    def wait(self, kind: EventKind, version: int, timeout: float = 15) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for k, p in list(self.items):
                if k is kind and p["version"] == version:
                    return p
            time.sleep(0.01)
        raise AssertionError(f"no {kind.value} event for version {version}: {self.kinds()}")


def settle(watcher: ModelWatcher) -> None:
    """Two polls: a file is loaded once its size and time held still for one poll."""
    watcher.poll()
    watcher.poll()


def test_switch_while_streaming_and_corrupt_version_refused(root: Path, shared_models: Path) -> None:
    events = Events()
    watcher = ModelWatcher(root, poll_seconds=0.05, on_event=events).start()
    x = np.load(root / "golden" / "hopper.npy")
    served: list[tuple[int, int, int]] = []  # (frame, version, top-1 class)
    stop = threading.Event()
    old_model = watcher.model

    def stream() -> None:
        frame = 0
        while not stop.is_set():
            model = watcher.acquire()  # between two frames
            top1 = int(np.argmax(model.run(x)[0]))
            served.append((frame, watcher.current.version, top1))  # type: ignore[union-attr]
            frame += 1

    t = threading.Thread(target=stream)
    t.start()
    try:
        while len(served) < 20:
            time.sleep(0.005)
        deploy(root, 2, shared_model(shared_models, SMALL))
        switch = events.wait(EventKind.MODEL_SWITCH, 2)
        data = (root / "1" / "model.tflite").read_bytes()
        deploy(root, 3, data[: len(data) // 2])
        refused = events.wait(EventKind.MODEL_REFUSED, 3)
        n = len(served)
        while len(served) < n + 20:
            time.sleep(0.005)
    finally:
        stop.set()
        t.join()
        watcher.close()
    frames = [f for f, _, _ in served]
    versions = [v for _, v, _ in served]
    assert frames == list(range(len(served))), "every frame got a result"
    assert versions == sorted(versions) and set(versions) == {1, 2}, "one switch, 1 -> 2, never back"
    assert versions[-1] == 2 and watcher.current.version == 2  # type: ignore[union-attr]
    assert len({c for _, _, c in served}) == 1, "same weights, same answer across the switch"
    assert old_model.closed
    assert events.kinds() == [("model_switch", 1), ("model_switch", 2), ("model_refused", 3)]
    assert switch["from"] == "inspection/1" and switch["selftest"]["cases"] == 1
    assert "corrupt or truncated" in refused["reason"] and refused["serving"] == "inspection/2"


def _variant(kind: str, root: Path, shared_models: Path, shared_images: Path) -> None:
    small = shared_model(shared_models, SMALL)
    if kind == "random bytes":
        deploy(root, 2, np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    elif kind == "other task":  # another input is fine (tests/edgekit/inspect/test_hotswap.py), another task not
        deploy(root, 2, shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite"))
    elif kind == "edge tpu only":
        deploy(root, 2, shared_model(shared_models, "mobilenet_v1_0.25_128_quant_edgetpu.tflite"))
    elif kind == "fails self-test":
        deploy(root, 2, small)
        # expected outputs that belong to another picture: the self-test must catch the mismatch
        other = root.parent / "other"
        (other / "golden").mkdir(parents=True)
        np.save(other / "golden" / "hopper.npy", _image(shared_images / "parrot.jpg", 128))
        write_expected_outputs(small, other, 2)
        (root / "2" / "golden").mkdir()
        shutil.copyfile(other / "2" / "golden" / "hopper.npz", root / "2" / "golden" / "hopper.npz")


@pytest.mark.parametrize("kind, reason", [
    ("random bytes", "TFLite"),
    ("other task", "it is a detect model, the serving model a classify model (a different task)"),
    ("edge tpu only", "Edge TPU"),
    ("fails self-test", "differs from hopper.npz"),
])
def test_refused_versions_keep_the_old_one(root: Path, shared_models: Path, shared_images: Path, kind: str,
                                           reason: str) -> None:
    events = Events()
    with ModelWatcher(root, on_event=events).start(background=False) as watcher:
        _variant(kind, root, shared_models, shared_images)
        settle(watcher)
        assert watcher.acquire() is watcher.model and watcher.current.version == 1  # type: ignore[union-attr]
        [(k, payload)] = events.items[1:]
        assert k is EventKind.MODEL_REFUSED and payload["version"] == 2
        assert reason in payload["reason"], payload["reason"]
        settle(watcher)  # not retried while the file stays the same
        assert len(events.items) == 2


def test_start_skips_a_broken_newest_version(root: Path) -> None:
    deploy(root, 2, b"TFL3 definitely not a model")
    events = Events()
    with ModelWatcher(root, on_event=events).start(background=False) as watcher:
        assert watcher.current.version == 1  # type: ignore[union-attr]
    assert events.kinds() == [("model_refused", 2), ("model_switch", 1)]


@pytest.mark.parametrize("setup, message", [
    ("empty", "has no version"),
    ("all broken", "no version in .* can serve: 2: .*; 1: "),
])
def test_nothing_to_serve(tmp_path: Path, setup: str, message: str) -> None:
    root = tmp_path / "m"
    root.mkdir()
    if setup == "all broken":
        deploy(root, 1, b"")
        deploy(root, 2, b"x" * 100)
    with pytest.raises(ModelError, match=message):
        ModelWatcher(root).start(background=False)


def test_rollback_when_the_serving_version_is_removed(root: Path, shared_models: Path) -> None:
    deploy(root, 2, shared_model(shared_models, SMALL))
    events = Events()
    with ModelWatcher(root, on_event=events).start(background=False) as watcher:
        assert watcher.current.version == 2  # type: ignore[union-attr]
        shutil.rmtree(root / "2")
        settle(watcher)
        watcher.acquire()
        assert watcher.current.version == 1  # type: ignore[union-attr]
    assert events.kinds() == [("model_switch", 2), ("model_switch", 1)]


def test_refused_version_is_retried_when_its_file_changes(root: Path, shared_models: Path) -> None:
    events = Events()
    with ModelWatcher(root, on_event=events).start(background=False) as watcher:
        model_file = deploy(root, 2, b"broken")
        settle(watcher)
        tmp = model_file.with_name(".model.tflite.new")
        shutil.copyfile(shared_model(shared_models, SMALL), tmp)
        os.replace(tmp, model_file)  # the fixed file, replaced atomically
        settle(watcher)
        watcher.acquire()
        assert watcher.current.version == 2  # type: ignore[union-attr]
    assert events.kinds() == [("model_switch", 1), ("model_refused", 2), ("model_switch", 2)]


def test_a_file_still_being_copied_is_not_loaded(root: Path, shared_models: Path) -> None:
    data = shared_model(shared_models, SMALL).read_bytes()
    events = Events()
    with ModelWatcher(root, on_event=events).start(background=False) as watcher:
        (root / "2").mkdir()  # copied in place, not renamed: the slow way
        with open(root / "2" / "model.tflite", "wb") as f:
            f.write(data[:1000])
            f.flush()
            watcher.poll()  # sees it for the first time
            f.write(data[1000:])
        watcher.poll()  # changed since: still not loaded
        assert events.kinds() == [("model_switch", 1)]
        watcher.poll()  # unchanged for a poll: loaded
        watcher.acquire()
    assert events.kinds() == [("model_switch", 1), ("model_switch", 2)]


def test_links_out_of_the_folder_are_ignored(root: Path, shared_models: Path, tmp_path: Path) -> None:
    (root / "2").mkdir()
    (root / "2" / "model.tflite").symlink_to(shared_model(shared_models, SMALL))
    (root / "latest").mkdir()  # not a number: ignored too
    assert sorted(find_versions(root)) == [1]
