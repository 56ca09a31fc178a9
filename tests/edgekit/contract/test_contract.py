"""The contract's enums, input spec, format recognition and split YOLO heads, table-driven."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.contract import (
    ColorOrder,
    Layout,
    OutputFormat,
    ResizeMode,
    Task,
    Transform,
    YoloOutputs,
    decode_yolo,
    image_input,
    make_decoder,
    map50,
    recognize_format,
    resize_mode,
    yolo_outputs,
)
from edgekit.errors import InputError, ModelError
from edgekit.results import Detections
from edgekit.runtimes.tensors import TensorSpec


def _specs(*shapes: tuple[int, ...]) -> list[TensorSpec]:
    return [TensorSpec(f"out{i}", i, s, np.dtype(np.float32)) for i, s in enumerate(shapes)]


@pytest.mark.parametrize("enum, text, expected", [
    (ColorOrder, "rgb", ColorOrder.RGB),
    (ColorOrder, "BGR", ColorOrder.BGR),
    (ResizeMode, "Letterbox", ResizeMode.LETTERBOX),
    (OutputFormat, "YOLO", OutputFormat.YOLO),
    (Task, "detect", Task.DETECT),
    (Layout, "nchw", Layout.NCHW),
    (ResizeMode, "crop", "unknown resize mode 'crop'; choose one of stretch, letterbox"),
    (ResizeMode, "strech", "Did you mean 'stretch'"),
    (ColorOrder, "rbg", "unknown color order 'rbg'"),
])
def test_one_spelling_parsed_from_any_case(enum: type, text: str, expected: object) -> None:
    if isinstance(expected, enum):
        assert enum.parse(text) is expected
    else:
        with pytest.raises(InputError, match=str(expected)):
            enum.parse(text)


@pytest.mark.parametrize("enum, value, key, expected", [
    (OutputFormat, "SSD", "output_format", OutputFormat.SSD),
    (OutputFormat, "yolo8", "output_format", "metadata has output_format 'yolo8'; edgekit reads classes, ssd, yolo"),
    (ResizeMode, 3, "resize", "metadata has resize 3; edgekit reads stretch, letterbox"),
])
def test_a_choice_named_by_the_metadata(enum: type, value: object, key: str, expected: object) -> None:
    """A name the model's metadata gives is parsed as forgivingly as the user's; a bad one is the model's fault."""
    if isinstance(expected, enum):
        assert enum.from_metadata(value, key) is expected
    else:
        with pytest.raises(ModelError, match=str(expected)):
            enum.from_metadata(value, key)


def test_converter_and_device_share_the_enums() -> None:
    from edgekit import preprocess
    from edgekit.converters import options

    assert options.ColorOrder is ColorOrder and options.ResizeMode is ResizeMode
    assert options.OutputFormat is OutputFormat and options.Task is Task
    assert preprocess.ResizeMode is ResizeMode and preprocess.ColorOrder is ColorOrder


@pytest.mark.parametrize("shape, meta, expected", [
    ((1, 224, 224, 3), None, (224, 224, Layout.NHWC)),
    ((1, 3, 160, 128), None, (128, 160, Layout.NCHW)),
    ((1, 3, 4, 3), None, (4, 3, Layout.NHWC)),  # reads both ways: NHWC unless the metadata says
    ((1, 3, 4, 3), {"preprocessing": {"layout": "NCHW"}}, (3, 4, Layout.NCHW)),
    ((1, 224, 224, 1), None, ModelError),
    ((1, 3, 160, 160), {"preprocessing": {"layout": "NHWC"}}, ModelError),
])
def test_image_input(shape: tuple[int, ...], meta: dict | None, expected: object) -> None:
    spec = TensorSpec("image", 0, shape, np.dtype(np.float32))
    if expected is ModelError:
        with pytest.raises(ModelError, match="not one RGB image"):
            image_input(spec, meta)
    else:
        got = image_input(spec, meta)
        assert (got.width, got.height, got.layout) == expected


def test_resize_mode_from_argument_metadata_or_default() -> None:
    meta = {"preprocessing": {"resize": "letterbox"}}
    assert resize_mode(None, meta) is ResizeMode.LETTERBOX
    assert resize_mode("stretch", meta) is ResizeMode.STRETCH
    assert resize_mode(None, None) is ResizeMode.STRETCH


@pytest.mark.parametrize("shapes, ops, expected", [
    (((1, 10, 4), (1, 10), (1, 10), (1,)), (), OutputFormat.SSD),
    (((1, 84, 8400),), (), OutputFormat.YOLO),
    (((1, 4, 525), (1, 3, 525)), (), OutputFormat.YOLO),  # split head: boxes, scores
    (((1, 525, 80), (1, 525, 4)), (), OutputFormat.YOLO),  # split head, transposed, scores first
    (((1, 1001),), (), OutputFormat.CLASSES),
    (((1, 1),), (), OutputFormat.CLASSES),  # one sigmoid
    (((1, 10, 4), (1, 10)), (), None),
    (((1, 2), (1, 3)), ("TFLite_Detection_PostProcess",), OutputFormat.SSD),
])
def test_recognize_format(shapes: tuple, ops: tuple[str, ...], expected: OutputFormat | None) -> None:
    assert recognize_format(_specs(*shapes), None, ops=ops) is expected


@pytest.mark.parametrize("shapes, meta, expected", [
    (((1, 4, 50), (1, 3, 50)), None, YoloOutputs(0, 1, transposed=False)),
    (((1, 3, 50), (1, 4, 50)), None, YoloOutputs(1, 0, transposed=False)),
    (((1, 50, 4), (1, 50, 2)), None, YoloOutputs(0, 1, transposed=True)),
    # four classes: the shapes cannot tell, the metadata does
    (((1, 4, 50), (1, 4, 50)), {"detection": {"outputs": ["scores", "boxes"]}}, YoloOutputs(1, 0)),
])
def test_yolo_outputs_roles(shapes: tuple, meta: dict | None, expected: YoloOutputs) -> None:
    assert yolo_outputs(_specs(*shapes), meta) == expected


def test_yolo_outputs_refuses_what_is_no_head() -> None:
    with pytest.raises(ModelError, match=r"a yolo model has one output .* or two"):
        yolo_outputs(_specs((1, 4, 50), (1, 3, 49)))


def test_split_head_decodes_like_the_concatenated_head() -> None:
    rng = np.random.default_rng(0)
    n, c = 200, 3
    xy = rng.uniform(10, 150, (2, n))
    wh = rng.uniform(5, 40, (2, n))
    boxes = np.concatenate([xy, wh]).astype(np.float32)[None]  # [1, 4, N] pixels of a 160x160 input
    scores = rng.uniform(0, 1, (1, c, n)).astype(np.float32) ** 4
    tf = Transform((640, 480), (160, 160), 0.25, 0.25, 0.0, 20.0)
    whole = make_decoder(_specs((1, 4 + c, n)), None, threshold=0.3)([np.concatenate([boxes, scores], 1)], tf)
    split = make_decoder(_specs((1, 4, n), (1, c, n)), None, threshold=0.3)([boxes, scores], tf)
    swapped = decode_yolo([np.swapaxes(scores, 1, 2), np.swapaxes(boxes, 1, 2)], tf, threshold=0.3,
                          layout=YoloOutputs(1, 0, transposed=True))
    assert len(whole) > 5
    for d in (split, swapped):
        np.testing.assert_array_equal(d.xyxy, whole.xyxy)
        np.testing.assert_array_equal(d.class_ids, whole.class_ids)
        np.testing.assert_array_equal(d.scores, whole.scores)


def test_map50_takes_detections_and_is_one_against_itself() -> None:
    d = Detections(np.array([[0, 0, 10, 10], [20, 20, 30, 30]], np.float32), np.array([0.9, 0.6]), np.array([0, 1]))
    assert map50([d, Detections.empty()], [d, Detections.empty()]) == 1.0
    assert map50([Detections.empty()], [d]) is None


@pytest.mark.parametrize("meta, labels", [({"detection": {"objectness": True}}, None), (None, ["a", "b", "c"])])
def test_a_yolov5_head_split_after_its_boxes_keeps_its_objectness(meta: dict | None, labels: list | None) -> None:
    rng = np.random.default_rng(3)
    n = 300
    rows = np.concatenate([rng.uniform(0, 1, (n, 2)), rng.uniform(0.02, 0.3, (n, 2)),
                           rng.uniform(0, 1, (n, 4)) ** 2], axis=1).astype(np.float32)[None]  # [1, N, 5+3]
    tf = Transform((320, 240), (64, 64), 0.2, 0.2, 0.0, 8.0)
    whole = make_decoder(_specs((1, n, 8)), None, labels=labels, threshold=0.2)([rows], tf)
    split = make_decoder(_specs((1, n, 4), (1, n, 4)), meta, labels=labels, threshold=0.2)(
        [rows[..., :4], rows[..., 4:]], tf)
    assert len(whole) > 5
    np.testing.assert_array_equal(split.scores, whole.scores)
    np.testing.assert_array_equal(split.xyxy, whole.xyxy)
