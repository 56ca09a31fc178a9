"""summary.md for `edgekit demo`: size, latency, accuracy of float vs int8, what the gate measures,
the belt video's figures and PASS/FAIL counts, from the demo's typed results."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.demo.figures import MS_DIGITS, RATIO_DIGITS, SPEEDUP_DIGITS

if TYPE_CHECKING:
    from edgekit.demo.figures import DemoFigures
    from edgekit.demo.options import DemoOptions, DemoResult

__all__ = ["figures_table", "gate_explanation", "speed_sentence", "write_summary"]

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


def gate_explanation(basis: str, drop: float | None, table_diff: float) -> str:
    """One paragraph: which metric the gate used, and why its figure differs from the table's."""
    measure, relation = _GATE_MEASURE.get(basis, (f"'{basis}'", ""))
    figures = [f"int8 lost {drop:.2f} points there" if drop is not None else "",
               f"{-table_diff * 100:.2f} points in the table's mAP row" if not math.isnan(table_diff) else ""]
    shown = "; ".join(f for f in figures if f)
    return f"What the gate measures: {measure}" + (f" ({shown})" if shown else "") + (f". {relation}" if relation
                                                                                       else ".")


def speed_sentence(figures: DemoFigures) -> str:
    """Whether int8 was faster than float32 here, said plainly, with the figures of the table."""
    float_ms, int8_ms, cpu = figures.float32.p50_ms, figures.int8.p50_ms, figures.cpu
    if math.isnan(float_ms) or math.isnan(int8_ms):
        return f"Latency could not be measured on {cpu}."
    if int8_ms < float_ms:
        return (f"On this CPU ({cpu}) int8 runs {figures.speedup:.{SPEEDUP_DIGITS}f}x as fast as float32 "
                f"({int8_ms:.{MS_DIGITS}f} against {float_ms:.{MS_DIGITS}f} ms p50).")
    smaller = (f" The int8 file is still {figures.size_ratio:.{RATIO_DIGITS}f}x the size of the float32 one."
               if figures.size_ratio < 1 else "")
    return (f"**On this CPU ({cpu}) int8 is not faster than float32** ({int8_ms:.{MS_DIGITS}f} against "
            f"{float_ms:.{MS_DIGITS}f} ms p50): what int8 gains in speed depends on the CPU and the model; time it "
            f"on the device that will run it (`edgekit bench MODEL`).{smaller}")


def figures_table(figures: DemoFigures, float_map: float, int8_map: float) -> list[str]:
    """The float32 / int8 table of summary.md: each ratio from the two figures beside it."""
    f, q = figures.float32, figures.int8
    threads = figures.threads if figures.threads is not None else "?"
    return [
        "| | float32 | int8 | int8 / float32 |",
        "|---|---|---|---|",
        f"| size (bytes) | {f.size_bytes:,} | {q.size_bytes:,} | {_fmt(figures.size_ratio, RATIO_DIGITS)} |",
        f"| mAP@0.5 against the validation split's labels | {_fmt(float_map)} | {_fmt(int8_map)} | "
        f"{_fmt(int8_map - float_map)} (difference) |",
        f"| latency p50 (ms, {figures.delegate.upper()}, {threads} threads) | {_fmt(f.p50_ms, MS_DIGITS)} | "
        f"{_fmt(q.p50_ms, MS_DIGITS)} | {_fmt(figures.latency_ratio, RATIO_DIGITS)} |",
    ]


def write_summary(result: DemoResult, options: DemoOptions, truth: Any) -> Path:
    """Write ``summary.md`` into the demo folder and return its path."""
    out = Path(result.out)
    conv = result.conversions
    figures = result.figures
    expected = _crossings(truth)
    gate = conv.int8.gate if conv else None
    table_diff = result.int8_map - result.float_map
    int8_name = figures.int8.file if figures else "detector_int8.tflite"
    lines = [
        "# edgekit demo: an inspection detector, trained, quantized, checked and run",
        "",
        f"Data: {options.n_train} training, {options.n_cal} calibration and {options.n_val} validation images "
        f"(160x160, classes part, scratch, dent, missing_hole); a {options.video_frames}-frame belt video "
        f"at {options.video_fps:g} fps{_belt_parts(expected, truth)}. "
        f"Training: {result.train_steps} steps (a fixed count, so any machine trains the same model). "
        f"CPU: {result.cpu}.",
        "",
    ]
    if figures is not None:
        lines += figures_table(figures, result.float_map, result.int8_map) + ["", speed_sentence(figures), "",
                  "The same sizes and latencies are in `bench.json` and the conversion report (`report/`): "
                  "the files as written, timed here in interleaved rounds.", ""]
    if gate is not None:
        lines += [
            f"Accuracy gate (int8 against the float model, at most {options.max_drop:g} points): "
            f"**{'PASS' if gate.passed else 'FAIL'}** ({gate.reason}).",
            gate_explanation(gate.basis, gate.drop, table_diff),
            "",
        ]
    lines += _video_lines(result) + _parts_lines(result, expected, truth) + [
        "## Files",
        "",
        "- `detector.keras`: the float model; `detector_float32.tflite`, "
        f"`{int8_name}`: the converted models (edgekit metadata inside: `edgekit info {int8_name}`)",
        "- `report/`: the conversion report (per-layer error plot, JSON); `convert_int8.json`, `convert_float32.json`",
        "- `bench.json`: the sizes and latencies of the table; `detections.jsonl`, `detect_summary.json`: "
        "Detector.stream on the belt video",
        "- `inspection.toml`, `verdicts.jsonl`, `events/`: the inspection run and its events "
        "(`edgekit inspect -c inspection.toml` runs the same cell); `annotated.avi`: its frames with the counting "
        "line, the tracked parts' ids and each part's verdict from its crossing (green PASS, red FAIL)",
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


def _crossings(truth: Any) -> list[Any]:
    """The parts of the belt video that cross the counting line: the one count of parts the summary states."""
    from edgekit.demo.scene import PART
    from edgekit.inspect.parts.report import belt_crossings

    return belt_crossings(truth.frames, truth.parts, part_class=PART, line_x=truth.size // 2)


def _belt_parts(expected: list[Any], truth: Any) -> str:
    good = sum(p.passed for p in expected)
    n, others = len(expected), len(truth.parts) - len(expected)
    text = (f" in which {n} part{'s' * (n != 1)} cross{'es' * (n == 1)} the counting line ({good} good, "
            f"{n - good} defective)")
    return text + (f"; {others} more {'is' if others == 1 else 'are'} in view without crossing it before the "
                   f"clip ends (not judged)" if others else "")


def _parts_lines(result: DemoResult, expected: list[Any], truth: Any) -> list[str]:
    """The per-part table (edgekit.inspect.parts.report) when the cell judged parts."""
    if result.inspect is None or not (result.inspect.parts or expected):
        return []
    from edgekit.inspect.parts.report import parts_section

    return parts_section(result.inspect.parts, expected, line_x=truth.size // 2)


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
