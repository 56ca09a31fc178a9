"""The edgekit metadata's one writer (edgekit/contract/metadata.py, ``ModelMetadata.to_document``):
the inverse of its one parser on files ``edgekit meta`` writes and on documents older edgekit wrote,
values it cannot read kept for ``edgekit meta`` to repair, keys outside the contract kept as they came.
(The converter's files are checked the same way in tests/converters/test_convert.py.)"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from edgekit.cli import main
from edgekit.commands.meta import updated_metadata
from edgekit.contract import BoxFormat, OutputFormat, Task
from edgekit.contract.metadata import DetectionMetadata, ModelMetadata, QuantizationMetadata
from edgekit.errors import ModelError
from edgekit.runtimes.tensors import inspect_model
from tests.conftest import needs_schema, shared_model

MOBILENET = "mobilenet_v1_0.25_128_quant.tflite"
# As edgekit 0.1 wrote a converted classifier (a source without its hash, a key of its own).
OLDER = {"edgekit_version": "0.1.0", "task": "classify", "output_format": "classes", "labels": ["cat", "dog"],
         "preprocessing": {"input_size": [128, 128], "resize": "stretch", "color": "RGB", "mean": [127.5] * 3,
                           "std": [127.5] * 3},
         "quantization": {"mode": "int8", "engine": "tflite", "engine_version": "2.16.1", "calibration_samples": 200,
                          "seed": 0},
         "source": {"name": "shapes.keras", "sha256": "ab" * 32},
         "accuracy": {"validation_samples": 200, "top1_agreement": 0.99, "drop": 0.5, "basis": "agreement",
                      "max_drop": 2.0, "gate": "PASS"},
         "edgetpu": {"compiler": "16.0", "ops_on_edgetpu": 30, "ops_on_cpu": 1},
         "site": {"line": 4}}
ULTRALYTICS = {"source": {"name": "Ultralytics metadata in the file"}, "task": "detect", "output_format": "yolo",
               "labels": ["person", "car"],
               "preprocessing": {"resize": "letterbox", "interpolation": "linear", "box_mapping": "ultralytics"},
               "detection": {"box_format": "cxcywh", "normalized": True, "score_threshold": 0.25,
                             "iou_threshold": 0.7, "max_det": 300, "outputs": ["boxes", "scores"]},
               "segmentation": {"layout": "scores"}}


def _args(**given: Any) -> argparse.Namespace:
    names = ("anchors", "task", "output_format", "labels", "preset", "resize", "mean", "std", "range", "pad_value",
             "interpolation")
    return argparse.Namespace(**{n: given.get(n) for n in names})


@pytest.mark.parametrize("doc", [OLDER, ULTRALYTICS], ids=["older-edgekit", "ultralytics"])
def test_the_writer_is_the_parsers_inverse(doc: dict[str, Any]) -> None:
    meta = ModelMetadata.parse(doc)
    assert meta.to_document() == doc
    assert ModelMetadata.parse(meta.to_document()) == meta


def test_older_files_still_read() -> None:
    meta = ModelMetadata.parse(OLDER)
    assert (meta.task, meta.output_format, meta.labels) == (Task.CLASSIFY, OutputFormat.CLASSES, ("cat", "dog"))
    assert meta.quantization == QuantizationMetadata("int8", "tflite", "2.16.1", 200, 0)
    assert meta.extra == {"site": {"line": 4}} and meta.edgetpu is not None and meta.edgetpu["ops_on_cpu"] == 1
    assert "quantization=int8" in meta.summary()
    # a source whose hash an older edgekit wrote as null reads, and is written without it
    old = {**OLDER, "source": {"name": "shapes.keras", "sha256": None}}
    assert ModelMetadata.parse(old).to_document()["source"] == {"name": "shapes.keras"}


def test_a_value_built_in_python_writes_the_documents_spelling() -> None:
    meta = ModelMetadata(task=Task.DETECT, output_format=OutputFormat.YOLO, labels=("a",),
                         detection=DetectionMetadata(box_format=BoxFormat.CXCYWH, normalized=False,
                                                     outputs=("boxes", "scores")))
    assert meta.to_document() == {"task": "detect", "output_format": "yolo", "labels": ["a"],
                                  "detection": {"box_format": "cxcywh", "normalized": False,
                                                "outputs": ["boxes", "scores"]}}
    with pytest.raises(TypeError, match="no field colour"):
        meta.with_values(colour="red")


def test_a_bad_value_is_kept_for_meta_to_repair() -> None:
    bad = {**OLDER, "task": "bogus", "detection": {"max_det": "many"}}
    with pytest.raises(ModelError, match="unknown task 'bogus'"):
        ModelMetadata.parse(bad)
    kept = ModelMetadata.parse(bad, keep_bad=True)
    assert kept.task is None and kept.extra["task"] == "bogus" and kept.to_document() == bad
    repaired = updated_metadata(bad, _args(task="detect"))
    assert repaired["task"] == "detect" and repaired["detection"] == {"max_det": "many"}
    assert {k: v for k, v in repaired.items() if k != "task"} == {k: v for k, v in bad.items() if k != "task"}


def test_meta_keeps_what_it_does_not_change() -> None:
    doc = updated_metadata(OLDER, _args(resize="letterbox", pad_value=0))
    assert doc == {**OLDER, "preprocessing": {**OLDER["preprocessing"], "resize": "letterbox", "pad_value": 0}}
    anchors = updated_metadata({}, _args(anchors="face-short-range"))
    assert anchors["task"] == "detect" and anchors["output_format"] == "anchors" and set(anchors["anchors"]) == {
        "ssd", "decode"}


@needs_schema
def test_files_edgekit_meta_writes_round_trip(shared_models: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    src, out = shared_model(shared_models, MOBILENET), tmp_path / "mobilenet_meta.tflite"
    labels = shared_models / "imagenet_labels.txt"
    assert main(["meta", str(src), "--labels", str(labels), "--resize", "stretch", "-o", str(out)]) == 0
    assert main(["meta", str(out), "--task", "classify", "--interpolation", "linear"]) == 0
    doc = inspect_model(out).metadata
    assert doc is not None and ModelMetadata.parse(doc).to_document() == doc
    assert doc["task"] == "classify" and len(doc["labels"]) == 1001
    assert doc["preprocessing"] == {"resize": "stretch", "interpolation": "linear"}
    assert "wrote the edgekit metadata" in capsys.readouterr().out
