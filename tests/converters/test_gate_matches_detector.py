"""The accuracy gate measures what the device does: its mAP equals the one computed from
``edgekit.Detector`` run on the same image files with the same models."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgekit.contract import map50


def _image_folder(root: Path, n: int) -> list[Path]:
    """Synthetic shapes scaled to sizes unlike the 32x32 input, so letterboxing and mapping back matter."""
    import cv2
    from PIL import Image

    from tests._tiny_models import shapes

    x, _ = shapes(n, seed=11)
    sizes = [(48, 40), (40, 64), (32, 32), (70, 45), (37, 53)]
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, img in enumerate(x):
        w, h = sizes[i % len(sizes)]
        paths.append(root / f"{i:03d}.png")
        Image.fromarray(cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)).save(paths[-1])
    return paths


@pytest.mark.slow
@pytest.mark.needs_tf
@pytest.mark.parametrize("split_head", [True, False])  # the converter splits a YOLO head's boxes and scores
def test_gate_map_equals_detector_map_on_the_same_files(tmp_path: Path, split_head: bool) -> None:
    pytest.importorskip("tensorflow")
    from edgekit import Detector, load_image
    from edgekit.converters import ConvertOptions, PreprocessingOverrides, convert
    from tests._tiny_models import yolo_head

    files = _image_folder(tmp_path / "val", 20)
    model = yolo_head(seed=1)
    opts = ConvertOptions(task="detect", preprocessing=PreprocessingOverrides(resize="letterbox"), progress=False,
                          split_head=split_head)
    common = dict(calibration=tmp_path / "val", validation=tmp_path / "val", options=opts)
    q = convert(model, tmp_path / "int8.tflite", mode="int8", **common)
    f = convert(model, tmp_path / "float.tflite", mode="float32", **common)
    assert q.metrics.samples == len(files) and q.metrics.map50 is not None
    assert q.metadata["detection"] == f.metadata["detection"]
    assert q.metadata["preprocessing"]["resize"] == "letterbox"
    assert ("outputs" in q.metadata["detection"]) is split_head  # two outputs, read as YOLOv5 (objectness)

    with Detector.create_from_model_path(f.output, threshold=0.25) as fd, \
            Detector.create_from_model_path(q.output, threshold=0.05) as qd:
        images = [load_image(p) for p in files]
        truth = [fd.detect(im) for im in images]
        found = [qd.detect(im) for im in images]
    assert sum(len(t) for t in truth) > 0  # there is something to measure
    # boxes are in each file's own pixels, as the device reports them
    assert all(float(d.xyxy[:, 2].max(initial=0)) <= im.shape[1] for d, im in zip(truth, images))
    assert map50(truth, found) == q.metrics.map50
