"""Ultralytics' own float .tflite through `edgekit convert`, checked against Ultralytics' own predict.

A YOLOv8n is built from ``yolov8n.yaml`` (no weights downloaded), trained briefly on the demo's
synthetic inspection images written as an Ultralytics data set, and exported by Ultralytics'
exporter (``format=tflite``: litert-torch in 8.4, NCHW input, one [1, 4+C, N] output, its
metadata.json appended). Then, in one run: ``edgekit convert`` to int8 (ai-edge-quantizer) with
the gate on the labelled validation images; size and latency int8 against the float file
(XNNPACK, 1 and 2 threads, interleaved rounds, medians); mAP@0.5 against the labels (edgekit's
gate and Ultralytics' own val); and the device's detections (``edgekit.Detector``) on the float
and the int8 file against Ultralytics' predict on the same images.

Ultralytics needs torch (several GB): install it in its own environment and point ``--python`` at it::

    python3 -m venv /tmp/ul && /tmp/ul/bin/pip install ultralytics litert-torch
    python benchmarks/ultralytics_tflite.py --python /tmp/ul/bin/python [--epochs 15] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests._yolo_models writes the data set

from benchmarks._common import cpu_name, invoke_ms  # noqa: E402
from edgekit import Detector, load_image  # noqa: E402
from edgekit.contract import map50  # noqa: E402
from edgekit.converters import ConvertOptions, Mode, convert  # noqa: E402

# Runs in the Ultralytics environment: train, val, export, predict; prints one JSON line.
ULTRALYTICS = r"""
import json, os, sys
os.environ.setdefault("YOLO_OFFLINE", "1")
from pathlib import Path
from ultralytics import YOLO
root, epochs = Path(sys.argv[1]), int(sys.argv[2])
m = YOLO("yolov8n.yaml")
m.train(data=str(root / "data.yaml"), epochs=epochs, imgsz=160, batch=32, device="cpu", workers=0, plots=False,
        amp=False, project=str(root / "runs"), name="y8", exist_ok=True, verbose=False)
best = YOLO(str(root / "runs" / "y8" / "weights" / "best.pt"))
val = best.val(data=str(root / "data.yaml"), imgsz=160, device="cpu", plots=False, verbose=False).box.map50
tflite = best.export(format="tflite", imgsz=160, device="cpu")
pred = {}
for p in sorted((root / "val" / "images").glob("*.png")):
    r = best.predict(str(p), imgsz=160, device="cpu", verbose=False)[0]
    pred[p.name] = [r.boxes.xyxy.numpy().tolist(), r.boxes.conf.numpy().tolist(), r.boxes.cls.numpy().astype(int).tolist()]
print(json.dumps({"val_map50": float(val), "tflite": str(tflite), "predict": pred}))
"""


def write_dataset(root: Path) -> None:
    """The demo's scenes as an Ultralytics data set: images/ + labels/ (class cx cy w h, normalized)."""
    from edgekit.demo.dataset import CLASS_NAMES, generate
    from tests._yolo_models import write_yolo_split

    for split, n, seed in (("train", 600, 0), ("val", 100, 1), ("cal", 100, 2)):
        write_yolo_split(generate(n, seed=seed, size=160), root / split)
    names = "".join(f"  {k}: {v}\n" for k, v in enumerate(CLASS_NAMES))
    (root / "data.yaml").write_text(f"path: {root}\ntrain: train/images\nval: val/images\nnames:\n{names}")


def latencies(paths: list[Path], threads: int, rounds: int = 9, per_round: int = 30) -> list[float]:
    """Median ms of one invoke per model, XNNPACK, interleaved rounds whose order rotates (the median of
    the rounds' means)."""
    return [statistics.median(statistics.fmean(t[r:r + per_round]) for r in range(0, len(t), per_round))
            for t in invoke_ms(paths, threads, rounds, per_round)]


def device_map(model: Path, images: list[Path], reference: list[SimpleNamespace]) -> float | None:
    """mAP@0.5 of edgekit.Detector's detections on `images` against Ultralytics' predict."""
    with Detector.create_from_model_path(model) as det:
        found = [det.detect(load_image(p)) for p in images]
    return map50(reference, found)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True, help="the interpreter of an environment with ultralytics installed")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--workdir", type=Path, help="keep everything here (default: a temporary folder)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgekit-ultralytics-") as tmp:
        root = args.workdir or Path(tmp)
        write_dataset(root)
        t0 = time.perf_counter()
        done = subprocess.run([args.python, "-c", ULTRALYTICS, str(root), str(args.epochs)], capture_output=True,
                              text=True, env={**os.environ, "YOLO_OFFLINE": "1"})
        if done.returncode != 0:
            sys.exit(f"ultralytics failed: {done.stderr.strip().splitlines()[-1:]}")
        ul = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"YOLOv8n trained {args.epochs} epochs and exported by Ultralytics in {time.perf_counter() - t0:.0f} s; "
              f"CPU: {cpu_name()}, {os.cpu_count()} cores")
        float_tflite, int8 = Path(ul["tflite"]), root / "yolov8n_int8.tflite"
        t0 = time.perf_counter()
        res = convert(float_tflite, int8, calibration=root / "cal" / "images", validation=root / "data.yaml",
                      options=ConvertOptions(mode=Mode.INT8, max_drop=1.0, progress=False))
        seconds = time.perf_counter() - t0
        images = sorted((root / "val" / "images").glob("*.png"))
        reference = [SimpleNamespace(xyxy=np.asarray(b, np.float32).reshape(-1, 4), scores=np.asarray(s, np.float32),
                                     class_ids=np.asarray(c, np.int64)) for b, s, c in (ul["predict"][p.name]
                                                                                       for p in images)]
        lat = {n: latencies([float_tflite, res.output], n) for n in (1, 2)}
        m = res.metrics
        print(f"size int8/float {res.size_bytes / res.float_size_bytes:.2f}x; latency {lat[1][1] / lat[1][0]:.2f}x "
              f"(1 thread, {lat[1][0]:.2f} -> {lat[1][1]:.2f} ms), {lat[2][1] / lat[2][0]:.2f}x (2 threads); "
              f"convert {seconds:.0f} s")
        print(f"mAP@0.5 vs labels: Ultralytics val (float) {ul['val_map50']:.3f}; edgekit gate float "
              f"{m.float_map50_truth:.3f}, int8 {m.map50_truth:.3f} (gate {res.gate.status})")
        print(f"device detections vs Ultralytics predict, mAP@0.5: float .tflite "
              f"{device_map(float_tflite, images, reference):.3f}, int8 {device_map(int8, images, reference):.3f}")


if __name__ == "__main__":
    main()
