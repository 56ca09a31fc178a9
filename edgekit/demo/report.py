"""summary.md for `edgekit demo`: size, latency, accuracy of float vs int8, fps, PASS/FAIL counts."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["write_summary"]


def _fmt(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _bench_row(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    for r in rows:
        if r.get("model") == name and not r.get("error"):
            return r
    return {}


def write_summary(result: Any, options: Any, truth: Any) -> Path:
    """Write ``summary.md`` into the demo folder and return its path."""
    out = Path(result.out)
    conv = result.convert or {}
    f32 = out / "detector_float32.tflite"
    int8_name = "detector_int8.tflite" if result.gate_passed else "detector_int8.FAILED-GATE.tflite"
    int8 = out / int8_name
    bf, bq = _bench_row(result.bench, f32.name), _bench_row(result.bench, int8_name)
    lat_f = (bf.get("latency_ms") or {}).get("p50", math.nan)
    lat_q = (bq.get("latency_ms") or {}).get("p50", math.nan)
    size_f = f32.stat().st_size if f32.exists() else 0
    size_q = int8.stat().st_size if int8.exists() else 0
    det = result.detect or {}
    gate = conv.get("gate") or {}
    frames = det.get("frames") or {}
    stages = ", ".join(f"{k} {v:.2f}" for k, v in (det.get("stages_ms_p50") or {}).items()) or "n/a"
    good = sum(1 for p in truth.parts if p.passed)
    lines = [
        "# edgekit demo: an inspection detector, trained, quantized, checked and run",
        "",
        f"Data: {options.n_train} training, {options.n_cal} calibration and {options.n_val} validation images "
        f"(160x160, classes part, scratch, dent, missing_hole); a {options.video_frames}-frame belt video "
        f"at {options.video_fps:g} fps with {len(truth.parts)} parts ({good} good, {len(truth.parts) - good} defective).",
        "",
        "| | float32 | int8 | int8 / float32 |",
        "|---|---|---|---|",
        f"| size (bytes) | {size_f:,} | {size_q:,} | {size_q / size_f:.2f} |" if size_f else "| size | n/a | n/a | |",
        f"| mAP@0.5 on the validation split | {_fmt(result.float_map)} | {_fmt(result.int8_map)} | "
        f"{_fmt(result.int8_map - result.float_map)} (difference) |",
        f"| latency p50 (ms, XNNPACK, {bf.get('threads', '?')} threads) | {_fmt(lat_f, 2)} | {_fmt(lat_q, 2)} | "
        f"{_fmt(lat_q / lat_f if lat_f else math.nan, 2)} |",
        "",
        f"Accuracy gate (int8 against the float model, at most {options.max_drop:g} points): "
        f"**{'PASS' if result.gate_passed else 'FAIL'}**"
        + (f" ({gate.get('basis', '')} dropped {_fmt(gate.get('drop', math.nan), 2)} points)" if gate else "") + ".",
        "",
        "## On the belt video (`edgekit detect --realtime`, int8)",
        "",
        f"- frames captured {frames.get('captured', 'n/a')}, processed {frames.get('processed', 'n/a')}, "
        f"dropped {frames.get('dropped', 'n/a')}; {_fmt(det.get('fps', math.nan), 1)} fps; "
        f"stage p50 (ms): {stages}",
        f"- capture-to-result latency p50 {_fmt(_get(det, 'latency_ms', 'p50'), 1)} ms, "
        f"p99 {_fmt(_get(det, 'latency_ms', 'p99'), 1)} ms",
        f"- mAP@0.5 of the processed frames against the video's ground truth: {_fmt(result.video_map)}",
        f"- inspection verdicts (no scratch, dent or missing hole allowed): "
        f"PASS {result.verdicts.get('PASS', 0)}, FAIL {result.verdicts.get('FAIL', 0)} frames",
        "",
        "## Files",
        "",
        "- `detector.keras`: the float model; `detector_float32.tflite`, "
        f"`{int8_name}`: the converted models (edgekit metadata inside: `edgekit info {int8_name}`)",
        "- `report/`: the conversion report (per-layer error plot, JSON); `convert_int8.json`",
        "- `bench.json`, `annotated.avi`, `detections.jsonl`, `detect_summary.json`",
        "- `inspection.toml`, `verdicts.jsonl`, `events/`: the inspection run and its events",
        "",
        "## Time per step (s)",
        "",
        "| " + " | ".join(result.steps) + " | total |",
        "|" + "---|" * (len(result.steps) + 1),
        "| " + " | ".join(f"{v:.1f}" for v in result.steps.values()) + f" | {sum(result.steps.values()):.1f} |",
        "",
    ]
    path = out / "summary.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _get(d: dict[str, Any], *keys: str) -> float:
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return math.nan
        d = d[k]
    return d if isinstance(d, (int, float)) else math.nan
