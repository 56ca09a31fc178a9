"""Per-part mode in a cell: the [parts]/[line]/[plc] config with line-numbered errors, one `part`
event per part through the sinks, counters per verdict and reason, crops, and one reject per failed
part on pymodbus' own server; bad input stops the cell at start."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from edgekit.errors import ConfigError
from edgekit.fleet.cellhook import frame_health
from edgekit.inspect import Cell
from edgekit.inspect.config import parse_config
from edgekit.inspect.parts import PartVerdict
from edgekit.inspect.parts.stage import PartsStage
from edgekit.inspect.plc import PlcError
from edgekit.results import Detections, FrameResult

HEAD = """
device = "cell-9"
state_dir = "state"
[source]
path = "belt.avi"
width = 640
height = 400
[model]
path = "model.tflite"
"""
PARTS = """
[parts]
classes = ["part"]
defects = ["scratch", "dent"]
crops = true
[line]
start = [320, 0]
end = [320, 400]
direction = "left_to_right"
"""


def _config(tmp_path: Path, extra: str = "", parts: str = PARTS, head: str = HEAD):
    return parse_config(head + parts + extra, name="cell.toml", base=tmp_path)


def test_config_reads_parts_line_and_plc(tmp_path: Path) -> None:
    cfg = _config(tmp_path, '[plc]\nhost = "10.0.0.5"\ncoil = 3\ndistance = 0.6\nbelt_speed = 0.25\ngpio_pin = 17\n')
    assert cfg.parts is not None and cfg.parts.options.parts == ("part",) and cfg.parts.crops
    assert cfg.parts.options.defects == ("scratch", "dent") and cfg.parts.line.direction.value == "left_to_right"
    plc = cfg.parts.plc
    assert plc.modbus.address == 3 and plc.modbus.host == "10.0.0.5" and plc.gpio_pin == 17
    assert plc.delay == pytest.approx(2.4) and plc.delay_ticks is None
    ticks = _config(tmp_path, '[plc]\ngpio_pin = 17\nencoder_pin = 27\ndelay_ticks = 480\nencoder_edge = "both"\n')
    assert (ticks.parts.plc.encoder_pin, ticks.parts.plc.delay_ticks, ticks.parts.plc.encoder_edge) == (27, 480, "both")
    counting = _config(tmp_path, parts=PARTS.replace("[line]", "count_score = 0.4\npiece_overlap = 0.7\n[line]"))
    assert (counting.parts.options.count_score, counting.parts.options.piece_overlap) == (0.4, 0.7)
    assert cfg.parts.options.whole_defects  # on by default: a defect box cut by the frame's edge is no sighting
    loose = _config(tmp_path, parts=PARTS.replace("[line]", "whole_defects = false\n[line]"))
    assert not loose.parts.options.whole_defects
    assert _config(tmp_path, parts="").parts is None


@pytest.mark.parametrize("extra, parts, message", [
    ("", "[line]\nstart = [0, 0]\nend = [0, 400]\n", r"cell.toml:10: line: needs a \[parts\] table"),
    ("", "[parts]\nclasses = [\"part\"]\n", r"cell.toml:10: parts: per-part mode needs a \[line\] table"),
    ("", PARTS.replace("end = [320, 400]", "end = [320, 500]"),
     r"cell.toml:15: line: line 'line' from .*outside the 640x400 frame"),
    ("", PARTS.replace("start = [320, 0]", "start = [0, 200]").replace("end = [320, 400]", "end = [640, 200]"),
     r"cell.toml:18: line.direction: line 'line' from .*runs along left_to_right"),
    ("", PARTS.replace('direction = "left_to_right"', 'direction = "leftwards"'),
     r"cell.toml:18: line.direction: expected one of 'left_to_right'"),
    ("[plc]\nhost = \"10.0.0.5\"\ncoil = 70000\n", PARTS,
     r"cell.toml:21: plc.coil: expected a Modbus address 0..65535"),
    ("[plc]\nhost = \"10.0.0.5\"\ncoil = 1\nregister = 2\n", PARTS,
     r"cell.toml:20: plc.host: give exactly one of coil"),
    ("[plc]\nhost = \"10.0.0.5\"\ncoil = 1\ndelay = 1\ndistance = 2\nbelt_speed = 1\n", PARTS,
     r"cell.toml:22: plc.delay: give delay .* not both"),
    ("[plc]\ndelay = 1\n", PARTS, r"cell.toml:19: plc: give host and coil"),
    ("[plc]\ngpio_pin = 17\ndelay_ticks = 480\n", PARTS, r"cell.toml:21: plc.delay_ticks: .* and encoder_pin go together"),
    ("[plc]\ngpio_pin = 17\nencoder_pin = 27\ndelay_ticks = 480\ndelay = 2\n", PARTS,
     r"plc.delay_ticks: give the delay in encoder ticks or in seconds"),
    ("[plc]\ngpio_pin = 17\nencoder_pin = 27\ndelay_ticks = -3\n", PARTS,
     r"plc.delay_ticks: expected an integer >= 0"),
    ("", PARTS.replace("[line]", "count_score = 2\n[line]"), r"parts.count_score: expected a number in 0..1"),
    ("[plc]\nhost = \"10.0.0.5\"\ncoils = 1\n", PARTS, r"plc.coils: unknown key; did you mean 'coil'\?"),
    ("", PARTS.replace('defects = ["scratch", "dent"]', 'defects = "scratch"'),
     r"cell.toml:13: parts.defects: expected an array of class names"),
    ("", PARTS.replace('defects = ["scratch", "dent"]', 'defects = ["part"]'),
     r"cell.toml:11: parts: 'part' cannot be both a part and a defect"),
])
def test_config_errors_name_file_line_and_key(tmp_path: Path, extra: str, parts: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, extra, parts)


class _Stream:
    def __init__(self, results: list[FrameResult]) -> None:
        self.results, self.stopped = results, False

    def __iter__(self):
        for r in self.results:
            if self.stopped:
                return
            yield r

    def stop(self, reason: str = "") -> None:
        self.stopped = True

    summary = None

    def close(self) -> None:
        pass


class _Detector:
    """A CellDetector that plays generated detections of a belt (with a blank frame each)."""

    labels = ["part", "scratch", "dent"]

    def __init__(self, frames, model_file: Path) -> None:
        self.frames = frames
        self.model = SimpleNamespace(path=str(model_file), backend=SimpleNamespace(name="fake"),
                                     delegate=SimpleNamespace(value="cpu"))

    def stream(self, source, *, max_frames=None, duration=None):
        image = np.full((400, 640, 3), 80, np.uint8)
        captured = SimpleNamespace(image=image, bgr=image)
        return _Stream([FrameResult(i, 1000.0 + i / 15, float(i) / 15, 5.0, dets, captured=captured)
                        for i, dets in enumerate(self.frames)])

    def close(self) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cell_files(tmp_path: Path, extra: str) -> tuple[Path, str]:
    (tmp_path / "model.tflite").write_bytes(b"not read by the fake detector")
    (tmp_path / "belt.avi").write_bytes(b"")
    text = HEAD + PARTS + '[sinks.jsonl]\ndirectory = "events"\n' + extra
    return tmp_path / "cell.toml", text


def test_cell_gives_one_event_per_part_counters_crops_and_rejects(tmp_path: Path, make_parts_belt,
                                                                  modbus_server) -> None:
    pytest.importorskip("prometheus_client")
    belt = make_parts_belt(11, n_parts=7)
    _, text = _cell_files(tmp_path, f'[metrics]\nport = {_free_port()}\n[plc]\nhost = "127.0.0.1"\n'
                                    f'port = {modbus_server.port}\ncoil = 5\ndelay = 0.05\npulse = 0.05\n')
    config = parse_config(text, name="cell.toml", base=tmp_path)
    with Cell(config, detector=_Detector(belt.frames, tmp_path / "model.tflite")) as cell:
        verdicts = list(cell.run())
        # a reject goes out `delay` after its verdict, on the PLC's own thread: the last one may still be due
        written = f'edgekit_rejects_total{{result="written"}} {float(sum(not v.passed for v in verdicts))}'
        deadline = time.monotonic() + 5
        while written not in (metrics_text := cell.metrics.text()) and time.monotonic() < deadline:
            time.sleep(0.02)
        rejector = cell.stage(PartsStage).rejector  # type: ignore[union-attr]
    assert all(isinstance(v, PartVerdict) for v in verdicts)
    assert [tuple(sorted(v.reasons)) for v in verdicts] == belt.truth  # no per-frame decisions in this mode
    failed = [v for v in verdicts if not v.passed]
    assert 0 < len(failed) < len(verdicts)
    events = [json.loads(line) for f in sorted((tmp_path / "events").glob("events-*.jsonl"))
              for line in f.read_text().splitlines()]
    parts = [e["payload"] for e in events if e["kind"] == "part"]
    assert [p["part"] for p in parts] == [1, 2, 3, 4, 5, 6, 7] and [p["verdict"] for p in parts] == [
        v.outcome.value for v in verdicts]
    assert all(Path(p["crop"]).is_file() for p in parts)
    rejects = [e["payload"] for e in events if e["kind"] == "reject"]
    assert sorted(r["part"] for r in rejects if r["result"] == "written") == [v.sequence for v in failed]
    assert [(fc, addr) for fc, addr, _ in modbus_server.sets] == [(5, 5)] * len(failed)  # one reject per FAIL
    assert rejector is not None
    for v in failed:
        assert f'edgekit_parts_total{{reason="{v.reason}",verdict="FAIL"}}' in metrics_text
    passes = sum(v.passed for v in verdicts)
    assert f'edgekit_parts_total{{reason="none",verdict="PASS"}} {float(passes)}' in metrics_text
    assert f'edgekit_rejects_total{{result="written"}} {float(len(failed))}' in metrics_text
    # numbering goes on after a restart
    with Cell(config, detector=_Detector(belt.frames[:150], tmp_path / "model.tflite")) as cell:
        again = list(cell.run())
    assert again and again[0].sequence == 8


def test_unreachable_plc_stops_the_cell_at_start(tmp_path: Path) -> None:
    _, text = _cell_files(tmp_path, f'[plc]\nhost = "127.0.0.1"\nport = {_free_port()}\ncoil = 1\ntimeout = 0.3\n')
    config = parse_config(text, name="cell.toml", base=tmp_path)
    with pytest.raises(PlcError, match="cannot connect to the PLC at 127.0.0.1"):
        Cell(config, detector=_Detector([], tmp_path / "model.tflite")).open()


def test_defect_class_the_model_lacks_stops_the_cell_at_start(tmp_path: Path) -> None:
    _, text = _cell_files(tmp_path, "")
    config = parse_config(text.replace('defects = ["scratch", "dent"]', 'defects = ["scratch", "dnet"]'),
                          name="cell.toml", base=tmp_path)
    with pytest.raises(ConfigError, match=r"cell.toml:11: defects class 'dnet' is not a label of the model. "
                                          r"Did you mean 'dent'\?"):
        Cell(config, detector=_Detector([], tmp_path / "model.tflite")).open()


def test_line_outside_the_frames_the_source_delivers(tmp_path: Path) -> None:
    _, text = _cell_files(tmp_path, "")
    text = text.replace("width = 640\nheight = 400\n", "").replace("end = [320, 400]", "end = [320, 480]")
    config = parse_config(text, name="cell.toml", base=tmp_path)
    with Cell(config, detector=_Detector([Detections.empty()], tmp_path / "model.tflite")) as cell:
        with pytest.raises(ConfigError, match=r"line 'line' \(cell.toml:13\) .* reaches outside the 640x400 frame"):
            list(cell.run())


def test_stop_mid_run_loses_no_part_event_and_still_sends_due_rejects(tmp_path: Path, make_parts_belt,
                                                                    modbus_server) -> None:
    """What SIGTERM does (Cell.stop): the verdicts made so far are all in the sinks, and a reject queued
    for a part still on its way to the ejector goes out before the cell closes."""
    belt = make_parts_belt(11, n_parts=7)
    _, text = _cell_files(tmp_path, f'[plc]\nhost = "127.0.0.1"\nport = {modbus_server.port}\ncoil = 2\n'
                                    'delay = 0.3\npulse = 0\n')
    config = parse_config(text, name="cell.toml", base=tmp_path)
    seen = []
    with Cell(config, detector=_Detector(belt.frames, tmp_path / "model.tflite")) as cell:
        for verdict in cell.run():
            seen.append(verdict)
            if not verdict.passed:
                cell.stop("SIGTERM")
    assert seen and not seen[-1].passed and len(seen) < 7
    events = [json.loads(line) for f in sorted((tmp_path / "events").glob("events-*.jsonl"))
              for line in f.read_text().splitlines()]
    assert [e["payload"]["part"] for e in events if e["kind"] == "part"] == [v.sequence for v in seen]
    assert [(fc, addr) for fc, addr, _ in modbus_server.sets] == [(5, 2)]  # sent after the stop, when due
    assert events[-1]["kind"] == "status" and events[-1]["payload"]["state"] == "stopped"


def test_plc_encoder_from_the_config_holds_the_reject_for_its_ticks(tmp_path: Path, monkeypatch) -> None:
    """[plc] encoder_pin + delay_ticks: the stage opens a GPIO encoder on the pin and the reject waits
    for the belt's ticks (gpiozero's mock pins stand in for the Pi's)."""
    gpiozero = pytest.importorskip("gpiozero")
    from gpiozero.pins.mock import MockFactory

    from edgekit.inspect.encoder import GpioEncoder
    from edgekit.inspect.events import EventEmitter
    from edgekit.inspect.parts.stage import PartsStage
    from edgekit.inspect.plc import ReportKind
    from edgekit.inspect.stage import StageContext

    factory = MockFactory()
    monkeypatch.setattr(gpiozero.Device, "pin_factory", factory)
    cfg = _config(tmp_path, "[plc]\ngpio_pin = 17\ngpio_pulse = 0.05\nencoder_pin = 27\ndelay_ticks = 4\n")
    stage = PartsStage(cfg.parts)
    Path(cfg.state_dir).mkdir(parents=True, exist_ok=True)  # the cell makes it when it opens
    stage.open(StageContext(cfg, EventEmitter("cell-9"), live=lambda: None, labels=["part", "scratch", "dent"]))
    try:
        rejector = stage.rejector
        encoder_pin, reject_pin = factory.pin(27), factory.pin(17)
        assert isinstance(rejector.encoder, GpioEncoder) and rejector.delay_ticks == 4
        rejector.reject(1, 3, time.perf_counter())
        for _ in range(3):
            encoder_pin.drive_high()
            encoder_pin.drive_low()
        time.sleep(0.1)
        assert rejector.counts[ReportKind.WRITTEN] == 0 and not reject_pin.state
        encoder_pin.drive_high()
        deadline = time.monotonic() + 5
        while rejector.counts[ReportKind.WRITTEN] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rejector.counts[ReportKind.WRITTEN] == 1
    finally:
        stage.close()
    assert [s.state for s in reject_pin.states][:2] == [False, True]


def test_a_fleet_trial_sees_the_part_verdicts(tmp_path: Path, make_parts_belt) -> None:
    """Per-part mode has no per-frame decisions: the health check of a version on trial gets each frame's
    part verdicts instead (a FAIL where a failed part crossed, nothing where none did)."""
    belt = make_parts_belt(11, n_parts=7)
    _, text = _cell_files(tmp_path, "")
    config = parse_config(text, name="cell.toml", base=tmp_path)
    seen: list[bool | None] = []
    health = SimpleNamespace(open=lambda context: None, close=lambda: None, process=lambda frame: seen.append(
        frame_health(frame.result, frame.decisions, frame.parts)[1]))
    with Cell(config, detector=_Detector(belt.frames, tmp_path / "model.tflite"), stages=[health]) as cell:
        verdicts = list(cell.run())
    judged = [failed for failed in seen if failed is not None]
    assert len(seen) == len(belt.frames) and judged == [not v.passed for v in verdicts]
