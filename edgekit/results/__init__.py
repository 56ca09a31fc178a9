"""Typed results of one frame: detections, classes, segmentations, poses, and the loop's frame.

Results import nothing of edgekit above them (errors only): decoders, tasks, drawing, sinks and
the cell all build on them. Drawing lives in :mod:`edgekit.drawing`.
"""

from edgekit.results.detections import Classes, Classification, Detection, Detections
from edgekit.results.frame import FrameResult, Result, StageTimes
from edgekit.results.masks import BACKGROUND_LABELS, ClassArea, Region, Segmentation, SegmentationMask, background_id
from edgekit.results.poses import COCO_KEYPOINTS, COCO_SKELETON, Pose, Poses

__all__ = ["Detection", "Detections", "Classification", "Classes", "StageTimes", "Result", "FrameResult",
           "ClassArea", "SegmentationMask", "Region", "Segmentation", "background_id", "BACKGROUND_LABELS",
           "Pose", "Poses", "COCO_KEYPOINTS", "COCO_SKELETON"]
