"""`edgekit segment`, `edgekit pose` and `edgekit meta` as a user runs them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edgekit.cli import main
from edgekit.preprocess import load_image
from edgekit.runtimes import inspect_model

pytestmark = pytest.mark.slow  # the models are built with TensorFlow once per session


@pytest.fixture()
def labels_file(tmp_path: Path) -> Path:
    p = tmp_path / "labels.txt"
    p.write_text("background\nred\ngreen\n")
    return p


def test_segment_json_and_saved_overlay(vision_models, shared_images, labels_file, tmp_path, capsys):
    out_png = tmp_path / "parrot_seg.png"
    code = main(["segment", "-m", str(vision_models.seg_scores), "--labels", str(labels_file), "--source",
                 str(shared_images / "parrot.jpg"), "--json", "--min-area", "100", "--save", str(out_png)])
    assert code == 0
    doc = json.loads(capsys.readouterr().out.strip())
    assert {c["label"] for c in doc["classes"]} == {"background", "red", "green"}
    assert doc["regions"] and all(r["area"] >= 100 and r["label"] in ("red", "green") for r in doc["regions"])
    saved = load_image(out_png)
    original = load_image(shared_images / "parrot.jpg")
    assert saved.shape == original.shape and np.abs(saved.astype(int) - original).mean() > 5


def test_segment_text_lines(vision_models, shared_images, capsys):
    assert main(["segment", "-m", str(vision_models.seg_argmax), "--source", str(shared_images / "parrot.jpg")]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("frame 0 ") and "regions" in out.out and "1 frames processed" in out.err


def test_pose_json(vision_models, shared_images, capsys):
    assert main(["pose", "-m", str(vision_models.pose_single), "--source", str(shared_images / "parrot.jpg"),
                 "--json", "-t", "0"]) == 0
    doc = json.loads(capsys.readouterr().out.strip())
    assert len(doc["poses"]) == 1 and doc["poses"][0]["keypoints"][0]["name"] == "nose"


def test_detect_on_a_segmenter_says_which_command(vision_models, shared_images, capsys):
    code = main(["detect", "-m", str(vision_models.seg_argmax), "--source", str(shared_images / "parrot.jpg")])
    assert code == 2 and "edgekit segment" in capsys.readouterr().err


def test_meta_writes_labels_task_and_anchors(vision_models, tmp_path, capsys):
    model = tmp_path / "seg.tflite"
    shutil.copy(vision_models.seg_argmax, model)
    labels = tmp_path / "labels.txt"
    labels.write_text("background\nrust\nmoss\n")
    assert main(["meta", str(model), "--task", "segment", "--labels", str(labels), "--resize", "stretch"]) == 0
    assert "segmentation (arg-max map int64[1, 64, 64])" in capsys.readouterr().out
    meta = inspect_model(model).metadata
    assert meta["labels"] == ["background", "rust", "moss"] and meta["preprocessing"]["resize"] == "stretch"
    face = tmp_path / "face.tflite"
    shutil.copy(vision_models.face, face)
    assert main(["meta", str(face), "--anchors", "face-short-range", "-o", str(tmp_path / "face2.tflite")]) == 0
    meta = inspect_model(tmp_path / "face2.tflite").metadata
    assert meta["output_format"] == "anchors" and meta["anchors"]["ssd"]["strides"] == [8, 16, 16, 16]
    assert main(["meta", str(face), "--anchors", "nope"]) == 2
    assert "not a preset" in capsys.readouterr().err


def test_meta_that_does_not_fit_the_outputs_writes_nothing(vision_models, tmp_path, capsys):
    model = tmp_path / "seg.tflite"
    shutil.copy(vision_models.seg_argmax, model)
    before = model.read_bytes()
    assert main(["meta", str(model), "--task", "detect", "--output-format", "anchors"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert model.read_bytes() == before
    assert main(["meta", str(model), "--task", "detect", "--output-format", "anchors", "-o", str(tmp_path / "o.tflite")]) == 2
    assert not (tmp_path / "o.tflite").exists()


@pytest.mark.parametrize("field, text", [
    ("seg_argmax", "segment, segmentation (arg-max map int64[1, 64, 64])"),
    ("pose_multi", "pose, keypoints (MoveNet multi pose [1, 6, 56])"),
    ("face", "detect, anchors (MediaPipe anchors [1, 896, 16] + [1, 896, 1] (face-short-range"),
])
def test_info_says_what_it_recognized_and_why(vision_models, field, text, capsys):
    assert main(["info", str(getattr(vision_models, field))]) == 0
    assert text in capsys.readouterr().out
