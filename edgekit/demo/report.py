"""summary.md for `edgekit demo`: size, latency, accuracy of float vs int8, what the gate measures,
the belt video's figures and PASS/FAIL counts, from the demo's typed results."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgekit.runtimes.timing import BenchRow
    from edgekit.demo.options import DemoOptions, DemoResult

__all__ = ["write_summary", "gate_explanation", "speed_sentence"]

# What each gate basis measures, and how it relates to the table's mAP against the labels.
_GATE_MEASURE = {
    "map50-truth": ("mAP@0.5 against the labelled objects of the validation split, float .tflite minus int8",
                    "It is the table's measure; the table's float figure is the Keras model's and the gate's the "
                    "float .tflite's, so the two can disagree in the last digits."),
    "map50": ("mAP@0.5 of the int8 model's detections scored against the float model's detections taken as "
              "the truth, on the validation images",
              "It measures how much quantization changes what the float model finds, not how accurate either "
              "model is. The table scores both models against the labelled objects instead: a box that int8 "
              "misses or moves costs gate points even where the float model's box was wrong, so the gate's drop "
              "can be larger than the table's difference."),
    "accuracy": ("top-1 accuracy against the labels, float minus int8", ""),
    "agreement": ("top-1 agreement with the float model", "It counts changed answers, right or wrong."),
}


def _fmt(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _p50(row: BenchRow | None) -> float:
    return float((row.latency_ms or {}).get("p50", math.nan)) if row is not None and row.error is None else math.nan


def gate_explanation(basis: str, drop: float | None, table_diff: float) -> str:
    """One paragraph: which metric the gate used, and why its figure differs from the table's."""
    measure, relation = _GATE_MEASURE.get(basis, (f"'{basis}'", ""))
    figures = [f"int8 lost {drop:.2f} points there" if drop is not None else "",
               f"{-table_diff * 100:.2f} points in the table's mAP row" if not math.isnan(table_diff) else ""]
    shown = "; ".join(f for f in figures if f)
    return f"What the gate measures: {measure}" + (f" ({shown})" if shown else "") + (f". {relation}" if relation
                                                                                       else ".")


def speed_sentence(float_ms: float, int8_ms: float, cpu: str, size_ratio: float | None) -> str:
    """Whether int8 was faster than float32 here, said plainly."""
    if math.isnan(float_ms) or math.isnan(int8_ms):
        return f"Latency could not be measured on {cpu}."
    if int8_ms < float_ms:
        return (f"On this CPU ({cpu}) int8 runs {float_ms / int8_ms:.1f}x as fast as float32 "
                f"({int8_ms:.2f} against {float_ms:.2f} ms p50).")
    smaller = f" The int8 file is still {1 / size_ratio:.1f}x smaller." if size_ratio else ""
    return (f"**On this CPU ({cpu}) int8 is not faster than float32** ({int8_ms:.2f} against {float_ms:.2f} ms "
            f"p50): what int8 gains in speed depends on the CPU and the model; time it on the device that will "
            f"run it (`edgekit bench MODEL`).{smaller}")


def write_summary(result: DemoResult, options: DemoOptions, truth: Any) -> Path:
    """Write ``summary.md`` into the demo folder and return its path."""
    out = Path(result.out)
    conv = result.conversions
    f32, q8 = result.float_path, result.int8_path
    bf = result.bench.get(f32.name) if f32 else None
    bq = result.bench.get(q8.name) if q8 else None
    lat_f, lat_q = _p50(bf), _p50(bq)
    size_f = conv.float32.size_bytes if conv else 0
    size_q = conv.int8.size_bytes if conv else 0
    ratio = size_q / size_f if size_f else None
    gate = conv.int8.gate if conv else None
    table_diff = result.int8_map - result.float_map
    good = sum(1 for p in truth.parts if p.passed)
    threads = bf.threads if bf is not None else "?"
    int8_name = q8.name if q8 else "detector_int8.tflite"
    lines = [
        "# edgekit demo: an inspection detector, trained, quantized, checked and run",
        "",
        f"Data: {options.n_train} training, {options.n_cal} calibration and {options.n_val} validation images "
        f"(160x160, classes part, scratch, dent, missing_hole); a {options.video_frames}-frame belt video "
        f"at {options.video_fps:g} fps with {len(truth.parts)} parts ({good} good, {len(truth.parts) - good} defective). "
        f"Training: {result.train_steps} steps (a fixed count, so any machine trains the same model). "
        f"CPU: {result.cpu}.",
        "",
        "| | float32 | int8 | int8 / float32 |",
        "|---|---|---|---|",
        f"| size (bytes) | {size_f:,} | {size_q:,} | {ratio:.2f} |" if ratio else "| size | n/a | n/a | |",
        f"| mAP@0.5 against the validation split's labels | {_fmt(result.float_map)} | {_fmt(result.int8_map)} | "
        f"{_fmt(table_diff)} (difference) |",
        f"| latency p50 (ms, XNNPACK, {threads} threads) | {_fmt(lat_f, 2)} | {_fmt(lat_q, 2)} | "
        f"{_fmt(lat_q / lat_f if lat_f else math.nan, 2)} |",
        "",
        speed_sentence(lat_f, lat_q, result.cpu, ratio),
        "",
    ]
    if gate is not None:
        lines += [
            f"Accuracy gate (int8 against the float model, at most {options.max_drop:g} points): "
            f"**{'PASS' if gate.passed else 'FAIL'}** ({gate.reason}).",
            gate_explanation(gate.basis, gate.drop, table_diff),
            "",
        ]
    lines += _video_lines(result) + _parts_lines(result, truth) + [
        "## Files",
        "",
        "- `detector.keras`: the float model; `detector_float32.tflite`, "
        f"`{int8_name}`: the converted models (edgekit metadata inside: `edgekit info {int8_name}`)",
        "- `report/`: the conversion report (per-layer error plot, JSON); `convert_int8.json`, `convert_float32.json`",
        "- `bench.json`, `annotated.avi`, `detections.jsonl`, `detect_summary.json`",
        "- `inspection.toml`, `verdicts.jsonl`, `events/`: the inspection run and its events "
        "(`edgekit inspect -c inspection.toml` runs the same cell)",
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


def _parts_lines(result: DemoResult, truth: Any) -> list[str]:
    """The per-part table (edgekit.inspect.parts.report) when the cell judged parts."""
    if result.inspect is None or not result.inspect.parts:
        return []
    from edgekit.demo.scene import PART
    from edgekit.inspect.parts.report import parts_section

    return parts_section(result.inspect.parts, truth.frames, truth.parts, part_class=PART, line_x=truth.size // 2)


def _video_lines(result: DemoResult) -> list[str]:
    lines = ["## On the belt video (int8, played as a camera)", ""]
    run = result.detect
    if run is not None:
        s = run.summary
        stages = ", ".join(f"{k} {v:.2f}" for k, v in s.stages_p50_ms.items()) or "n/a"
        lines += [
            f"- frames captured {s.captured}, processed {s.processed}, dropped {s.dropped}; {_fmt(s.fps, 1)} fps; "
            f"stage p50 (ms): {stages}",
            f"- capture-to-result latency p50 {_fmt(s.latency_p50_ms, 1)} ms, p99 {_fmt(s.latency_p99_ms, 1)} ms",
            f"- mAP@0.5 of the processed frames against the video's ground truth: {_fmt(run.video_map)}",
        ]
    if result.inspect is not None:
        lines.append(f"- inspection verdicts (no scratch, dent or missing hole allowed): "
                     f"PASS {result.inspect.passed}, FAIL {result.inspect.failed} frames")
    return lines + [""]
