"""edgekit on Coral's DeepLab v3 (MobileNet v2, depth 0.5, PASCAL VOC, quantized) against pycoral's
example, which stretches the photo with PIL's Lanczos: every pixel's class, and each class covering
over 1 % of the photo by its IoU. edgekit's preset stretches with OpenCV (averaging when shrinking),
not Lanczos, hence agreement rather than identity."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit import Segmenter
from edgekit.contract.enums import ResizeMode
from edgekit.preprocess import load_image
from tests.reference import _deeplab as dl
from tests.reference import _mediapipe as ref


def test_deeplab_classes_match_pycorals_stretch() -> None:
    if not dl.DEEPLAB.is_file():
        pytest.skip(f"{dl.DEEPLAB.name} is missing: google-coral/test_data (Apache-2.0)")
    with Segmenter.create_from_model_path(dl.DEEPLAB, isolate=False) as seg:
        assert seg.preprocessing.preset == "deeplab" and seg.preprocessing.resize is ResizeMode.STRETCH
        for photo in ref.photos():
            image = load_image(photo)
            want = dl.reference_class_map(dl.DEEPLAB, image)
            got = seg.segment(image).mask.class_map
            assert (want == got).mean() >= 0.98, photo.name
            for c in np.unique(want):
                if c and (want == c).mean() > 0.01:
                    assert dl.class_iou(want, got, int(c)) >= 0.85, (photo.name, int(c))
