"""The cell as a pipeline of stages: the config's stages in order, a library user's stage after them
(opened with the cell's context, handed every judged frame, closed once), and the LiveState the cell
publishes (its tallies agree with what run() yielded; sinks' queues and the PLC through public methods)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from edgekit.inspect import Cell, Decision
from edgekit.inspect.config import parse_config
from edgekit.inspect.dashboard.cellview import _plc
from edgekit.inspect.live import LiveState, RejectState, SinkState, sink_state
from edgekit.inspect.parts import PartVerdict
from edgekit.inspect.parts.stage import PartsStage
from edgekit.inspect.plc import RejectReport, ReportKind
from edgekit.inspect.stage import JudgedFrame, StageContext
from edgekit.inspect.stages import RulesStage
from edgekit.inspect.verdict import Verdict
from tests.edgekit.inspect.test_perpart import _cell_files, _Detector


class Recorder:
    """A library user's stage: what it was opened with, what each frame carried, how often it closed."""

    def __init__(self) -> None:
        self.context: StageContext | None = None
        self.frames: list[tuple[int, int, int]] = []  # (frame, decisions, part verdicts)
        self.closed = 0
        self.live: list[LiveState] = []

    def open(self, context: StageContext) -> None:
        self.context = context

    def process(self, frame: JudgedFrame) -> None:
        self.frames.append((frame.result.index, len(frame.decisions), len(frame.parts)))
        assert self.context is not None
        self.live.append(self.context.live())

    def close(self) -> None:
        self.closed += 1


def test_a_users_stage_runs_after_the_configs_and_reads_what_the_cell_publishes(tmp_path: Path,
                                                                                make_parts_belt: Any) -> None:
    belt = make_parts_belt(11, n_parts=7)
    _, text = _cell_files(tmp_path, '[[rules]]\nlabel = "scratch"\nmax = 0\n')  # per-frame decisions too
    config = parse_config(text, name="cell.toml", base=tmp_path)
    recorder = Recorder()
    with Cell(config, detector=_Detector(belt.frames, tmp_path / "model.tflite"), stages=[recorder]) as cell:
        assert [type(s) for s in cell.stages] == [PartsStage, RulesStage, Recorder]
        assert cell.stage(PartsStage) is cell.stages[0] and cell.stage(Recorder) is recorder
        assert recorder.context is not None and recorder.context.labels == ["part", "scratch", "dent"]
        out = list(cell.run())
        live = cell.live()
    assert recorder.closed == 1 and cell.stages == []
    parts = [v for v in out if isinstance(v, PartVerdict)]
    decisions = [v for v in out if isinstance(v, Decision)]
    # every frame reached the user's stage after the parts and rules had judged it
    assert [f[0] for f in recorder.frames] == list(range(len(belt.frames)))
    assert sum(f[2] for f in recorder.frames) == len(parts) == len(belt.truth)
    assert all(f[1] == 1 for f in recorder.frames) and len(decisions) == len(belt.frames)
    # what the cell published agrees with what it yielded, frame by frame and at the end
    assert [s.processed for s in recorder.live] == list(range(len(belt.frames)))  # read before its own tally
    assert (live.captured, live.processed, live.dropped) == (len(belt.frames), len(belt.frames), 0)
    assert live.tallies.parts == {v: sum(p.outcome is v for p in parts) for v in Verdict}
    assert live.tallies.frames == {v: sum(d.verdict.verdict is v for d in decisions) for v in Verdict}
    assert live.tallies.published == cell.published == len(decisions) and live.tallies.errors == 0
    assert live.model is not None and live.model.file == "model.tflite" and live.model.version.startswith("model@")
    assert live.sinks == (SinkState("rotatingjsonl"),) and live.rejects is None and live.device == "cell-9"


class Queued:
    def __init__(self, n: int | None) -> None:
        self.n = n

    def write(self, event: Any) -> None: ...

    def close(self) -> None: ...

    def queued(self) -> int:
        if self.n is None:
            raise OSError("the queue is being closed")
        return self.n


class PlainSink:
    def write(self, event: Any) -> None: ...

    def close(self) -> None: ...


@pytest.mark.parametrize("sink, expected", [
    (Queued(3), SinkState("queued", 3)),
    (Queued(None), SinkState("queued", None)),  # a queue being closed reports nothing, raises nothing
    (PlainSink(), SinkState("plain", None)),  # no queue of its own
])
def test_a_sinks_state_comes_from_its_public_queue(sink: Any, expected: SinkState) -> None:
    assert sink_state(sink) == expected


def _report(kind: ReportKind, error: str | None = None) -> RejectReport:
    return RejectReport(kind, "modbus", 4, 9, 1, 2.5, error)


@pytest.mark.parametrize("last, state, error", [
    (None, "idle", None),
    (_report(ReportKind.WRITTEN), "ok", None),
    (_report(ReportKind.RETRY, "timed out"), "retrying", "timed out"),
    (_report(ReportKind.FAILED, "gave up"), "failed", "gave up"),
    (_report(ReportKind.DROPPED, "queue full"), "failed", "queue full"),
])
def test_the_dashboards_plc_state_is_the_rejectors_last_report(last: RejectReport | None, state: str,
                                                                error: str | None) -> None:
    counts = {kind: 0 for kind in ReportKind}
    doc = _plc(RejectState(("modbus",), counts, queued=2, delay_s=0.5, latency_ms_p50=None, last=last))
    assert (doc["state"], doc["last_error"], doc["queued"], doc["outputs"]) == (state, error, 2, ["modbus"])
    assert {k: doc[k] for k in ("written", "retry", "failed", "dropped")} == {k.value: 0 for k in ReportKind}
    assert _plc(None) == {"state": "none"}
