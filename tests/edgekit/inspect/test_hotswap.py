"""Hot model updates whose input differs from the serving model's (flaw 5): a larger input size,
float32 instead of int8. Accepted, with the preprocessing rebuilt while the version loads;
refused only for another task, output format or label set, each named."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from PIL import Image

from edgekit.contract.modelreading import read_model
from edgekit.inspect.events import EventKind
from edgekit.inspect.hotswap import HotSwapEngine
from edgekit.inspect.modelwatch import ModelWatcher
from edgekit.inspect.selftest import compatible
from edgekit.runtimes import TensorSpec
from edgekit.tasks import ClassifierOptions, make_engine
from tests.conftest import shared_model
from tests.fixtures_models import tiny_models  # noqa: F401 - a fixture

SMALL = "mobilenet_v1_0.25_128_quant.tflite"  # uint8 128x128
LARGE = "mobilenet_v2_1.0_224_quant.tflite"  # uint8 224x224, the same 1001 ImageNet classes
SSD = "ssd_mobilenet_v1_coco_quant.tflite"


def deploy(root: Path, version: int, source: Path) -> None:
    tmp = root / f".{version}.tmp"
    tmp.mkdir(parents=True)
    shutil.copyfile(source, tmp / "model.tflite")
    os.rename(tmp, root / str(version))


def settle(watcher: ModelWatcher) -> None:
    watcher.poll()  # a file is loaded once its size and time held still for one poll
    watcher.poll()


# --- the rule: what must stay, what may change -----------------------------------------------
def _spec(shape: tuple[int, ...], dtype: Any = np.uint8, scale: float = 0.0) -> TensorSpec:
    return TensorSpec("t", 0, shape, np.dtype(dtype), scale)


def _model(inputs: tuple[int, ...], outputs: list[tuple[int, ...]], dtype: Any = np.uint8,
           **meta: Any) -> Any:
    fake = SimpleNamespace(inputs=[_spec(inputs, dtype, 0.0078 if dtype == np.int8 else 0.0)],
                           outputs=[_spec(s, np.float32) for s in outputs], metadata=meta or None, ops={},
                           support=None)
    fake.reading = lambda task=None: read_model(fake, task=task)  # as a loaded Model reads itself
    return fake


SSD_OUT = [(1, 10, 4), (1, 10), (1, 10), (1,)]
YOLO_OUT = [(1, 8, 2100)]
LABELS = ["part", "scratch", "dent", "missing_hole"]


@pytest.mark.parametrize("new, reason", [
    (_model((1, 320, 320, 3), YOLO_OUT, np.int8, task="detect", labels=LABELS), None),
    (_model((1, 320, 320, 3), YOLO_OUT, np.float32, task="detect", labels=LABELS), None),
    (_model((1, 640, 640, 3), [(1, 8, 8400)], np.float32, task="detect", labels=LABELS), None),
    (_model((1, 320, 320, 3), YOLO_OUT, np.int8, task="detect"), None),  # no labels inside: the config's apply
    (_model((1, 320, 320, 3), [(1, 1001)], np.int8), "a classify model, the serving model a detect model"),
    # a segmenter is a segment model (the self-test once called every non-classifier "detect")
    (_model((1, 320, 320, 3), [(1, 320, 320, 21)], np.float32), "a segment model, the serving model a detect model"),
    (_model((1, 300, 300, 3), SSD_OUT, np.uint8, task="detect", labels=LABELS),
     "its outputs read as ssd, the serving model's as yolo (a different output format"),
    (_model((1, 320, 320, 3), YOLO_OUT, np.int8, task="detect", labels=LABELS[:3] + ["hole"]),
     "a different label set: it adds ['hole'], lacks ['missing_hole']"),
    (_model((1, 320, 320, 3), YOLO_OUT, np.int8, task="detect", labels=LABELS[::-1]),
     "a different label set: it orders them differently"),
])
def test_only_task_output_format_and_labels_must_stay(new: Any, reason: str | None) -> None:
    serving = _model((1, 320, 320, 3), YOLO_OUT, np.int8, task="detect", labels=LABELS)
    got = compatible(new, serving)
    assert got is None if reason is None else (got is not None and reason in got), got


# --- a model folder: a larger input is accepted and its engine built in the background ----------
@pytest.fixture
def root(tmp_path: Path, shared_models: Path, shared_images: Path) -> Path:
    """models/cls with the small classifier as version 1 and a 128x128 golden image."""
    r = tmp_path / "models" / "cls"
    deploy(r, 1, shared_model(shared_models, SMALL))
    (r / "golden").mkdir()
    image = Image.open(shared_images / "parrot.jpg").convert("RGB").resize((128, 128))
    np.save(r / "golden" / "parrot.npy", np.asarray(image, dtype=np.uint8))
    return r


def _classifier(labels: Path, built_in: list[str]) -> Any:
    def build(model: Any, options: Any) -> Any:
        built_in.append(threading.current_thread().name)
        return make_engine(model, ClassifierOptions(model="", labels=labels, top_k=1))
    return build


def test_a_version_with_a_larger_input_is_accepted(root: Path, shared_models: Path) -> None:
    events: list[tuple[EventKind, dict[str, Any]]] = []
    built_in: list[str] = []
    build = _classifier(shared_models / "imagenet_labels.txt", built_in)
    watcher = ModelWatcher(root, on_event=lambda k, p: events.append((k, p)),
                           prepare=lambda m: build(m, None)).start(background=False)
    with HotSwapEngine(watcher, ClassifierOptions(model=""), build) as engine:  # type: ignore[arg-type]
        deploy(root, 2, shared_model(shared_models, LARGE))
        settle(watcher)
        assert [k for k, _ in events] == [EventKind.MODEL_SWITCH], events  # loaded, not yet serving
        assert engine.model.inputs[0].shape == (1, 128, 128, 3)
        assert len(built_in) == 2, "version 2's engine was built while it loaded, before the switch"
        frame = np.load(root / "golden" / "parrot.npy")
        transform = engine.write(frame)  # the live path: the next frame takes the new version
        top = engine.decode(engine.infer(), transform)
    assert [(k.value, p["version"]) for k, p in events] == [("model_switch", 1), ("model_switch", 2)]
    assert events[1][1]["selftest"]["cases"] == 1, "the 128x128 golden image was resized for the 224 model"
    assert top[0].label == "macaw" and top[0].score > 0.9  # type: ignore[index]
    assert len(built_in) == 2, "the switch took the engine built in advance"


@pytest.mark.slow
def test_an_int8_model_replaced_by_its_float32_build(tmp_path: Path, tiny_models: Any) -> None:  # noqa: F811
    root = tmp_path / "models" / "tiny"
    deploy(root, 1, tiny_models.int8_path)
    events: list[tuple[EventKind, dict[str, Any]]] = []
    with ModelWatcher(root, on_event=lambda k, p: events.append((k, p))).start(background=False) as watcher:
        deploy(root, 2, tiny_models.float_path)
        settle(watcher)
        model = watcher.acquire()
        x = tiny_models.x[:1]
        out = model.run(x)[0]
    assert [(k.value, p["version"]) for k, p in events] == [("model_switch", 1), ("model_switch", 2)], events
    assert model.inputs[0].dtype == np.float32
    np.testing.assert_allclose(out, tiny_models.y[:1], atol=1e-5)


# --- frames preprocessed for the old version when the new one takes over ----------------------
class FakeEngine:
    """An engine whose input is `shape`; records what it was asked to do."""

    def __init__(self, name: str, shape: tuple[int, ...], model: Any) -> None:
        self.name, self.spec, self.model, self.labels = name, _spec(shape), model, None
        self.lock = threading.Lock()
        self.calls: list[str] = []

    def staging(self) -> np.ndarray:
        return np.zeros(self.spec.shape, self.spec.dtype)

    def write(self, image: np.ndarray, dest: np.ndarray | None = None, *, bgr: bool = False) -> Any:
        assert dest is None or dest.shape == self.spec.shape, "a buffer made for another input"
        self.calls.append("write" if dest is None else "stage")
        return f"{self.name}-transform"

    def load(self, staged: np.ndarray) -> None:
        assert staged.shape == self.spec.shape, "a buffer made for another input"
        self.calls.append("load")

    def infer(self) -> list[np.ndarray]:
        self.calls.append("infer")
        return [np.zeros(1)]

    def decode(self, outputs: list[np.ndarray], transform: Any) -> Any:
        return (self.name, transform)


class FakeWatcher:
    def __init__(self) -> None:
        self.models = [SimpleNamespace(n=1), SimpleNamespace(n=2)]
        self.serving = self.models[0]
        self.engines = {1: FakeEngine("v1", (1, 128, 128, 3), self.models[0]),
                        2: FakeEngine("v2", (1, 224, 224, 3), self.models[1])}
        self.prepared: Any = self.engines[1]

    def acquire(self) -> Any:
        return self.serving

    def switch(self) -> None:
        self.serving, self.prepared = self.models[1], self.engines[2]

    def close(self) -> None:
        pass


def test_a_frame_staged_for_the_old_input_is_preprocessed_again_for_the_new() -> None:
    watcher = FakeWatcher()
    engine = HotSwapEngine(watcher, ClassifierOptions(model=""),  # type: ignore[arg-type]
                           build=lambda m, o: pytest.fail("the watcher prepared every engine"))
    image = np.zeros((480, 640, 3), np.uint8)
    buffers = [engine.staging(), engine.staging()]  # made for v1's input, as the loop does at start
    results = []
    transform = engine.write(image, buffers[0])  # staged ahead by v1 ...
    watcher.switch()  # ... and v2 is ready when the inference thread loads it
    engine.load(buffers[0])
    results.append(engine.decode(engine.infer(), transform))
    transform = engine.write(image, buffers[1])  # staged by v2, into a buffer of its own input's shape
    engine.load(buffers[1])
    results.append(engine.decode(engine.infer(), transform))
    assert results == [("v2", "v2-transform"), ("v2", "v2-transform")], "boxes map back through v2's resize"
    assert watcher.engines[1].calls == ["stage"]
    assert watcher.engines[2].calls == ["write", "infer", "stage", "load", "infer"]


# --- the case a user met: a cell serving an int8 detector gets its float32 build --------------
@pytest.mark.slow
def test_a_cell_serving_int8_takes_the_float32_build_of_the_same_detector(tmp_path: Path) -> None:
    pytest.importorskip("tensorflow")
    cv2 = pytest.importorskip("cv2")
    from edgekit.converters import ConvertOptions, convert
    from edgekit.inspect import Cell, parse_config
    from tests._tiny_models import yolo_head

    rng = np.random.default_rng(0)
    (tmp_path / "cal").mkdir()
    for i in range(16):
        cv2.imwrite(str(tmp_path / "cal" / f"{i}.png"), rng.integers(0, 256, (32, 32, 3), dtype=np.uint8))
    model = yolo_head(seed=2)
    opts = ConvertOptions(task="detect", labels=("part", "scratch", "dent"), progress=False, diagnose=False)
    q8 = convert(model, tmp_path / "int8.tflite", calibration=tmp_path / "cal", mode="int8", options=opts)
    f32 = convert(model, tmp_path / "float.tflite", calibration=tmp_path / "cal", mode="float32", options=opts)
    root = tmp_path / "models" / "det"
    deploy(root, 1, q8.output)
    video = tmp_path / "belt.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 30, (64, 64))
    for _ in range(150):
        writer.write(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))
    writer.release()
    config = parse_config(f"""
device = "cell-1"
state_dir = "{tmp_path / 'state'}"
[source]
path = "{video}"
realtime = true
[model]
dir = "{root}"
threshold = 0.3
poll_seconds = 0.05
[[rules]]
label = "scratch"
max = 1000
[sinks.jsonl]
directory = "{tmp_path / 'events'}"
""", base=tmp_path)
    with Cell.from_config(config) as cell:
        for decision in cell.run():
            if decision.frame == 10:
                deploy(root, 2, f32.output)
    events = [json.loads(line) for f in sorted((tmp_path / "events").glob("*.jsonl"))
              for line in f.read_text().splitlines()]
    models = [(e["kind"], e["payload"].get("version")) for e in events if e["kind"].startswith("model")]
    assert models == [("model_switch", 1), ("model_switch", 2)], models  # accepted, not refused
    switch = next(e for e in events if e["kind"] == "model_switch" and e["payload"]["version"] == 2)
    assert switch["payload"]["from"] == "det/1"
    versions = [e["model_version"] for e in events if e["kind"] == "inspection"]
    assert versions[0] == "det/1" and versions[-1] == "det/2" and versions == sorted(versions)
