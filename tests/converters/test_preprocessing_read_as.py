"""A source whose exporter says how its model is read (Ultralytics: bilinear, scale_boxes) gets
that into the preprocessing, so the gate and the device both read it that way."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from edgekit.contract import BoxMapping, Interpolation, OutputFormat
from edgekit.converters.options import PreprocessingOverrides
from edgekit.converters.preprocessing import resolve_preprocessing
from edgekit.converters.sources.base import PreprocessingHint

ULTRALYTICS = PreprocessingHint((0.0,), (255.0,), "letterbox", "Ultralytics export metadata", "linear", "ultralytics")
PLAIN = PreprocessingHint((127.5,), (127.5,), "stretch", "the model's TFLite metadata")


@pytest.mark.parametrize("hint, expected, written", [
    (ULTRALYTICS, (Interpolation.LINEAR, BoxMapping.ULTRALYTICS), {"interpolation": "linear",
                                                                  "box_mapping": "ultralytics"}),
    (PLAIN, (Interpolation.AUTO, BoxMapping.EXACT), {}),
])
def test_the_hint_decides_how_frames_are_read(hint: PreprocessingHint, expected: tuple, written: dict) -> None:
    src = SimpleNamespace(is_image=True, input_shape=(1, 64, 64, 3), normalization=None, preprocessing_hint=hint,
                          model_name="m")
    pre, _ = resolve_preprocessing(src, PreprocessingOverrides())  # type: ignore[arg-type]
    assert pre is not None and (pre.interpolation, pre.box_mapping) == expected
    doc = pre.to_metadata()
    assert {k: doc[k] for k in ("interpolation", "box_mapping") if k in doc} == written


def test_a_model_read_as_ultralytics_gets_its_predict_thresholds() -> None:
    import numpy as np

    from edgekit.converters.evaluate import ModelOutputs, detection_metadata
    from edgekit.runtimes import TensorSpec

    rng = np.random.default_rng(0)
    raw = np.concatenate([rng.uniform(0, 1, (4, 4, 100)), rng.uniform(0, 1, (4, 3, 100))], axis=1)  # [4+C, N]
    ref = ModelOutputs((TensorSpec("out", 0, (1, 7, 100), np.dtype(np.float32)),), (raw.astype(np.float32),))
    src = SimpleNamespace(is_image=True, input_shape=(1, 64, 64, 3), normalization=None,
                          preprocessing_hint=ULTRALYTICS, model_name="m")
    pre, _ = resolve_preprocessing(src, PreprocessingOverrides())  # type: ignore[arg-type]
    got = detection_metadata(OutputFormat.YOLO, ref, pre)
    assert got is not None and (got.score_threshold, got.iou_threshold, got.max_det) == (0.25, 0.7, 300)
    plain = detection_metadata(OutputFormat.YOLO, ref)
    assert plain is not None and plain.max_det is None


def test_the_source_s_hint_and_the_layout_are_enums_once_made() -> None:
    from edgekit.contract.enums import Layout, ResizeMode
    from edgekit.converters import ConvertOptions
    from edgekit.errors import InputError

    assert (ULTRALYTICS.resize, ULTRALYTICS.interpolation, ULTRALYTICS.box_mapping) == (
        ResizeMode.LETTERBOX, Interpolation.LINEAR, BoxMapping.ULTRALYTICS)
    assert (PLAIN.resize, PLAIN.interpolation, PLAIN.box_mapping) == (
        ResizeMode.STRETCH, Interpolation.AUTO, BoxMapping.EXACT)
    assert ConvertOptions(layout="nchw").layout is Layout.NCHW and ConvertOptions().layout is None
    with pytest.raises(InputError, match="NCHW"):
        ConvertOptions(layout="chw")
