"""edgekit on Coral's MoveNet (single pose lightning, PTQ) against ``tf.image.resize_with_pad``, as
the MoveNet tutorial feeds it: keypoints the reference scores above 0.3 within 2 % of the diagonal.
Runs in the main venv (TensorFlow); skipped without it."""

from __future__ import annotations


import pytest

from edgekit import PoseEstimator
from edgekit.contract.enums import Interpolation
from edgekit.preprocess import load_image
from tests.reference import _mediapipe as ref
from tests.reference import _movenet as mv


def test_movenet_keypoints_match_resize_with_pad() -> None:
    tf = pytest.importorskip("tensorflow", reason="the MoveNet reference is tf.image.resize_with_pad")
    if not mv.MOVENET.is_file():
        pytest.skip(f"{mv.MOVENET.name} is missing: google-coral/test_data (Apache-2.0)")
    compared = 0
    with PoseEstimator.create_from_model_path(mv.MOVENET, threshold=0.0, isolate=False) as est:
        assert est.preprocessing.preset == "movenet-single"
        assert est.preprocessing.interpolation is Interpolation.TENSORFLOW and est.preprocessing.pad_value == 0
        for photo in ref.photos():
            error, n = mv.worst_error(tf, est, load_image(photo))
            assert error <= 0.02, (photo.name, error)
            compared += n
    assert compared >= 30
