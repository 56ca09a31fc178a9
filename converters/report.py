"""The conversion report: report.json (machines), report.md (people) and the plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgekit.converters.debug import plot_fallback, plot_layer_errors
from edgekit.converters.metadata_writer import write_bytes_atomic

from edgekit.converters.result import result_to_dict
from edgekit.outputs import report_json

if TYPE_CHECKING:
    from edgekit.converters.result import ConversionResult

__all__ = ["result_to_dict", "render_markdown", "write_report", "summary_lines"]


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


def _num(v: Any, fmt: str = ".4g") -> str:
    return "-" if v is None else format(v, fmt)


def summary_lines(d: dict[str, Any]) -> list[str]:
    """A few lines for the terminal, from the report document."""
    m, g = d["metrics"], d["gate"]
    lines = [f"{d['mode']}: {d['output']}  {d['size_bytes'] / 1024:.1f} KiB "
             f"({_num(d['size_ratio'], '.2f')}x float32 {d['float_size_bytes'] / 1024:.1f} KiB)"]
    if m["samples"]:
        parts = [f"{m['samples']} validation samples"]
        for key, label in (("top1_agreement", "top-1 agreement"), ("float_accuracy", "float accuracy"),
                           ("accuracy", "accuracy"), ("map50", "mAP@0.5 vs float"),
                           ("float_map50_truth", "float mAP@0.5 vs labels"), ("map50_truth", "mAP@0.5 vs labels")):
            if m.get(key) is not None:
                parts.append(f"{label} {_pct(m[key])}")
        if m.get("float_objects") is not None:
            parts.append(f"{m['float_objects']} objects found by the float model")
        lines.append(", ".join(parts))
    if (f := m.get("detection")) and f["float_objects"]:
        lines.append(f"against the float model at score {f['threshold']:g}: {f['found']}/{f['float_objects']} found, "
                     f"{f['missing']} missing, {f['extra']} extra; box IoU mean {_num(f['box_iou_mean'], '.3f')} "
                     f"(5th pct {_num(f['box_iou_p5'], '.3f')}); score error mean "
                     f"{_num(f['score_error_mean'], '.3f')} (max {_num(f['score_error_max'], '.3f')})")
    if m.get("latency_ms") is not None:
        lines.append(f"latency here: {m['latency_ms']:.3f} ms (float32 {_num(m.get('float_latency_ms'), '.3f')} ms)")
    lines.append(f"gate: {g['status']} ({g['reason']})")
    if d["layers_kept_in_float"]:
        lines.append(f"layers kept in float: {', '.join(d['layers_kept_in_float'])}")
    if d.get("fallback"):
        lines += _fallback_section(d)[1:2 + 2 + len(d["fallback"]["attempts"])]
    return lines


def render_markdown(d: dict[str, Any]) -> str:
    """report.md from the report document."""
    m, g = d["metrics"], d["gate"]
    gated = f" gated on {', '.join(g['gated_on'])}" if g.get("gated_on") else ""
    out = [f"# Conversion report: {d['mode']}", "", f"**Gate: {g['status']}**{gated} ({g['reason']})", "",
           "| | float32 | " + d["mode"] + " |", "|---|---|---|",
           f"| size | {d['float_size_bytes']:,} B | {d['size_bytes']:,} B ({_num(d['size_ratio'], '.2f')}x) |",
           f"| latency (this machine) | {_num(m.get('float_latency_ms'), '.3f')} ms "
           f"| {_num(m.get('latency_ms'), '.3f')} ms |"]
    if m.get("float_accuracy") is not None:
        out.append(f"| accuracy ({m['samples']} samples) | {_pct(m['float_accuracy'])} | {_pct(m['accuracy'])} |")
    if m.get("map50_truth") is not None:
        out.append(f"| mAP@0.5 against labelled objects ({m['samples']} images) | {_pct(m['float_map50_truth'])} "
                   f"| {_pct(m['map50_truth'])} |")
    for key, label in (("top1_agreement", "top-1 agreement with float"), ("map50", "mAP@0.5 against float")):
        if m.get(key) is not None:
            out.append(f"| {label} | | {_pct(m[key])} |")
    if m.get("float_objects") is not None:
        out.append(f"| objects the float model found ({m['samples']} images) | {m['float_objects']} | |")
    out += _fidelity_section(m)
    if m["outputs"]:
        out += ["", "## Outputs against the float model", "",
                "| output | mean abs err | max abs err | cosine (mean / min) | SNR dB |", "|---|---|---|---|---|"]
        out += [f"| {o['name']} | {_num(o['mean_abs_error'])} | {_num(o['max_abs_error'])} | "
                f"{_num(o['cosine'], '.5f')} / {_num(o['cosine_min'], '.5f')} | "
                f"{'identical' if o['snr_db'] is None else format(o['snr_db'], '.1f')} |" for o in m["outputs"]]
    out += _layer_section(d) + _fallback_section(d) + _edgetpu_section(d)
    if d["warnings"]:
        out += ["", "## Warnings", ""] + [f"- {w}" for w in d["warnings"]]
    pre = d.get("preprocessing")
    if pre:
        out += ["", "## Preprocessing", "", f"`{json.dumps({k: v for k, v in pre.items() if k != 'decided_by'})}` "
                f"decided by: {pre['decided_by']}"]
    return "\n".join(out) + "\n"


def _fidelity_section(m: dict[str, Any]) -> list[str]:
    f = m.get("detection")
    if not f:
        return []
    share = "-" if f["found_share"] is None else f"{100 * f['found_share']:.1f}%"
    return ["", f"## Detections against the float model (score >= {f['threshold']:g}, same class, IoU >= 0.5)", "",
            "| measure | value |", "|---|---|",
            f"| float detections it rests on ({m['samples']} images) | {f['float_objects']} |",
            f"| found (share) | {f['found']} ({share}) |",
            f"| missing / extra boxes | {f['missing']} / {f['extra']} |",
            f"| matched-box IoU, mean / 5th percentile / min ({f['matched']} boxes) | "
            f"{_num(f['box_iou_mean'], '.3f')} / {_num(f['box_iou_p5'], '.3f')} / {_num(f['box_iou_min'], '.3f')} |",
            f"| score error, mean / max | {_num(f['score_error_mean'], '.3f')} / "
            f"{_num(f['score_error_max'], '.3f')} |"]


def _layer_section(d: dict[str, Any]) -> list[str]:
    if not d["worst_layers"]:
        return []
    out = ["", "## Layers with the largest quantization error", "",
           "| layer | op | RMSE | scale | RMSE/scale |", "|---|---|---|---|---|"]
    out += [f"| {x['name']} | {x['op']} | {_num(x['rmse'])} | {_num(x['scale'])} "
            f"| {_num(x['rmse_over_scale'], '.3f')} |"
            for x in d["worst_layers"]]
    return out + ["", "RMSE/scale near 0.29 is rounding alone; above 0.7 the layer's range does not suit int8.",
                  "![error by layer](layer_errors.png)"]


def _fallback_section(d: dict[str, Any]) -> list[str]:
    fb = d.get("fallback")
    if not fb:
        return []
    base = fb["attempts"][0] if fb["attempts"] and not fb["attempts"][0]["layers_in_float"] else None
    out = ["", "## Auto-fallback (layers kept in float; costs against the all-int8 model)", "",
           "| candidate | layers in float | size | latency | drop | box IoU mean | score error mean | extra | gate |",
           "|---|---|---|---|---|---|---|---|---|"]
    for a in fb["attempts"]:
        f = a.get("fidelity") or {}
        size_x = f" ({a['size_bytes'] / base['size_bytes']:.2f}x)" if base else ""
        ref = a.get("int8_latency_ms") or (base or {}).get("latency_ms")  # timed beside it, else the first row
        lat_x = f" ({a['latency_ms'] / ref:.2f}x)" if ref and a["latency_ms"] else ""
        out.append(f"| {a.get('label') or '-'} | {len(a['layers_in_float'])} | {a['size_bytes']:,} B{size_x} | "
                   f"{_num(a['latency_ms'], '.3f')} ms{lat_x} | {_num(a['drop'], '.2f')} | "
                   f"{_num(f.get('box_iou_mean'), '.3f')} | {_num(f.get('score_error_mean'), '.3f')} | "
                   f"{_num(f.get('extra'), 'd')} | {'PASS' if a['passed'] else 'FAIL'} |")
    return out + [f"- {n}" for n in fb["notes"]] + (["", "![fallback](fallback.png)"]
                                                    if d["gate"].get("max_drop") is not None else [])


def _edgetpu_section(d: dict[str, Any]) -> list[str]:
    e = d.get("edgetpu")
    if not e:
        return ["", "## Edge TPU", "", d["edgetpu_error"]] if d.get("edgetpu_error") else []
    out = ["", "## Edge TPU", "", f"{e['ops_on_edgetpu']} ops on the Edge TPU, {e['ops_on_cpu']} on the CPU "
           f"(compiler {e['version']}): {e['model']}", "", "| op | count | status |", "|---|---|---|"]
    return out + [f"| {o['op']} | {o['count']} | {o['status']} |" for o in e["operations"]]


def write_report(r: ConversionResult, report_dir: Path) -> tuple[Path, ...]:
    """Write report.json, report.md and the plots into `report_dir`; return their paths."""
    report_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    if r.layer_errors:
        kept = {x.tensor_name for a in (r.fallback.chosen,) if a for x in a.kept_in_float} if r.fallback else set()
        paths.append(plot_layer_errors(r.layer_errors, report_dir / "layer_errors.png", kept=sorted(kept)))
    if r.fallback is not None and r.fallback.attempts and r.gate.max_drop is not None:
        paths.append(plot_fallback(r.fallback.attempts, r.gate.max_drop, report_dir / "fallback.png"))
    json_path, md_path = report_json(report_dir), report_dir / "report.md"
    doc = result_to_dict(r)
    doc["report_paths"] = [str(p) for p in (json_path, md_path, *paths)]
    write_bytes_atomic(json_path, (json.dumps(doc, indent=2) + "\n").encode())
    write_bytes_atomic(md_path, render_markdown(doc).encode())
    return (json_path, md_path, *paths)
