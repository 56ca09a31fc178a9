"""Area rules: "FAIL if any scratch region > 40 px²" on a segmentation's regions, as on boxes."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.contract.segmentation import SegmentationMask
from edgekit.errors import ConfigError
from edgekit.inspect.config import parse_config
from edgekit.inspect.inspector import Inspector
from edgekit.inspect.rules import Rule, Zone, evaluate
from edgekit.segment import segmentation_of

CONFIG = """\
device = "cell-1"
[source]
camera = 0
[model]
path = "seg.tflite"
threshold = 0.5
[[zones]]
name = "plate"
polygon = [[0, 0], [60, 0], [60, 60], [0, 60]]
[[rules]]
label = "scratch"
max = 0
min_area = 41
[[rules]]
label = "stain"
zone = "plate"
max = 1
"""


def _mask(scratch_px: int) -> SegmentationMask:
    m = np.zeros((80, 100), np.int32)
    m[10:10 + scratch_px // 10 or 1, 20:30 if scratch_px >= 10 else 20 + scratch_px] = 2  # one scratch
    m[50:52, 5:8] = 1  # a 6-pixel stain in the plate
    m[70:75, 90:95] = 2  # a 25-pixel scratch: below the limit
    return SegmentationMask(m, ("background", "stain", "scratch"))


@pytest.mark.parametrize("scratch_px, verdict", [(40, "PASS"), (50, "FAIL")])
def test_any_scratch_region_over_40_px_fails(scratch_px: int, verdict: str):
    inspector = Inspector.from_config(parse_config(CONFIG, env={}))
    seg = segmentation_of(_mask(scratch_px))
    dets = seg.as_detections()
    got = inspector.check(dets.xyxy, dets.labels, dets.scores, areas=[r.area for r in seg.regions])
    assert got.label == verdict
    failed = [r.to_dict() for r in got.failed]
    assert failed == ([] if verdict == "PASS" else [{
        "rule": "count(scratch with area >= 41 px) in frame <= 0", "label": "scratch", "zone": None, "min": None,
        "max": 0, "count": 1, "passed": False}])


def test_boxes_count_by_their_own_area_without_areas():
    boxes = np.array([[0, 0, 5, 5], [0, 0, 10, 10]], np.float32)  # 25 and 100 px
    v = evaluate(boxes, ["scratch", "scratch"], [], [Rule("scratch", max=0, min_area=41)])
    assert not v.passed and v.results[0].count == 1


def test_bad_area_rules():
    with pytest.raises(ConfigError, match="min_area"):
        parse_config(CONFIG.replace("min_area = 41", "min_area = -3"), env={})
    with pytest.raises(ConfigError, match="min_area must be >= 0"):
        Rule("scratch", max=0, min_area=-1)
    with pytest.raises(Exception, match="one entry per detection"):
        evaluate(np.zeros((2, 4)), ["a", "b"], [Zone("z", [(0, 0), (1, 0), (1, 1)])], [Rule("a", max=1)], areas=[1])


@pytest.mark.slow
def test_a_cell_judges_a_segmenters_regions_by_their_pixel_area(vision_models, shared_images, tmp_path):
    """A segmentation model in the inspection cell: its regions count as boxes, min_area by the pixels they cover."""
    from edgekit.inspect import Cell

    (tmp_path / "labels.txt").write_text("background\nred\ngreen\n")
    config = f"""
device = "cell-9"
state_dir = "{tmp_path / 'state'}"
[source]
path = "{shared_images / 'parrot.jpg'}"
[model]
path = "{vision_models.seg_scores}"
labels = "{tmp_path / 'labels.txt'}"
[[rules]]
label = "red"
max = 0
min_area = 5000
[[rules]]
label = "green"
max = 0
min_area = 1000000
"""
    with Cell.from_config(parse_config(config, env={})) as cell:
        [decision] = list(cell.run(max_frames=1))
    red, green = decision.verdict.results
    assert decision.verdict.label == "FAIL" and not red.passed and red.count >= 1  # the macaw's red body
    assert green.passed and green.count == 0  # no green region covers a million pixels
