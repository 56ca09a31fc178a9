"""The second model of benchmarks/loop.py: a YOLOv8n int8 at 640x640, slower than a 30 fps camera.

    python benchmarks/yolov8n_model.py --python /tmp/ul/bin/python [-o yolov8n_640_int8.tflite] [--weights best.pt]

Ultralytics builds YOLOv8n from ``yolov8n.yaml`` (80 classes, no weights downloaded) or loads
``--weights``, and exports it to ONNX at 640x640 (opset 12); ``edgekit convert`` makes it int8
(onnx2tf, then ai-edge-quantizer), calibrated on tests/data's photos. For loop speed only the
architecture and input size count, not the weights: the file is written, not committed
(Ultralytics' models are AGPL-3.0). Then::

    python benchmarks/loop.py -m yolov8n_640_int8.tflite --frames 60 --repeat 5 --latency-repeat 9

Ultralytics needs torch (several GB): install it in its own environment, as for
benchmarks/ultralytics_tflite.py: ``python3 -m venv /tmp/ul && /tmp/ul/bin/pip install ultralytics``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

# Runs in the Ultralytics environment: build or load, export to ONNX; prints the file's path last.
EXPORT = r"""
import os, sys
os.environ.setdefault("YOLO_OFFLINE", "1")
from ultralytics import YOLO
os.chdir(sys.argv[1])
m = YOLO(sys.argv[2])
print(m.export(format="onnx", imgsz=int(sys.argv[3]), device="cpu", opset=12))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", required=True, help="the interpreter of an environment with ultralytics installed")
    ap.add_argument("-o", "--output", type=Path, default=Path("yolov8n_640_int8.tflite"))
    ap.add_argument("--weights", default="yolov8n.yaml", help="a trained .pt (default: the architecture, untrained)")
    ap.add_argument("--imgsz", type=int, default=640)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgekit-yolov8n-") as tmp:
        weights = args.weights if args.weights.endswith(".yaml") else str(Path(args.weights).resolve())
        done = subprocess.run([args.python, "-c", EXPORT, tmp, weights, str(args.imgsz)], capture_output=True,
                              text=True, env={**os.environ, "YOLO_OFFLINE": "1"})
        if done.returncode != 0:
            sys.exit(f"ultralytics failed: {done.stderr.strip().splitlines()[-1:]}")
        onnx = Path(tmp) / Path(done.stdout.strip().splitlines()[-1]).name
        cal = Path(tmp) / "cal"
        cal.mkdir()
        for photo in sorted([*DATA.glob("*.jpg"), *DATA.glob("*.png")]):
            shutil.copy(photo, cal / photo.name)
        done = subprocess.run([sys.executable, "-m", "edgekit", "convert", str(onnx), "-o", str(args.output),
                               "--mode", "int8", "--calibration", str(cal), "--no-diagnose", "--max-drop", "100",
                               "--task", "detect", "-q"])
        failed = args.output.with_name(f"{args.output.stem}.FAILED-GATE{args.output.suffix}")
        if done.returncode == 3 and failed.exists():  # untrained: no detection to measure the drop on
            failed.replace(args.output)
            print("the accuracy gate could not measure an untrained model; for loop speed that does not matter")
        elif done.returncode != 0:
            sys.exit(f"edgekit convert failed (exit {done.returncode})")
    print(f"{args.output}: YOLOv8n int8, {args.imgsz}x{args.imgsz}, {args.output.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
