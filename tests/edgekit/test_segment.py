"""Connected regions of a class map (boxes, areas) and the mask overlay."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.contract.keypoints import decode_poses
from edgekit.contract.segmentation import SegmentationMask
from edgekit.errors import InputError
from edgekit.drawing import draw_poses
from edgekit.preprocess import Transform
from edgekit.segment import background_id, draw_segmentation, find_regions, segmentation_of


def _scene() -> SegmentationMask:
    m = np.zeros((60, 80), np.int32)
    m[5:10, 10:20] = 2  # scratch, 50 px
    m[30:32, 40:43] = 2  # scratch, 6 px
    m[20:40, 60:70] = 1  # stain, 200 px
    m[50, 0] = 1  # stain, one pixel in the corner
    m[40, 70] = 1  # touches the big stain diagonally only
    return SegmentationMask(m, ("background", "stain", "scratch"))


def test_regions_boxes_and_areas():
    regions = find_regions(_scene(), connectivity=4)
    assert [(r.label, r.area, r.box) for r in regions] == [
        ("stain", 200, (60.0, 20.0, 70.0, 40.0)), ("scratch", 50, (10.0, 5.0, 20.0, 10.0)),
        ("scratch", 6, (40.0, 30.0, 43.0, 32.0)), ("stain", 1, (70.0, 40.0, 71.0, 41.0)),
        ("stain", 1, (0.0, 50.0, 1.0, 51.0))]  # equal areas: in reading order
    assert regions[0].centroid == (65.0, 30.0)


def test_eight_connectivity_joins_diagonal_neighbours():
    regions = find_regions(_scene())  # 8-connected by default
    assert regions[0].area == 201 and regions[0].box == (60.0, 20.0, 71.0, 41.0)


@pytest.mark.parametrize("kwargs,expected", [
    ({"min_area": 40}, [201, 50]),
    ({"classes": ["scratch"]}, [50, 6]),
    ({"classes": [1], "min_area": 2}, [201]),
    ({"background": None, "min_area": 1000}, [4542]),  # the background is a region too when asked
])
def test_region_filters(kwargs, expected):
    assert [r.area for r in find_regions(_scene(), **kwargs)] == expected


def test_area_rule_reads_like_the_issue():
    """"FAIL if any scratch region > 40 px²": one region says so, and as boxes it feeds box rules."""
    seg = segmentation_of(_scene())
    assert any(r.label == "scratch" and r.area > 40 for r in seg.regions)
    dets = seg.as_detections()
    assert len(dets) == len(seg.regions) and dets.labels[0] == "stain" and np.all(dets.scores == 1.0)
    doc = seg.to_dict()
    assert doc["classes"][0] == {"id": 0, "label": "background", "area": 4542, "fraction": 0.94625}
    assert doc["regions"][1] == {"id": 2, "label": "scratch", "area": 50, "box": [10.0, 5.0, 20.0, 10.0],
                                 "centroid": [15.0, 7.5]}


def test_background_is_found_by_label_or_is_class_zero_without_labels():
    m = np.zeros((4, 4), np.int32)
    assert background_id(SegmentationMask(m)) == 0
    assert background_id(SegmentationMask(m, ("person", "bg"))) == 1
    assert background_id(SegmentationMask(m, ("crack", "dent"))) is None


def test_overlay_colors_only_the_classes():
    seg = segmentation_of(_scene())
    frame = np.full((60, 80, 3), 100, np.uint8)
    out = draw_segmentation(frame, seg, alpha=0.5, boxes=False)
    assert np.array_equal(out[0, 0], frame[0, 0])  # background untouched
    assert not np.array_equal(out[7, 15], frame[7, 15]) and np.array_equal(out[7, 15], out[31, 41])
    assert np.array_equal(frame, np.full((60, 80, 3), 100, np.uint8))  # a copy by default
    with pytest.raises(InputError, match="mask's size"):
        draw_segmentation(np.zeros((10, 10, 3), np.uint8), seg)


def test_skeleton_drawing_marks_the_keypoints():
    out = np.zeros((1, 1, 17, 3), np.float32)
    out[0, 0, :, 0] = np.linspace(0.2, 0.8, 17)
    out[0, 0, :, 1] = 0.5
    out[0, 0, :, 2] = 0.9
    poses = decode_poses(out, Transform((100, 100), (100, 100), 1.0, 1.0))
    frame = np.zeros((100, 100, 3), np.uint8)
    drawn = draw_poses(frame, poses)
    assert drawn[50, 50].any() and not drawn[5, 5].any()
    with pytest.raises(InputError):
        draw_poses(np.zeros((10, 10)), poses)
