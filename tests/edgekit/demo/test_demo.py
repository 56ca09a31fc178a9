"""`edgekit demo --quick` end to end: every step runs for real and leaves its files."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

pytest.importorskip("tensorflow", reason="the demo trains a model: needs the convert extra")


@pytest.mark.slow
def test_quick_demo_runs_every_step(demo) -> None:
    out, proc = demo
    assert proc.returncode in (0, 3), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    for step in ("[1/7]", "[4/7]", "[7/7]"):
        assert step in proc.stderr  # progress shown throughout
    for name in ("detector.keras", "detector_float32.tflite", "belt.avi", "annotated.avi", "detections.jsonl",
                 "detect_summary.json", "bench.json", "convert_int8.json", "convert_float32.json", "verdicts.jsonl",
                 "inspection.toml", "summary.md"):
        assert (out / name).exists(), name
    assert "training 100%" in proc.stderr and "45/45 steps" in proc.stderr and "ETA" in proc.stderr


@pytest.mark.slow
def test_gate_outcome_matches_exit_status_and_file_names(demo) -> None:
    out, proc = demo
    report = json.loads((out / "convert_int8.json").read_text())
    passed = report["gate"]["passed"]
    assert (proc.returncode == 0) == passed
    assert (out / "detector_int8.tflite").exists() == passed
    assert (out / "detector_int8.FAILED-GATE.tflite").exists() == (not passed)
    assert report["metrics"]  # measured against the float model, not skipped


@pytest.mark.slow
def test_int8_model_carries_metadata_and_runs_on_the_video(demo) -> None:
    from edgekit.runtimes import inspect_model

    out, _ = demo
    model = next(p for p in out.glob("detector_int8*.tflite"))
    meta = inspect_model(model).metadata
    assert meta["task"] == "detect" and meta["labels"] == ["part", "scratch", "dent", "missing_hole"]
    lines = (out / "detections.jsonl").read_text().splitlines()
    assert len(lines) >= 30  # 60 frames at 15 fps, played in real time
    for line in lines:
        rec = json.loads(line)
        assert {"frame", "timestamp", "latency_ms", "detections"} <= set(rec)
    summary = json.loads((out / "detect_summary.json").read_text())
    assert summary["frames"]["processed"] == len(lines)


@pytest.mark.slow
def test_summary_reports_sizes_accuracy_and_verdicts(demo) -> None:
    out, _ = demo
    text = (out / "summary.md").read_text()
    sizes = re.search(r"\| size \(bytes\) \| ([\d,]+) \| ([\d,]+) \| ([\d.]+) \|", text)
    assert sizes, text
    f32, q8 = (int(sizes.group(i).replace(",", "")) for i in (1, 2))
    assert q8 < 0.4 * f32  # int8 weights: about a quarter of float32
    assert re.search(r"mAP@0.5 against the validation split's labels \| 0\.\d+ \| 0\.\d+", text)
    verdicts = [json.loads(x)["verdict"] for x in (out / "verdicts.jsonl").read_text().splitlines()]
    assert verdicts and set(verdicts) <= {"PASS", "FAIL"}
    assert f"PASS {verdicts.count('PASS')}, FAIL {verdicts.count('FAIL')}" in text
    events = [json.loads(x) for f in (out / "events").glob("*.jsonl") for x in f.read_text().splitlines()]
    assert sum(e["kind"] == "inspection" for e in events) == len(verdicts), "the cell published every decision"
    # which measure the gate used, how the speed compares on this CPU, and the fixed training
    report = json.loads((out / "convert_int8.json").read_text())
    assert "What the gate measures: " in text and report["gate"]["reason"] in text
    assert re.search(r"On this CPU \(.+\) int8 (runs [\d.]+x as fast as|is not faster than) float32", text)
    assert "Training: 45 steps" in text


def _number(text: str) -> float:
    return float(text.replace(",", "").rstrip("x"))


@pytest.mark.slow
def test_summary_report_and_bench_state_the_same_figures(demo) -> None:
    """One set of figures: the sizes are the files as written, the latencies the demo's timing, in summary.md,
    bench.json, report/report.md and convert_int8.json alike; each ratio is the ratio of the printed figures."""
    out, _ = demo
    text = (out / "summary.md").read_text()
    bench = json.loads((out / "bench.json").read_text())
    report = (out / "report" / "report.md").read_text()
    conv = json.loads((out / "convert_int8.json").read_text())
    int8 = next(out.glob("detector_int8*.tflite"))
    sizes = [(out / "detector_float32.tflite").stat().st_size, int8.stat().st_size]
    assert [m["size_bytes"] for m in bench["models"]] == sizes
    assert [conv["float_size_bytes"], conv["size_bytes"]] == sizes
    assert f"| size (bytes) | {sizes[0]:,} | {sizes[1]:,} | {sizes[1] / sizes[0]:.2f} |" in text
    assert f"| size | {sizes[0]:,} B | {sizes[1]:,} B ({sizes[1] / sizes[0]:.2f}x) |" in report
    f_ms, q_ms = (m["latency_p50_ms"] for m in bench["models"])
    assert [m["timing"]["latency_ms"]["p50"] for m in bench["models"]] == [f_ms, q_ms]
    assert (conv["metrics"]["float_latency_ms"], conv["metrics"]["latency_ms"]) == (f_ms, q_ms)
    assert f"| latency (this machine) | {f_ms:.3f} ms | {q_ms:.3f} ms |" in report
    row = re.search(r"\| latency p50 \(ms, XNNPACK, \d+ threads\) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", text)
    assert row, text
    assert (_number(row.group(1)), _number(row.group(2))) == (f_ms, q_ms)
    assert _number(row.group(3)) == round(q_ms / f_ms, 2) == bench["int8_vs_float32"]["latency_p50"]
    assert bench["int8_vs_float32"]["speedup_p50"] == round(f_ms / q_ms, 1)
    assert bench["int8_vs_float32"]["size"] == round(sizes[1] / sizes[0], 2)
    if q_ms < f_ms:
        assert f"int8 runs {f_ms / q_ms:.1f}x as fast as float32 ({q_ms:.3f} against {f_ms:.3f} ms p50)" in text


@pytest.mark.slow
def test_one_count_of_parts_over_the_table(demo) -> None:
    """The data line's count of parts is the table's: the parts that cross the counting line."""
    out, _ = demo
    text = (out / "summary.md").read_text()
    said = re.search(r"in which (\d+) parts? cross(?:es)? the counting line \((\d+) good, (\d+) defective\)", text)
    assert said, text
    table = re.search(r"Parts counted: (\d+) of (\d+) \(count error", text)
    assert table and int(said.group(1)) == int(table.group(2)) == int(said.group(2)) + int(said.group(3))
    rows = [line for line in text.splitlines() if re.match(r"\| \d+ \| ", line)]
    assert len(rows) >= int(said.group(1))
    assert re.search(r"verdicts right: \d+ of \d+ \(\d+ %\); reasons right: \d+ of \d+ \(\d+ %\)\.", text)


@pytest.mark.slow
def test_annotated_video_is_the_cells_with_line_and_verdicts(demo) -> None:
    """annotated.avi holds the cell's frames with the counting line down the middle, and each part's verdict
    (green PASS, red FAIL) on the part in the frame it was judged."""
    cv2 = pytest.importorskip("cv2")
    from edgekit.drawing import FAIL_COLOR, LINE_COLOR, PASS_COLOR

    out, _ = demo
    cap = cv2.VideoCapture(str(out / "annotated.avi"))
    frames = []
    while (got := cap.read())[0]:
        frames.append(got[1])
    assert len(frames) >= 30
    mid = frames[0].shape[1] // 2

    def near(pixels, rgb):
        return np.abs(pixels.astype(np.int32) - np.array(rgb[::-1])).sum(axis=-1) <= 60

    assert near(frames[0][:, mid - 1:mid + 2], LINE_COLOR).any(axis=1).mean() > 0.6
    parts = [json.loads(x) for f in (out / "events").glob("*.jsonl") for x in f.read_text().splitlines()]
    parts = [e for e in parts if e["kind"] == "part"]
    assert parts
    for e in parts:
        p = e.get("payload", e)
        x1, y1, x2, y2 = (int(round(v)) for v in p["box"])
        index = min(p["judged_frame"], len(frames) - 1)
        region = frames[index][max(0, y1 - 20):y2 + 2, max(0, x1 - 2):x2 + 2]
        assert near(region, PASS_COLOR if p["verdict"] == "PASS" else FAIL_COLOR).sum() > 40, p
