"""The demo belt's ground truth against per-part verdicts: crossing order, count error, the table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgekit.demo.conveyor import make_video
from edgekit.demo.scene import CLASS_NAMES, PART
from edgekit.inspect.parts import PartInspector, PartsOptions
from edgekit.inspect.parts.report import (TruePart, belt_crossings, crossing_truth, parts_section, parts_tables,
                                          score_parts)
from edgekit.results import Detections
from edgekit.track import CountingLine


@pytest.mark.parametrize("seed, speed", [(0, None), (3, 6.0), (5, 2.5)])
def test_truth_boxes_through_the_parts_logic_come_out_exactly(tmp_path: Path, seed: int, speed: float | None):
    """The demo's belt (clipped boxes at the edges, parts close together), its true boxes as detections:
    every part that crosses the middle is counted once and judged right, in order."""
    truth = make_video(tmp_path / "belt.avi", n_frames=150, fps=15.0, seed=seed, size=160, speed=speed)
    defects = {p.part_id: p.defects for p in truth.parts}
    expected = crossing_truth(truth.frames, part_class=PART, line_x=80, defects=defects)
    assert len(expected) >= 2 and [p.crossed_frame for p in expected] == sorted(p.crossed_frame for p in expected)
    inspector = PartInspector(PartsOptions(parts=("part",), defects=CLASS_NAMES[1:]),
                              CountingLine((80, 0), (80, 160), direction="left_to_right"))
    rng = np.random.default_rng(seed)
    verdicts = []
    for t, f in enumerate(truth.frames):
        dets = Detections(f.boxes + rng.normal(0, 0.5, f.boxes.shape), rng.uniform(0.6, 0.95, len(f.boxes)),
                          f.class_ids, tuple(CLASS_NAMES[c] for c in f.class_ids))
        verdicts += inspector.update(dets, frame=t, timestamp=t / 15, captured_at=t / 15).verdicts
    score = score_parts(verdicts, expected)
    assert score.exact, score.markdown()
    assert [v.reasons and set(v.reasons) for v in verdicts] == [p.defects and set(p.defects) for p in expected]
    assert all(abs(v.crossed_frame - p.crossed_frame) <= 2 for v, p in zip(verdicts, expected))


def test_score_and_table_show_misses_and_wrong_verdicts():
    from edgekit.inspect.parts import PartVerdict
    from edgekit.inspect.verdict import Verdict

    def verdict(seq: int, outcome: Verdict, reasons: tuple[str, ...] = ()) -> PartVerdict:
        return PartVerdict(seq, seq, "part", outcome, reasons, (), 0, 9, 10, 0.0, 1.0, 9, 1.0, 0.0, "line",
                           (0, 0, 1, 1), 3, 0.9)

    truth = [TruePart(0, (), 5), TruePart(1, ("dent",), 20), TruePart(2, (), 40)]
    score = score_parts([verdict(1, Verdict.PASS), verdict(2, Verdict.PASS)], truth)
    assert (score.counted, score.expected, score.count_error, score.right) == (2, 3, -1, 1)
    assert not score.exact and score.accuracy == pytest.approx(1 / 3)
    table = score.markdown()
    assert "| 2 | 2 | 0-9 | PASS |  | FAIL dent | **wrong** | **missing dent** |" in table and "(not counted)" in table
    assert "Parts counted: 2 of 3 (count error -1); verdicts right: 1 of 3 (33 %); reasons right: 1 of 3 (33 %)." \
        in table


def test_table_marks_extra_and_missing_reasons_beside_the_verdict():
    """A FAIL with a false extra reason is a right verdict with wrong reasons: the table says both, and the
    closing line gives reason accuracy beside verdict accuracy (the demo's table once marked it "ok")."""
    from edgekit.inspect.parts import PartVerdict
    from edgekit.inspect.verdict import Verdict

    def verdict(seq: int, reasons: tuple[str, ...]) -> PartVerdict:
        return PartVerdict(seq, seq, "part", Verdict.of(not reasons), reasons, (), 0, 9, 10, 0.0, 1.0, 9, 1.0, 0.0,
                           "line", (0, 0, 1, 1), 3, 0.9)

    truth = [TruePart(0, ("missing_hole",), 5), TruePart(1, ("scratch", "dent"), 20), TruePart(2, ("dent",), 40),
             TruePart(3, (), 60)]
    score = score_parts([verdict(1, ("missing_hole", "dent")), verdict(2, ("dent",)), verdict(3, ("dent",)),
                         verdict(4, ())], truth)
    assert [(r.extra_reasons, r.missing_reasons, r.right, r.reasons_right) for r in score.rows] == [
        (("dent",), (), True, False), ((), ("scratch",), True, False), ((), (), True, True), ((), (), True, True)]
    assert (score.right, score.reasons_right, score.reason_accuracy) == (4, 2, 0.5)
    table = score.markdown()
    assert "| FAIL | missing_hole, dent | FAIL missing_hole | ok | **extra dent** |" in table
    assert "| FAIL | dent | FAIL scratch, dent | ok | **missing scratch** |" in table
    assert "| PASS |  | PASS | ok | ok |" in table
    assert "verdicts right: 4 of 4 (100 %); reasons right: 2 of 4 (50 %)." in table


def test_parts_tables_is_a_valid_config_section(tmp_path: Path):
    from edgekit.inspect.config import parse_config

    head = '[source]\npath = "belt.avi"\nwidth = 320\nheight = 320\n[model]\npath = "m.tflite"\n'
    text = head + parts_tables(320, 320)
    cfg = parse_config(text, base=tmp_path)
    assert cfg.parts.options.defects == ("scratch", "dent", "missing_hole")
    assert cfg.parts.line.start.tolist() == [160, 0]


def test_parts_section_for_the_demo_summary(tmp_path: Path):
    truth = make_video(tmp_path / "belt.avi", n_frames=90, fps=15.0, seed=0, size=160)
    inspector = PartInspector(PartsOptions(parts=("part",), defects=CLASS_NAMES[1:]),
                              CountingLine((80, 0), (80, 160), direction="left_to_right"))
    verdicts = []
    for t, f in enumerate(truth.frames):
        dets = Detections(f.boxes, np.full(len(f.boxes), 0.9), f.class_ids, tuple(CLASS_NAMES[c] for c in f.class_ids))
        verdicts += inspector.update(dets, frame=t, timestamp=t / 15, captured_at=t / 15).verdicts
    expected = belt_crossings(truth.frames, truth.parts, part_class=PART, line_x=80)
    lines = parts_section(verdicts, expected, line_x=80)
    text = "\n".join(lines)
    passed = sum(v.passed for v in verdicts)
    assert lines[0].startswith("## Parts") and f"PASS {passed}, FAIL {len(verdicts) - passed} parts." in text
    assert f"Parts counted: {len(verdicts)} of {len(expected)} (count error +0)" in text and "**" not in text


def test_score_within_frames_pairs_by_crossing_frame():
    """One missed part does not shift every later pair: verdicts are paired with the true part that crossed
    at about the same frame."""
    from edgekit.inspect.parts import PartVerdict
    from edgekit.inspect.verdict import Verdict

    def verdict(seq: int, frame: int, outcome: Verdict) -> PartVerdict:
        return PartVerdict(seq, seq, "part", outcome, (), (), 0, 9, 10, 0.0, 1.0, frame, 1.0, 0.0, "line",
                           (0, 0, 1, 1), 3, 0.9)

    truth = [TruePart(0, (), 5), TruePart(1, ("dent",), 20), TruePart(2, (), 40), TruePart(3, ("dent",), 60)]
    verdicts = [verdict(1, 6, Verdict.PASS), verdict(2, 41, Verdict.PASS), verdict(3, 61, Verdict.FAIL),
                verdict(4, 90, Verdict.PASS)]
    in_order = score_parts(verdicts, truth)
    assert in_order.right == 1 and in_order.count_error == 0  # the miss and the extra cancel out in the count
    aligned = score_parts(verdicts, truth, within=5)
    assert [(r.verdict.sequence if r.verdict else None, r.truth.part_id if r.truth else None)
            for r in aligned.rows] == [(1, 0), (None, 1), (2, 2), (3, 3), (4, None)]
    assert aligned.right == 3 and aligned.count_error == 0 and (aligned.missed, aligned.extra) == (1, 1)



def test_parts_side_by_side_are_paired_by_row(tmp_path: Path):
    """Two parts abreast cross a frame apart, in either order: each verdict goes with the true part in
    its row (crossing_truth keeps the row of each crossing), not with whichever crossed first."""
    from edgekit.inspect.parts import PartVerdict
    from edgekit.inspect.verdict import Verdict

    def verdict(seq: int, frame: int, outcome: Verdict, row: float) -> PartVerdict:
        return PartVerdict(seq, seq, "part", outcome, (), (), 0, 9, 10, 0.0, 1.0, frame, 1.0, 0.0, "line",
                           (100, row - 30, 160, row + 30), 3, 0.9)

    truth = [TruePart(0, ("dent",), 10, row=240.0), TruePart(1, (), 11, row=80.0)]
    verdicts = [verdict(1, 10, Verdict.PASS, 85.0), verdict(2, 11, Verdict.FAIL, 236.0)]
    score = score_parts(verdicts, truth, within=8)
    assert [(r.verdict.sequence, r.truth.part_id) for r in score.rows] == [(1, 1), (2, 0)]
    assert score.right == 2
    assert score_parts(verdicts, truth).right == 0  # in crossing order alone both pairs are wrong

    video = make_video(tmp_path / "b.avi", n_frames=40, seed=3, speed=12, gap=(0.02, 0.08), abreast=1.0)
    crossing = crossing_truth(video.frames, part_class=PART, line_x=160,
                              defects={p.part_id: p.defects for p in video.parts})
    together = [(a, b) for a, b in zip(crossing, crossing[1:]) if b.crossed_frame - a.crossed_frame <= 3]
    assert together and all(abs((a.row or 0) - (b.row or 0)) > 80 for a, b in together)
