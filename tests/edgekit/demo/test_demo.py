"""`edgekit demo --quick` end to end: every step runs for real and leaves its files."""

from __future__ import annotations

import json
import re

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
