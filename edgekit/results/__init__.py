"""Typed results of one frame: detections, classes, segmentations, poses, and the loop's frame.

Results import nothing of edgekit above them (errors only): decoders, tasks, drawing, sinks and
the cell all build on them. Drawing lives in :mod:`edgekit.drawing`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgekit._lazy import exported_names, load_export

# Names load with their module when first used (PEP 562), as in edgekit/__init__.py: a classifier's
# start-up builds Classes, never the masks, poses or the loop's frame (their classes cost time to make).
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("Classes", "Classification", "Detection", "Detections"), "edgekit.results.detections"),
    **dict.fromkeys(("FrameResult", "Result", "StageTimes"), "edgekit.results.frame"),
    **dict.fromkeys(("BACKGROUND_LABELS", "ClassArea", "Region", "Segmentation", "SegmentationMask", "background_id"),
                    "edgekit.results.masks"),
    **dict.fromkeys(("COCO_KEYPOINTS", "COCO_SKELETON", "Pose", "Poses"), "edgekit.results.poses"),
}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on demand
    from edgekit.results.detections import Classes, Classification, Detection, Detections
    from edgekit.results.frame import FrameResult, Result, StageTimes
    from edgekit.results.masks import BACKGROUND_LABELS, ClassArea, Region, Segmentation, SegmentationMask, background_id
    from edgekit.results.poses import COCO_KEYPOINTS, COCO_SKELETON, Pose, Poses


def __getattr__(name: str) -> Any:
    return load_export(__name__, _EXPORTS, globals(), name, submodules=True)


def __dir__() -> list[str]:
    return exported_names(globals(), __all__)


__all__ = ["Detection", "Detections", "Classification", "Classes", "StageTimes", "Result", "FrameResult",
           "ClassArea", "SegmentationMask", "Region", "Segmentation", "background_id", "BACKGROUND_LABELS",
           "Pose", "Poses", "COCO_KEYPOINTS", "COCO_SKELETON"]
