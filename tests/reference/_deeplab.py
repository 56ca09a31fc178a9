"""The DeepLab reference: Coral's pycoral example (examples/semantic_segmentation.py), which feeds the
model ``img.resize((width, height), Image.LANCZOS)`` and reads the arg-max map as it comes; the map is
taken back to the photo here by the nearest 513 x 513 cell of each pixel's centre."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DEEPLAB = Path(__file__).resolve().parent / "models" / "deeplabv3_mnv2_dm05_pascal_quant.tflite"


def reference_class_map(path: Path, image: np.ndarray) -> np.ndarray:
    """(H, W) class ids: pycoral's stretch with PIL's Lanczos, the model, the map back to the photo."""
    from PIL import Image

    from edgekit.runtimes.loader import load_model

    h, w = image.shape[:2]
    with load_model(path, isolate=False) as m:
        size = (m.inputs[0].shape[2], m.inputs[0].shape[1])
        m.input_view(0)[...] = np.asarray(Image.fromarray(image).resize(size, Image.LANCZOS))
        m.invoke()
        small = np.asarray(m.output(0))[0]
    rows = np.minimum(((np.arange(h) + 0.5) * small.shape[0] / h).astype(int), small.shape[0] - 1)
    cols = np.minimum(((np.arange(w) + 0.5) * small.shape[1] / w).astype(int), small.shape[1] - 1)
    return small[rows][:, cols]


def class_iou(a: np.ndarray, b: np.ndarray, cls: int) -> float:
    union = np.logical_or(a == cls, b == cls).sum()
    return float(np.logical_and(a == cls, b == cls).sum() / union) if union else 1.0
