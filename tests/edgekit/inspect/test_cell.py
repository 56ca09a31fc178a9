"""The inspection cell as a library: README's example run as written, and the cell's seams
(a detector, a source and event sinks of the caller's own), on the real SSD model and a video
made from a real photo."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from edgekit.inspect import Cell, CellDetector, Decision, load_config
from edgekit.inspect.events import Event
from tests.conftest import ROOT, shared_model
from tests.edgekit.inspect.conftest import kite_video

cv2 = pytest.importorskip("cv2")

SSD = "ssd_mobilenet_v1_coco_quant.tflite"
FRAMES = 12


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory, shared_images: Path) -> Path:
    return kite_video(tmp_path_factory.mktemp("video") / "line.avi", shared_images, FRAMES)


def write_config(folder: Path, video: Path, models: Path, extra: str = "") -> Path:
    cfg = folder / "inspection.toml"
    cfg.write_text(f"""
device = "cell-7"
state_dir = "state"
[source]
path = "{video}"
[model]
path = "{shared_model(models, SSD)}"
labels = "{models / 'coco_labels.txt'}"
threshold = 0.4
[[zones]]
name = "sky"
polygon = [[0, 0], [640, 0], [640, 200], [0, 200]]
[[rules]]
zone = "sky"
label = "kite"
min = 1
{extra}
""")
    return cfg


def readme_block(containing: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    [block] = [b for b in blocks if containing in b]
    return block


def test_readme_example_runs_a_cell_without_the_cli(tmp_path: Path, video: Path, shared_models: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    write_config(tmp_path, video, shared_models, '[sinks.jsonl]\ndirectory = "events"\n')
    monkeypatch.chdir(tmp_path)
    code = readme_block("from edgekit.inspect import Cell")
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - README's own example, as a user runs it

    *decisions, summary = capsys.readouterr().out.splitlines()
    assert decisions == [f"{i} PASS" for i in range(FRAMES)]
    assert summary.startswith(f"{FRAMES} frames processed of {FRAMES} captured") and "end of source" in summary
    events = [json.loads(line) for f in sorted((tmp_path / "events").glob("events-*.jsonl"))
              for line in f.read_text().splitlines()]
    assert [e["kind"] for e in events] == ["status"] + ["inspection"] * FRAMES + ["status"]
    assert [e["seq"] for e in events] == list(range(1, FRAMES + 3))
    assert events[1]["payload"]["rules"][0]["count"] >= 1 and events[1]["model_version"].startswith(
        "ssd_mobilenet_v1_coco_quant@")


class ListSink:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.closed = 0

    def write(self, event: Event) -> None:
        self.events.append(event)

    def close(self) -> None:
        self.closed += 1


def test_a_cell_on_the_callers_detector_source_and_sink(tmp_path: Path, video: Path, shared_models: Path,
                                                        shared_images: Path) -> None:
    from edgekit import Detector, load_image
    from edgekit.sources import parse_source

    config = load_config(write_config(tmp_path, video, shared_models))
    sink = ListSink()
    with Detector.create_from_model_path(shared_model(shared_models, SSD), threshold=0.4,
                                         labels=shared_models / "coco_labels.txt") as detector:
        engine: CellDetector = detector
        with Cell(config, detector=engine, source=parse_source(str(video)), sinks=[sink]) as cell:
            decisions = list(cell.run(max_frames=5))
        assert all(isinstance(d, Decision) and d.passed for d in decisions)
        assert [d.frame for d in decisions] == list(range(5)) and cell.published == 5
        assert cell.summary is not None and cell.summary.processed == 5 and cell.summary.stopped_by == "max frames"
        # the cell closed what it opened (the sink), not the detector it was given
        assert sink.closed == 1
        assert "kite" in detector.detect(load_image(shared_images / "kite_and_cold.jpg")).labels
    kinds = [(e.kind.value, e.payload.get("state")) for e in sink.events]
    assert kinds == [("status", "starting")] + [("inspection", None)] * 5 + [("status", "stopped")]
    assert sink.events[-1].payload["decisions"] == 5


@pytest.mark.parametrize("case, error", [
    ("not opened", "open the cell first"),
    ("unknown label", "label 'kyte'"),
])
def test_misuse_and_bad_config_say_what_to_do(tmp_path: Path, video: Path, shared_models: Path, case: str,
                                              error: str) -> None:
    from edgekit.errors import ConfigError

    cfg = write_config(tmp_path, video, shared_models)
    if case == "not opened":
        from edgekit.inspect.cell import CellNotOpen

        with pytest.raises(CellNotOpen, match=error):
            next(Cell.from_config(load_config(cfg)).run())
        return
    cfg.write_text(cfg.read_text().replace('label = "kite"', 'label = "kyte"'))
    with pytest.raises(ConfigError, match=error):
        with Cell.from_config(load_config(cfg)):
            pass
    assert not any((tmp_path / "state").glob("*.tmp")), "nothing half written"
