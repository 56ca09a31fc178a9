"""Never a silent misread: a table of real output signatures, each read one way or refused.

Rows: every model in ../shared/models, the models the tests build, and hand-made look-alikes of
public models (DeepLab's int64 arg-max map, MediaPipe's face and palm detectors, MoveNet)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgekit.contract import OutputFormat, Task, detect_format, make_decoder, recognize_format
from edgekit.contract.readings import AmbiguousOutputsError, read_outputs
from edgekit.errors import ModelError
from edgekit.runtimes import TensorSpec, inspect_model
from tests.conftest import shared_model

F32, I64, I32, U8, I8 = np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.uint8), \
    np.dtype(np.int8)


def _t(shape: tuple[int, ...], dtype: np.dtype = F32, scale: float = 0.0, name: str = "out") -> TensorSpec:
    return TensorSpec(name, 0, shape, dtype, scale)


def _image(side: int, dtype: np.dtype = F32) -> list[TensorSpec]:
    return [_t((1, side, side, 3), dtype, name="image")]


LOOK_ALIKES = [  # id, outputs, inputs, labels, metadata, expected format or error, text in the reason/message
    ("deeplab int64 arg-max", [_t((1, 513, 513), I64)], _image(513), None, None, OutputFormat.SEGMENTATION,
     "arg-max map int64[1, 513, 513]"),
    ("deeplab float scores", [_t((1, 257, 257, 21))], _image(257), None, None, OutputFormat.SEGMENTATION,
     "per-class scores"),
    ("segmenter int8 scores", [_t((1, 64, 64, 3), I8, 0.05)], _image(128, I8), None, None, OutputFormat.SEGMENTATION,
     "per-class scores"),
    ("selfie foreground", [_t((1, 256, 256, 1))], _image(256), None, None, OutputFormat.SEGMENTATION, "foreground"),
    ("mediapipe face", [_t((1, 896, 16)), _t((1, 896, 1))], _image(128), None, None, OutputFormat.ANCHORS,
     "face-short-range"),
    ("mediapipe face full range", [_t((1, 2304, 16)), _t((1, 2304, 1))], _image(192), None, None,
     OutputFormat.ANCHORS, "face-full-range"),
    ("mediapipe palm", [_t((1, 2016, 1)), _t((1, 2016, 18))], _image(192), None, None, OutputFormat.ANCHORS, "palm"),
    ("movenet lightning", [_t((1, 1, 17, 3))], _image(192, U8), None, None, OutputFormat.KEYPOINTS, "single pose"),
    ("movenet multipose", [_t((1, 6, 56))], _image(256, U8), None, None, OutputFormat.KEYPOINTS, "multi pose"),
    ("yolov8n", [_t((1, 84, 8400))], _image(640), None, None, OutputFormat.YOLO, "grid cells"),
    ("yolov8n int8", [_t((1, 84, 8400), I8, 0.004)], _image(640, I8), 80, None, OutputFormat.YOLO, "80 labels"),
    ("yolov5s", [_t((1, 25200, 85))], _image(640), None, None, OutputFormat.YOLO, "[1, 25200, 85]"),
    ("yolo split head", [_t((1, 4, 2100)), _t((1, 80, 2100))], _image(320), None, None, OutputFormat.YOLO,
     "grid cell"),
    ("ssd postprocess", [_t((1, 10, 4)), _t((1, 10)), _t((1, 10)), _t((1,))], _image(300, U8), None, None,
     OutputFormat.SSD, "four outputs"),
    ("classifier", [_t((1, 1001), U8, 0.0039)], _image(224, U8), None, None, OutputFormat.CLASSES, "1001 class"),
    # look-alikes that must be refused, not misread
    ("int32 [1, 84, 8400] is ids, not YOLO", [_t((1, 84, 8400), I32)], _image(640), None, None, ModelError,
     "cannot tell"),
    ("float [1, 513, 513]: neither a class map nor YOLO", [_t((1, 513, 513))], _image(513), None, None, ModelError,
     "cannot tell"),
    ("[1, 6, 56] with 52 labels: YOLO or MoveNet", [_t((1, 6, 56))], _image(256), 52, None, AmbiguousOutputsError,
     "--output-format keypoints / --output-format yolo"),
    ("boxes [1, 896, 4] + scores: anchors or YOLO", [_t((1, 896, 4)), _t((1, 896, 1))], _image(128), None, None,
     AmbiguousOutputsError, "--output-format"),
    # and what the metadata settles
    ("[1, 6, 56] said to be YOLO", [_t((1, 6, 56))], _image(256), 52, {"output_format": "yolo"}, OutputFormat.YOLO,
     "metadata"),
    ("boxes [1, 896, 4] with anchor options", [_t((1, 896, 4)), _t((1, 896, 1))], _image(128), None,
     {"anchors": {}}, OutputFormat.ANCHORS, "anchor options in the metadata"),
]


@pytest.mark.parametrize("outputs, inputs, labels, meta, expected, text", [r[1:] for r in LOOK_ALIKES],
                         ids=[r[0] for r in LOOK_ALIKES])
def test_look_alikes(outputs, inputs, labels, meta, expected, text):
    if isinstance(expected, OutputFormat):
        reading = read_outputs(outputs, meta, inputs=inputs, labels=labels)
        assert reading.format is expected and text in reading.why
    else:
        with pytest.raises(expected, match=text.replace("[", r"\[").replace("]", r"\]")):
            read_outputs(outputs, meta, inputs=inputs, labels=labels)


def test_the_shape_only_recognizer_refuses_what_read_outputs_refuses():
    """`recognize_format` (the converter's view, no inputs) gives None for a look-alike, never YOLO."""
    assert recognize_format([_t((1, 513, 513), I64)], None) is OutputFormat.SEGMENTATION
    assert recognize_format([_t((1, 84, 8400), I32)], None) is None
    with pytest.raises(ModelError, match="cannot tell"):
        detect_format([_t((1, 84, 8400), I32)], None)


def test_a_task_narrows_the_reading_and_names_the_right_command():
    with pytest.raises(ModelError, match=r"not a detector.*segmentation.*`edgekit segment`"):
        read_outputs([_t((1, 513, 513), I64)], None, task=Task.DETECT)
    with pytest.raises(ModelError, match=r"not a pose model.*classes.*`edgekit classify`"):
        read_outputs([_t((1, 1001))], None, task="pose")


def test_a_detector_decoder_refuses_a_segmenter():
    with pytest.raises(ModelError, match="Segmenter"):
        make_decoder([_t((1, 513, 513), I64)], None)


@pytest.mark.parametrize("name, expected", [
    ("ssd_mobilenet_v1_coco_quant.tflite", OutputFormat.SSD),
    ("mobilenet_v2_1.0_224_quant.tflite", OutputFormat.CLASSES),
    ("mobilenet_v1_0.25_128_quant.tflite", OutputFormat.CLASSES),
    ("mobilenet_v1_0.25_128_quant_edgetpu.tflite", OutputFormat.CLASSES),
])
def test_every_shared_model(shared_models: Path, name: str, expected: OutputFormat):
    info = inspect_model(shared_model(shared_models, name))
    assert read_outputs(info.outputs, info.metadata, inputs=info.inputs, ops=info.ops).format is expected


@pytest.mark.slow
@pytest.mark.parametrize("field, expected, text", [
    ("seg_scores", OutputFormat.SEGMENTATION, "per-class scores float32[1, 64, 64, 3]"),
    ("seg_scores_int8", OutputFormat.SEGMENTATION, "per-class scores int8[1, 64, 64, 3]"),
    ("seg_argmax", OutputFormat.SEGMENTATION, "arg-max map int64[1, 64, 64]"),
    ("pose_single", OutputFormat.KEYPOINTS, "single pose [1, 1, 17, 3]"),
    ("pose_multi", OutputFormat.KEYPOINTS, "multi pose [1, 6, 56]"),
    ("face", OutputFormat.ANCHORS, "face-short-range"),
])
def test_every_model_the_tests_build(vision_models, field: str, expected: OutputFormat, text: str):
    info = inspect_model(getattr(vision_models, field))
    reading = read_outputs(info.outputs, info.metadata, inputs=info.inputs, ops=info.ops)
    assert reading.format is expected and text in reading.why


@pytest.mark.parametrize("fmt, arrays, fragment", [
    (OutputFormat.KEYPOINTS, [np.full((1, 1, 17, 3), 0.5, np.float32)], None),
    (OutputFormat.KEYPOINTS, [np.full((1, 1, 17, 3), 7.0, np.float32)], "keypoint scores run from 7 to 7"),
    (OutputFormat.KEYPOINTS, [np.concatenate([np.full((1, 1, 17, 2), 40.0), np.full((1, 1, 17, 1), 0.9)], -1)],
     "not fractions of the input"),
    (OutputFormat.KEYPOINTS, [np.full((1, 6, 56), 0.3, np.float32)], None),
    (OutputFormat.KEYPOINTS, [np.full((1, 6, 56), -3.0, np.float32)], "not 0..1"),
    (OutputFormat.SEGMENTATION, [np.zeros((1, 8, 8), np.int64)], None),
    (OutputFormat.SEGMENTATION, [np.full((1, 8, 8), -1, np.int64)], "class ids >= 0"),
    (OutputFormat.ANCHORS, [np.full((1, 896, 16), np.nan, np.float32), np.zeros((1, 896, 1))], "NaN"),
])
def test_values_that_cannot_be_the_format(fmt, arrays, fragment):
    from edgekit.contract.readings import implausible

    why = implausible(fmt, arrays)
    assert (why is None) if fragment is None else (fragment in why)


@pytest.mark.parametrize("arrays, quantized, fragment", [
    ([np.random.default_rng(0).uniform(0, 1, (1, 84, 100)).astype(np.float32)], False, None),
    ([np.random.default_rng(0).normal(0, 5, (1, 84, 100)).astype(np.float32)], False, "where a YOLO head's are 0..1"),
    ([np.random.default_rng(0).normal(0, 5, (1, 84, 100)).astype(np.float32)], True, None),  # the converter's warning
    ([np.random.default_rng(0).uniform(0, 1, (1, 100, 85)).astype(np.float32) * np.r_[[640.0] * 4, [1.0] * 81]],
     False, None),  # boxes in input pixels, then objectness and class scores
])
def test_yolo_scores_must_be_fractions(arrays, quantized, fragment):
    from edgekit.contract.readings import implausible

    why = implausible(OutputFormat.YOLO, arrays, quantized=quantized)
    assert (why is None) if fragment is None else (fragment in why)
