"""The model reading (edgekit/contract/modelreading.py) and the typed metadata (metadata.py): each
field decided once, with where it came from; a caller's options marked as such; bad metadata refused
with the key that holds it; a loaded model reads itself once per task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgekit.contract import BoxFormat, OutputFormat, ResizeMode, Task, YoloLayout
from edgekit.contract.decode import decoder_for
from edgekit.contract.metadata import ModelMetadata, QuantizationMetadata
from edgekit.contract.modelreading import DEFAULT_THRESHOLD, read_model, read_tensors
from edgekit.contract.preprocessing import Provenance
from edgekit.contract.segmentation import SegmentationLayout
from edgekit.errors import InputError, ModelError
from edgekit.runtimes import TensorSpec, load_model
from tests.conftest import shared_model

F32, U8, I64 = np.dtype(np.float32), np.dtype(np.uint8), np.dtype(np.int64)
IMAGE = TensorSpec("image", 0, (1, 320, 320, 3), U8, 0.0)


def _t(shape: tuple[int, ...], dtype: Any = F32, name: str = "out") -> TensorSpec:
    return TensorSpec(name, 0, shape, np.dtype(dtype), 0.0)


@pytest.mark.parametrize("outputs, meta, task, fmt, fmt_from", [
    ([_t((1, 7, 2100))], None, Task.DETECT, OutputFormat.YOLO, Provenance.OUTPUTS),
    ([_t((1, 1001))], None, Task.CLASSIFY, OutputFormat.CLASSES, Provenance.OUTPUTS),
    ([_t((1, 320, 320), I64)], None, Task.SEGMENT, OutputFormat.SEGMENTATION, Provenance.OUTPUTS),
    ([_t((1, 1, 17, 3))], None, Task.POSE, OutputFormat.KEYPOINTS, Provenance.OUTPUTS),
    ([_t((1, 7, 2100))], {"output_format": "yolo"}, Task.DETECT, OutputFormat.YOLO, Provenance.EDGEKIT),
])
def test_task_and_format_with_where_they_came_from(outputs: list[TensorSpec], meta: dict | None, task: Task,
                                                   fmt: OutputFormat, fmt_from: Provenance) -> None:
    r = read_tensors(outputs, meta, inputs=[IMAGE])
    assert (r.task, r.format, r.sources["format"]) == (task, fmt, fmt_from)
    assert r.input is not None and r.input.size == (320, 320)
    assert r.preprocessing is not None  # fed by the conventional resize of its task
    assert r.preprocessing.resize is (ResizeMode.LETTERBOX if task in (Task.SEGMENT, Task.POSE) else ResizeMode.STRETCH)


def test_labels_and_decoder_options_from_the_metadata_then_the_callers() -> None:
    meta = {"labels": ["a", "b", "c"], "detection": {"score_threshold": 0.3, "box_format": "xyxy", "max_det": 7}}
    r = read_tensors([_t((1, 7, 2100))], meta, inputs=[IMAGE])
    assert r.labels == ("a", "b", "c") and r.sources["labels"] is Provenance.EDGEKIT
    assert (r.decoder.threshold, r.decoder.box_format, r.decoder.max_detections) == (0.3, BoxFormat.XYXY, 7)
    assert r.sources["threshold"] is Provenance.EDGEKIT and r.sources["iou_threshold"] is Provenance.CONVENTION
    mine = r.with_options(threshold=0.6, labels=["x", "y", "z"], resize="letterbox")
    assert (mine.decoder.threshold, mine.labels) == (0.6, ("x", "y", "z"))
    assert mine.sources["threshold"] is mine.sources["labels"] is Provenance.OPTION
    assert mine.preprocessing is not None and mine.preprocessing.resize is ResizeMode.LETTERBOX
    assert mine.preprocessing.sources["resize"] is Provenance.OPTION
    assert r.decoder.threshold == 0.3  # the model's reading itself is unchanged (frozen)
    assert decoder_for(mine).threshold == 0.6


def test_the_label_count_settles_a_raw_yolo_layout_for_the_decoder() -> None:
    # [1, 85, 85]: 4+81 (V8) or 5+80 (V5); the labels decide, on the device and in the gate alike.
    head = [_t((1, 85, 85))]
    v5 = read_tensors(head, {"output_format": "yolo", "labels": [str(i) for i in range(80)]})
    v8 = read_tensors(head, {"output_format": "yolo", "labels": [str(i) for i in range(81)]})
    assert v5.yolo is not None and v8.yolo is not None
    assert (v5.yolo.layout, v8.yolo.layout) == (YoloLayout.V5, YoloLayout.V8)
    assert v5.with_options(labels=[str(i) for i in range(81)]).yolo == v8.yolo


def test_segmentation_layout_from_the_metadata_else_the_outputs() -> None:
    out = [_t((1, 320, 320, 1))]
    assert read_tensors(out, None, inputs=[IMAGE]).segmentation is SegmentationLayout.FOREGROUND
    named = read_tensors(out, {"output_format": "segmentation", "segmentation": {"layout": "scores"}})
    assert named.segmentation is SegmentationLayout.SCORES and named.sources["layout"] is Provenance.EDGEKIT


@pytest.mark.parametrize("meta, error, match", [
    ({"detection": {"score_threshold": "high"}}, ModelError, "detection.score_threshold 'high'"),
    ({"detection": {"score_threshold": 2.0}}, ModelError, "threshold must be between 0 and 1"),
    ({"task": "count"}, ModelError, "unknown task 'count'"),
    ({"output_format": "boxes"}, ModelError, "output_format"),
    ({"segmentation": {"layout": "blobs"}}, ModelError, "segmentation.layout"),
])
def test_bad_metadata_is_refused_naming_the_key(meta: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        read_tensors([_t((1, 7, 2100))], meta)


def test_a_callers_option_out_of_range_is_an_input_error() -> None:
    r = read_tensors([_t((1, 7, 2100))])
    assert r.decoder.threshold == DEFAULT_THRESHOLD
    with pytest.raises(InputError, match="max_detections must be at least 1"):
        r.with_options(max_detections=0)


def test_metadata_parses_once_into_typed_fields() -> None:
    m = ModelMetadata.parse({"task": "detect", "labels": ["a", 2], "quantization": {"mode": "int8"},
                             "detection": {"outputs": ["scores", "boxes"], "normalized": 1}})
    assert (m.task, m.labels, m.quantization) == (Task.DETECT, ("a", "2"), QuantizationMetadata("int8"))
    assert (m.detection.outputs, m.detection.normalized) == (("scores", "boxes"), True)
    assert ModelMetadata.parse(None) == ModelMetadata()
    assert "2 labels" in m.summary() and "quantization=int8" in m.summary()


def test_a_loaded_model_reads_itself_once_per_task(shared_models: Path) -> None:
    path = shared_model(shared_models, "ssd_mobilenet_v1_coco_quant.tflite")
    with load_model(path) as model:
        first = model.reading()
        assert first is model.reading() and first is model.reading(Task.DETECT)  # kept, not read again
        assert first.format is OutputFormat.SSD and "TFLite_Detection_PostProcess" in first.why  # the op counts
        assert first.ssd_order == (0, 1, 2, 3)
        with pytest.raises(ModelError, match="not a segmenter"):
            model.reading(Task.SEGMENT)
        assert read_model(model.info).format is OutputFormat.SSD  # the file alone reads the same
