"""What each decoder costs per 640x480 frame, beside one inference of a real model, in one run.

Outputs of the sizes published models give (DeepLab v3 [1, 513, 513, 21] scores and its int64
arg-max map, a [1, 257, 257, 21] segmenter, MoveNet single [1, 1, 17, 3] and multi [1, 6, 56],
MediaPipe's face (896 anchors) and palm (2016 anchors) detectors), filled with values shaped like
real ones (blobs, a few objects); every decoder runs once per round, rounds interleave with an
inference of the SSD MobileNet in tests/data (300x300, uint8), and the figures are medians.

    python benchmarks/decoders.py [--rounds 40] [--threads N] [--model MODEL]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._common import cpu_name, rotated  # noqa: E402
from edgekit.contract.anchors import ANCHOR_PRESETS, decode_anchors  # noqa: E402
from edgekit.contract.keypoints import decode_poses  # noqa: E402
from edgekit.contract.segmentation import SegmentationMask, decode_segmentation  # noqa: E402
from edgekit.preprocess import ResizeMode, fit  # noqa: E402
from edgekit.runtimes import load_model  # noqa: E402
from edgekit.segment import draw_segmentation, find_regions, segmentation_of  # noqa: E402

DEFAULT_MODEL = ROOT / "tests" / "data" / "ssd_mobilenet_v1_coco_quant.tflite"
FRAME_HW = (480, 640)


def _blobs(h: int, w: int, c: int, rng: np.random.Generator) -> np.ndarray:
    coarse = rng.normal(size=(max(3, h // 24), max(3, w // 24), c)).astype(np.float32)
    return cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC)[None]


def _defects(rng: np.random.Generator) -> SegmentationMask:
    """A 640x480 mask as an inspection segmenter gives: mostly background, a few scratches and stains."""
    m = np.zeros(FRAME_HW, np.int32)
    for _ in range(12):
        y, x = rng.integers(0, FRAME_HW[0] - 20), rng.integers(0, FRAME_HW[1] - 40)
        m[y:y + rng.integers(2, 20), x:x + rng.integers(5, 40)] = rng.integers(1, 3)
    return SegmentationMask(m, ("background", "scratch", "stain"))


def _anchor_outputs(preset: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    spec = ANCHOR_PRESETS[preset]
    n, coords = len(spec.anchor_boxes), spec.decode.num_coords
    boxes = rng.normal(0, 2, (1, n, coords)).astype(np.float32)
    scores = rng.normal(-6, 1, (1, n, 1)).astype(np.float32)
    scores[0, rng.choice(n, 30, replace=False), 0] = 3.0  # a few faces, several anchors each
    return boxes, scores


def decoders(rng: np.random.Generator) -> dict[str, Callable[[], Any]]:
    frame = np.zeros((*FRAME_HW, 3), np.uint8)
    lb = {s: fit(frame, (s, s), ResizeMode.LETTERBOX)[1] for s in (128, 192, 257, 513)}
    deeplab = _blobs(513, 513, 21, rng)
    deeplab_map = deeplab[0].argmax(-1).astype(np.int64)[None]
    small = _blobs(257, 257, 21, rng)
    mask = decode_segmentation(small, lb[257])
    seg = segmentation_of(mask)
    defects = _defects(rng)
    single = rng.uniform(0, 1, (1, 1, 17, 3)).astype(np.float32)
    multi = rng.uniform(0, 1, (1, 6, 56)).astype(np.float32)
    face, palm = _anchor_outputs("face-short-range", rng), _anchor_outputs("palm", rng)
    return {
        "segmentation scores [1,513,513,21]": lambda: decode_segmentation(deeplab, lb[513]),
        "segmentation arg-max map int64 [1,513,513]": lambda: decode_segmentation(deeplab_map, lb[513]),
        "segmentation scores [1,257,257,21]": lambda: decode_segmentation(small, lb[257]),
        "  + regions, 21 classes present (connected components)": lambda: find_regions(mask),
        "regions, background + 2 defect classes": lambda: find_regions(defects),
        "  + overlay drawing": lambda: draw_segmentation(frame, seg),
        "pose single [1,1,17,3]": lambda: decode_poses(single, lb[192]),
        "pose multi [1,6,56]": lambda: decode_poses(multi, lb[257], threshold=0.0),
        "anchors face 896 (weighted NMS)": lambda: decode_anchors(*face, ANCHOR_PRESETS["face-short-range"], lb[128]),
        "anchors palm 2016 (weighted NMS)": lambda: decode_anchors(*palm, ANCHOR_PRESETS["palm"], lb[192]),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    jobs = decoders(rng)
    times: dict[str, list[float]] = {k: [] for k in jobs}
    infer: list[float] = []
    model = load_model(args.model, num_threads=args.threads) if args.model.exists() else None
    if model is not None:
        x = np.zeros(model.inputs[0].shape, model.inputs[0].dtype)
        model.input_view(0)[...] = x
        for _ in range(3):
            model.invoke()
    names = list(jobs)
    for r in range(args.rounds):
        for name in rotated(names, r):  # drift hits every row alike
            t0 = time.perf_counter()
            jobs[name]()
            times[name].append((time.perf_counter() - t0) * 1e3)
        if model is not None:
            t0 = time.perf_counter()
            model.invoke()
            [model.output(i) for i in range(len(model.outputs))]
            infer.append((time.perf_counter() - t0) * 1e3)
    ref = float(np.median(infer)) if infer else None
    print(f"CPU: {cpu_name()}; frame 640x480; {args.rounds} interleaved rounds, medians")
    if ref is not None:
        print(f"inference: {args.model.name} ({model.backend.name}, {model.num_threads} threads): {ref:.2f} ms")
    print("| decoder | ms per frame | x inference |")
    print("|---|---|---|")
    for name in names:
        ms = float(np.median(times[name]))
        ratio = f"{ms / ref:.2f}" if ref else "-"
        print(f"| {name} | {ms:.2f} | {ratio} |")
    if model is not None:
        model.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
