"""edgekit against Ultralytics' own int8 export: one trained YOLO, the same calibration photos, one table.

Each quantized model is compared with the float model on the validation photos of an Ultralytics
data set, the way ``edgekit convert`` reports it (:mod:`edgekit.converters.fidelity`): float
detections found at score 0.25, matched-box IoU (mean, 5th percentile), score error (mean, max),
extra boxes at 0.25, file size, and XNNPACK latency (interleaved rounds, medians, the CPU named).
All files run through the same device runtime (``edgekit.Detector``, threshold 0.05 so that a score
falling under 0.25 counts as an error, not a silence); the float reference is Ultralytics' own float
``.tflite`` (``format=tflite``), the exact float model.

Rows: Ultralytics 8.4's ``quantize=8`` (litert-torch + ai-edge-quantizer, static int8) and
``quantize='w8a16'`` (int16 activations), each calibrated on the data set's ``cal`` split; edgekit
from Ultralytics' ONNX export (onnx2tf) and from its float ``.tflite`` (ai-edge-quantizer), with the
defaults and with ``--auto-fallback`` on the fidelity targets (IoU >= 0.95, score error <= 0.02, no
extra box), calibrated on the same ``cal`` images. Every file is kept in ``--workdir``; a second run
reuses them (``--latency-only`` then just times them, e.g. under a benchmark lock).

Ultralytics needs torch (several GB): install it in its own environment and point ``--python`` at it::

    python3 -m venv /tmp/ul && /tmp/ul/bin/pip install ultralytics litert-torch ai-edge-quantizer onnxslim
    python benchmarks/fidelity.py --python /tmp/ul/bin/python --weights best.pt --data data.yaml --imgsz 192 \\
        --workdir /tmp/fid

``--data``: an Ultralytics data.yaml with ``val`` (the photos compared on) and ``cal`` (calibration)
image folders. A trained ``best.pt``: ``benchmarks/ultralytics_tflite.py --workdir DIR`` trains one
(``DIR/runs/y8/weights/best.pt``, with its data.yaml; add a ``cal:`` line pointing at ``DIR/cal/images``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import invoke_ms, machine_line  # noqa: E402

SCORE, RANKED = 0.25, 0.05  # the user's threshold; lower scores still count for IoU / score error
NEAR = 0.02  # an extra box this close to SCORE on both sides is a coin toss at the threshold
TARGETS = {"min_box_iou": 0.95, "max_score_error": 0.02, "max_extra_boxes": 0}

# Runs in the Ultralytics environment: its own exports of the same weights; prints one JSON line.
ULTRALYTICS = r"""
import json, os, shutil, sys
os.environ.setdefault("YOLO_OFFLINE", "1")
from pathlib import Path
import ultralytics
from ultralytics import YOLO
weights, data, imgsz, out = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
res = {"version": ultralytics.__version__}
for key, kw in (("onnx", dict(format="onnx")), ("float", dict(format="tflite")),
                ("int8", dict(format="tflite", quantize=8, data=data, split="cal")),
                ("w8a16", dict(format="tflite", quantize="w8a16", data=data, split="cal"))):
    try:
        path = Path(YOLO(str(weights)).export(imgsz=imgsz, device="cpu", **kw))
        dest = out / f"ultralytics_{key}{path.suffix}"
        shutil.copyfile(path, dest)
        res[key] = str(dest)
    except Exception as exc:
        res[key + "_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
print(json.dumps(res))
"""


def ultralytics_exports(python: str, weights: Path, data: Path, imgsz: int, work: Path) -> dict[str, Any]:
    """Ultralytics' own exports (cached in `work/ultralytics.json`); what failed is named, not raised."""
    cache = work / "ultralytics.json"
    if cache.is_file():
        return dict(json.loads(cache.read_text()))
    done = subprocess.run([python, "-c", ULTRALYTICS, str(weights), str(data), str(imgsz), str(work)],
                          capture_output=True, text=True, env={**os.environ, "YOLO_OFFLINE": "1"}, check=False)
    if done.returncode != 0:
        sys.exit(f"the Ultralytics environment ({python}) failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    res = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    cache.write_text(json.dumps(res))
    return res


def edgekit_convert(source: Path, out: Path, data: Path, cal: Path, fallback: bool) -> dict[str, Any]:
    """`edgekit convert` (int8 defaults, or --auto-fallback with TARGETS), cached beside the output."""
    from edgekit.converters import ConvertOptions, Mode, convert

    cache = out.with_suffix(".json")
    if cache.is_file() and Path(json.loads(cache.read_text()).get("output", out)).is_file():
        return dict(json.loads(cache.read_text()))
    targets: dict[str, Any] = {**TARGETS, "auto_fallback": True} if fallback else {}
    try:
        res = convert(source, out, calibration=cal, validation=data,
                      options=ConvertOptions(mode=Mode.INT8, progress=False, **targets))
        info = {"output": str(res.output), "gate": str(res.gate.status), "kept_float": list(res.layers_kept_in_float)}
    except Exception as exc:  # noqa: BLE001 - a failed conversion is a row of the table, not the end of it
        info = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    cache.write_text(json.dumps(info))
    return info


def borderline_extras(ref: list[Any], quant: list[Any]) -> tuple[int, int]:
    """Extra boxes at SCORE that the float model shows too, only under SCORE; and how many of those are at
    the threshold on both sides (float from SCORE - NEAR, quantized under SCORE + NEAR: 0.251 against 0.249)."""
    import numpy as np

    from edgekit.converters.fidelity import match_detections

    count, near = 0, 0
    for r, q in zip(ref, quant):
        taken = {j for _, j, _ in match_detections(r, q, ref_min=SCORE, quant_min=SCORE)}
        extra = [j for j in range(len(q.scores)) if q.scores[j] >= SCORE and j not in taken]
        if not extra:
            continue
        sub = SimpleNamespace(xyxy=np.asarray(q.xyxy)[extra], scores=np.asarray(q.scores)[extra],
                              class_ids=np.asarray(q.class_ids)[extra])
        low = SimpleNamespace(xyxy=r.xyxy, scores=np.where(np.asarray(r.scores) < SCORE, r.scores, -1.0),
                              class_ids=r.class_ids)
        for i, j, _ in match_detections(low, sub, ref_min=RANKED, quant_min=SCORE):
            count += 1
            near += int(low.scores[i] >= SCORE - NEAR and sub.scores[j] < SCORE + NEAR)
    return count, near


def detections(model: Path, images: list[Path]) -> list[Any]:
    from edgekit import Detector, load_image

    with Detector.create_from_model_path(model, threshold=RANKED) as det:
        return [det.detect(load_image(p)) for p in images]


def read_data(data: Path) -> tuple[Path, Path]:
    """The `val` and `cal` image folders of an Ultralytics data.yaml (relative to its `path`)."""
    import yaml

    doc = yaml.safe_load(data.read_text())
    root = Path(doc.get("path") or data.parent)
    folders = []
    for key in ("val", "cal"):
        if key not in doc:
            sys.exit(f"{data}: no '{key}:' image folder; add one (e.g. '{key}: {key}/images')")
        p = Path(doc[key])
        folders.append(p if p.is_absolute() else root / p)
    return folders[0], folders[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True, help="the interpreter of an environment with ultralytics installed")
    ap.add_argument("--weights", type=Path, required=True, help="a trained Ultralytics detector (.pt)")
    ap.add_argument("--data", type=Path, required=True, help="Ultralytics data.yaml with val: and cal: folders")
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--workdir", type=Path, required=True, help="every file is written (and reused) here")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fallback-from", choices=("both", "onnx", "tflite", "none"), default="both",
                    help="which inputs also get the --auto-fallback conversion (default: both)")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--latency-only", action="store_true", help="only time the files a previous run wrote")
    args = ap.parse_args()
    if not Path(args.python).is_file():
        sys.exit(f"--python {args.python}: no such interpreter; it must be an environment with ultralytics, "
                 "litert-torch and ai-edge-quantizer installed (see this script's docstring)")
    val, cal = read_data(args.data)
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    ul = ultralytics_exports(args.python, args.weights.resolve(), args.data.resolve(), args.imgsz, work)
    if "float" not in ul:
        sys.exit(f"Ultralytics' float .tflite export failed, nothing to compare with: {ul.get('float_error')}")
    rows: list[tuple[str, dict[str, Any]]] = []
    for key, name in (("int8", "Ultralytics quantize=8"), ("w8a16", "Ultralytics quantize=w8a16")):
        rows.append((f"{name} ({ul['version']})", {"output": ul[key]} if key in ul else {"error": ul[key + "_error"]}))
    sources = [("ONNX", Path(ul["onnx"])) if "onnx" in ul else None, ("float .tflite", Path(ul["float"]))]
    for label, src in filter(None, sources):
        for fallback in (False, True)[:2 if args.fallback_from in ("both", src.suffix[1:]) else 1]:
            out = work / f"edgekit_{src.suffix[1:]}{'_fallback' if fallback else ''}.tflite"
            name = f"edgekit from {label}" + (" --auto-fallback" if fallback else "")
            rows.append((name, {"output": str(out)} if args.latency_only and out.is_file() else
                         edgekit_convert(src, out, args.data, cal, fallback)))
    ok = [(n, Path(r["output"])) for n, r in rows if "output" in r]
    float_path = Path(ul["float"])
    print(f"Ultralytics {ul['version']}, {args.weights.name} at {args.imgsz}x{args.imgsz}; {machine_line()}")
    lat: dict[Path, float] = {}
    if not args.no_latency:
        paths = [float_path] + [p for _, p in ok]
        lat = {p: statistics.median(statistics.fmean(t[r:r + 20]) for r in range(0, len(t), 20))
               for p, t in zip(paths, invoke_ms(paths, args.threads, 7, 20))}
        print(f"latency: XNNPACK {args.threads} threads, median of 7 interleaved rounds of 20; "
              f"float {lat[float_path]:.2f} ms; load {os.getloadavg()[0]:.2f}")
    fid, edge = {}, {}
    if not args.latency_only:
        from edgekit.converters.fidelity import detection_fidelity

        images = sorted(p for p in val.rglob("*") if p.suffix.lower() in {".png", ".jpg", ".jpeg", ".bmp"})
        ref = detections(float_path, images)
        found = {p: detections(p, images) for _, p in ok}
        fid = {p: detection_fidelity(ref, d, SCORE, RANKED) for p, d in found.items()}
        edge = {p: borderline_extras(ref, d) for p, d in found.items()}
        print(f"{len(images)} photos ({val}), {fid[ok[0][1]].float_objects if ok else 0} float detections "
              f"at score >= {SCORE}")
    base = next((lat.get(p) for n, p in ok if n.startswith("Ultralytics quantize=8")), None)
    print("| converter | found | box IoU mean (p5) | score error mean (max) | extra | size KiB | latency ms |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows:
        if "output" not in r:
            print(f"| {name} | failed: {r['error']} |||||")
            continue
        p = Path(r["output"])
        f = fid.get(p)
        cells = ([f"{f.found}/{f.float_objects}", f"{f.box_iou_mean:.3f} ({f.box_iou_p5:.3f})" if f.matched else "-",
                  f"{f.score_error_mean:.3f} ({f.score_error_max:.3f})" if f.matched else "-",
                  f"{f.extra} ({edge[p][0]} float under {SCORE}, {edge[p][1]} within {NEAR})"]
                 if f else ["", "", "", ""])
        ms = lat.get(p)
        timing = f"{ms:.2f}" + (f" ({ms / base:.2f}x)" if base else "") if ms else ""
        note = f" [gate {r['gate']}]" if r.get("gate") else ""
        print(f"| {name}{note} | " + " | ".join(cells) + f" | {p.stat().st_size / 1024:.0f} | {timing} |")


if __name__ == "__main__":
    main()
