"""Tracking: ids that stay with objects from frame to frame, and lines or zones they cross.

Numpy only (SciPy solves the assignment when it is installed)::

    from edgekit.track import ByteTracker, CountingLine, Direction

    tracker = ByteTracker()
    line = CountingLine((320, 0), (320, 480), direction=Direction.LEFT_TO_RIGHT)
    for r in detector.stream(source):
        tracked = tracker.update(r.detections).confirmed()
        for crossing in line.update(tracked.track_ids, tracked.detections.xyxy):
            print("part", crossing.track_id, "crossed")
"""

from __future__ import annotations

from edgekit.track.bytetrack import ByteTracker, Track, Tracked, TrackedDetections, TrackerOptions, TrackState
from edgekit.track.line import LINE_ANCHORS, Anchor, CountingLine, Crossing, Direction, ZoneCrossing, ZoneEvent

__all__ = [
    "Anchor",
    "LINE_ANCHORS",
    "ByteTracker",
    "CountingLine",
    "Crossing",
    "Direction",
    "Track",
    "TrackState",
    "Tracked",
    "TrackedDetections",
    "TrackerOptions",
    "ZoneCrossing",
    "ZoneEvent",
]
