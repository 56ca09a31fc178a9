"""What writing a frame into a channels-first (NCHW) input costs beside a channels-last one, and what
decoding a YOLOv8 head as Ultralytics' predict does costs, in one run.

A 1280x720 BGR frame (as OpenCV reads it) letterboxed into a 640x640 float32 input: the way
edgekit's engine does it, channels last and channels first (fit into a small buffer, then
normalized straight into the tensor, channel by channel for NCHW: no transposed copy), beside the
way it did it before (fit, channel swap, to_input, copy in), and a uint8 channels-last input
resized straight into the tensor. Then one [1, 84, 8400] YOLOv8 output
(80 classes, a few hundred candidates above 0.25) decoded with conf 0.25, iou 0.7, max_det 300.
Rounds interleave; figures are medians.

    python benchmarks/channels_first.py [--rounds 60]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import cpu_name, timed_rounds  # noqa: E402
from edgekit.contract import Normalization, ResizeMode, Transform, make_decoder  # noqa: E402
from edgekit.preprocess import fit, fit_into, to_input, write_channels_first, write_channels_last  # noqa: E402
from edgekit.runtimes.tensors import TensorSpec  # noqa: E402

SIZE = 640


def yolo_output(rng: np.random.Generator) -> np.ndarray:
    out = np.zeros((1, 84, 8400), np.float32)
    out[0, :2] = rng.uniform(0, SIZE, (2, 8400))
    out[0, 2:4] = rng.uniform(8, 200, (2, 8400))
    out[0, 4:] = rng.uniform(0, 0.2, (80, 8400))
    hot = rng.choice(8400, 400, replace=False)  # objects: a few hundred confident candidates
    out[0, 4 + rng.integers(0, 80, 400), hot] = rng.uniform(0.26, 0.95, 400)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)
    norm = Normalization((0.0,), (255.0,))
    nhwc = TensorSpec("images", 0, (1, SIZE, SIZE, 3), np.dtype(np.float32))
    nchw = TensorSpec("images", 0, (1, 3, SIZE, SIZE), np.dtype(np.float32))
    t_nhwc, t_nchw = np.zeros(nhwc.shape, np.float32), np.zeros(nchw.shape, np.float32)
    t_u8, small = np.zeros((1, SIZE, SIZE, 3), np.uint8), np.empty((SIZE, SIZE, 3), np.uint8)

    def before() -> None:
        resized, _ = fit(frame, (SIZE, SIZE), ResizeMode.LETTERBOX)
        t_nhwc[...] = to_input(cv2.cvtColor(resized, cv2.COLOR_BGR2RGB), nhwc, norm)

    def channels_last() -> None:
        fit_into(frame, small, ResizeMode.LETTERBOX)
        write_channels_last(small, t_nhwc, nhwc, norm, bgr=True)

    def channels_first() -> None:
        fit_into(frame, small, ResizeMode.LETTERBOX)
        write_channels_first(small, t_nchw, nchw, norm, bgr=True)

    def uint8_direct() -> None:
        fit_into(frame, t_u8, ResizeMode.LETTERBOX)
        cv2.cvtColor(t_u8[0], cv2.COLOR_BGR2RGB, dst=t_u8[0])

    out = yolo_output(rng)
    specs = [TensorSpec("output0", 0, out.shape, np.dtype(np.float32))]
    meta = {"output_format": "yolo", "detection": {"score_threshold": 0.25, "iou_threshold": 0.7, "max_det": 300,
                                                   "normalized": False}}
    decoder = make_decoder(specs, meta)
    tf = Transform((1280, 720), (SIZE, SIZE), 0.5, 0.5, 0.0, 140.0)
    cases: dict[str, Callable[[], object]] = {"float32 NHWC, to_input (before)": before,
                                              "float32 NHWC write": channels_last, "float32 NCHW write": channels_first,
                                              "uint8 NHWC direct": uint8_direct,
                                              "YOLOv8 [1,84,8400] decode": lambda: decoder([out], tf)}
    ms = {k: float(np.median(v)) for k, v in timed_rounds(cases, args.rounds).items()}
    print(f"CPU: {cpu_name()}; 1280x720 BGR frame -> 640x640 letterbox; medians of {args.rounds} interleaved rounds")
    for k, v in ms.items():
        print(f"  {k:<32} {v:7.2f} ms")
    print(f"  NCHW / NHWC float32 write: {ms['float32 NCHW write'] / ms['float32 NHWC write']:.2f}x; "
          f"NHWC write / before: {ms['float32 NHWC write'] / ms['float32 NHWC, to_input (before)']:.2f}x")
    print(f"  detections kept: {len(decoder([out], tf))}")


if __name__ == "__main__":
    main()
