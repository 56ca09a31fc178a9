"""Bring your own model: Keras, ONNX and float .tflite in, on the same trained detector, in one run.

The detector is the demo's YOLO-style network trained briefly here and re-headed to the layout
Ultralytics' YOLOv8/11 exports have (NCHW input in 0..1, one output [1, 4+C, N] with boxes in
pixels and class scores; see tests/_yolo_models.py). It enters edgekit three ways: the Keras
model (taking pixels, Rescaling(1/255) inside), its ONNX export (NCHW, 0..1; tf2onnx, converted
through onnx2tf) and its float32 .tflite (NHWC, 0..1; quantized by ai-edge-quantizer). For each: int8 against float32 size, latency with XNNPACK at 1 and 2
threads (interleaved blocks, medians), mAP@0.5 against the labelled objects of the validation
set for the float model and for int8 with and without the head fix, and conversion time.

The fix: Keras and ONNX get their head split into boxes and scores outputs (the default;
--no-split-head turns it off); the float .tflite (written unsplit: one [1, 4+C, N] output, as
Ultralytics exports it) has its final CONCATENATION cut out of the flatbuffer the same way.

    python benchmarks/byom.py [--epochs 20] [--blocks 12] [--per-block 20] [--workdir DIR]

Needs the convert extra (pip install 'edgekit-tflite[convert]').
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests._yolo_models builds the detector

from edgekit.converters import ConvertOptions, Mode, PreprocessingOverrides, convert  # noqa: E402
from benchmarks._common import cpu_name, invoke_ms  # noqa: E402
from tests._yolo_models import TrainedDetector, train_detector  # noqa: E402


def run_convert(model: Path, out: Path, det: TrainedDetector, fixed: bool) -> dict[str, Any]:
    opts = ConvertOptions(mode=Mode.INT8, max_drop=1.0, diagnose=False, progress=False, split_head=fixed)
    t0 = time.perf_counter()
    try:
        res = convert(model, out, calibration=det.calibration, validation=det.validation, options=opts)
    except Exception as exc:  # noqa: BLE001 - a row that failed says why, the others still run
        return {"error": str(exc).splitlines()[0][:120]}
    m = res.metrics
    return {"seconds": time.perf_counter() - t0, "size": res.size_bytes / res.float_size_bytes,
            "float_map": m.float_map50_truth, "int8_map": m.map50_truth, "gate": res.gate.status,
            "path": res.output}


def latencies(paths: list[Path], threads: int, blocks: int, per_block: int) -> list[float]:
    """Median ms of one invoke per model, XNNPACK, interleaved blocks whose order rotates."""
    return [float(np.median(t)) for t in invoke_ms(paths, threads, blocks, per_block)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20, help="training epochs (600 images)")
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--per-block", type=int, default=20)
    ap.add_argument("--workdir", type=Path, help="keep the models here (default: a temporary folder)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgekit-byom-") as tmp:
        work = args.workdir or Path(tmp)
        t0 = time.perf_counter()
        det = train_detector(work / "detector", epochs=args.epochs)
        print(f"trained and exported in {time.perf_counter() - t0:.0f} s; CPU: {cpu_name()}, {os.cpu_count()} cores")
        float_tflite = work / "yolo_float32.tflite"
        convert(det.unit_keras_path, float_tflite, options=ConvertOptions(  # its metadata: inputs are pixels / 255
            mode=Mode.FLOAT32, progress=False, preprocessing=PreprocessingOverrides(scale=1 / 255), split_head=False))
        kinds = {"Keras": det.keras_path, "ONNX": det.onnx_path, "float .tflite": float_tflite}
        rows = {}
        for kind, path in kinds.items():
            slug = kind.split()[-1].lower().strip(".")
            rows[kind] = {fixed: run_convert(path, work / f"{slug}_{'fix' if fixed else 'nofix'}.tflite", det, fixed)
                          for fixed in (True, False)}
        fixed_paths = [r[True]["path"] for r in rows.values() if "path" in r[True]]
        lat = {n: latencies([float_tflite, *fixed_paths], n, args.blocks, args.per_block) for n in (1, 2)}
    print(f"\n{'input':14} {'size':>6} {'lat 1t':>7} {'lat 2t':>7} {'float mAP':>9} {'int8 fix':>9} "
          f"{'int8 no fix':>11} {'gate fix/no':>12} {'convert s':>10}")
    k = 0
    for kind, r in rows.items():
        fix, nofix = r[True], r[False]
        if "error" in fix:
            print(f"{kind:14} failed: {fix['error']}")
            continue
        k += 1
        ratios = [lat[n][k] / lat[n][0] for n in (1, 2)]
        nofix_map = f"{nofix['int8_map']:.3f}" if "int8_map" in nofix and nofix["int8_map"] is not None \
            else nofix.get("error", "-")[:11]
        print(f"{kind:14} {fix['size']:5.2f}x {ratios[0]:6.2f}x {ratios[1]:6.2f}x {fix['float_map']:9.3f} "
              f"{fix['int8_map']:9.3f} {nofix_map:>11} {fix['gate'] + '/' + nofix.get('gate', '-'):>12} "
              f"{fix['seconds']:6.1f}/{nofix.get('seconds', float('nan')):.1f}")
    print(f"\nfloat32 latency: {lat[1][0]:.3f} ms (1 thread), {lat[2][0]:.3f} ms (2 threads); ratios are int8 (with "
          "the fix) over the float32 .tflite of the same network, XNNPACK")


if __name__ == "__main__":
    main()
