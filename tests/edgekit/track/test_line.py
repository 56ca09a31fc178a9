"""Counting line and zone crossing: once per track, in the configured direction, within the segment."""

from __future__ import annotations

import numpy as np
import pytest

from edgekit.errors import ConfigError
from edgekit.inspect.rules import Zone
from edgekit.track import Anchor, CountingLine, Direction, ZoneCrossing, ZoneEvent


def _box(cx: float, cy: float, w: float = 20, h: float = 20) -> list[float]:
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


def _run(line, paths):
    """paths: {track_id: [(cx, cy), ...]} stepped together; returns the crossings in order."""
    out = []
    for step in range(max(len(p) for p in paths.values())):
        ids = [tid for tid, p in paths.items() if step < len(p)]
        boxes = [_box(*paths[tid][step]) for tid in ids]
        out += line.update(ids, np.array(boxes).reshape(-1, 4))
    return out


@pytest.mark.parametrize("direction, path, fired", [
    (Direction.LEFT_TO_RIGHT, [(50, 100), (90, 100), (110, 100), (150, 100)], [Direction.LEFT_TO_RIGHT]),
    (Direction.LEFT_TO_RIGHT, [(150, 100), (110, 100), (90, 100), (50, 100)], []),  # the other way
    (Direction.RIGHT_TO_LEFT, [(150, 100), (110, 100), (90, 100), (50, 100)], [Direction.RIGHT_TO_LEFT]),
    (Direction.ANY, [(150, 100), (90, 100)], [Direction.RIGHT_TO_LEFT]),
    # jitter back and forth on the line: still once
    (Direction.LEFT_TO_RIGHT, [(95, 100), (105, 100), (98, 100), (103, 100), (97, 100), (120, 100)],
     [Direction.LEFT_TO_RIGHT]),
    # first seen past the line: never crossed it here
    (Direction.LEFT_TO_RIGHT, [(120, 100), (150, 100)], []),
    # passes beside the segment's end (the segment spans y 0..200)
    (Direction.LEFT_TO_RIGHT, [(50, 260), (150, 260)], []),
    # exactly on the line does not count as a side
    (Direction.LEFT_TO_RIGHT, [(50, 100), (100, 100), (150, 100)], [Direction.LEFT_TO_RIGHT]),
])
def test_vertical_line(direction, path, fired):
    line = CountingLine((100, 0), (100, 200), direction=direction)
    assert [c.way for c in _run(line, {7: path})] == fired
    assert line.count == len(fired)


def test_each_track_fires_once_and_ids_below_zero_are_ignored():
    line = CountingLine((100, 0), (100, 200), direction="left_to_right", name="eject")
    paths = {1: [(50, 50), (150, 50)], 2: [(60, 150), (80, 150), (140, 150)], -1: [(50, 100), (150, 100)]}
    crossings = _run(line, paths)
    assert [(c.track_id, c.name) for c in crossings] == [(1, "eject"), (2, "eject")]
    assert crossings[0].point == (150.0, 50.0)
    assert _run(line, {1: [(50, 50), (150, 50)]}) == []  # track 1 fired already
    line.forget([1])  # the tracker ended it: everything about it is dropped
    assert [c.track_id for c in _run(line, {1: [(150, 50), (50, 50), (150, 50)]})] == [1]


def test_bottom_center_anchor_and_slanted_line():
    line = CountingLine((0, 100), (200, 140), direction=Direction.TOP_TO_BOTTOM, anchor=Anchor.BOTTOM_CENTER)
    # centre stays above the line, the bottom edge (h=60) crosses it
    assert [c.way for c in _run(line, {1: [(100, 60), (100, 100)]})] == []
    line2 = CountingLine((0, 100), (200, 140), direction=Direction.TOP_TO_BOTTOM, anchor=Anchor.BOTTOM_CENTER)
    boxes = [np.array([_box(100, 60, h=60)]), np.array([_box(100, 100, h=60)])]
    fired = [c.way for b in boxes for c in line2.update([1], b)]
    assert fired == [Direction.TOP_TO_BOTTOM]


def test_forgets_tracks_long_unseen():
    line = CountingLine((100, 0), (100, 200), forget_after=10)
    line.update([1], np.array([_box(50, 50)]))
    for _ in range(80):
        line.update([], np.zeros((0, 4)))
    assert line._state == {} and line._seen == {}


@pytest.mark.parametrize("start, end, direction, message", [
    ((10, 10), (10, 10), "any", "the same point"),
    ((0, 100), (300, 100), "left_to_right", "runs along left_to_right"),
    ((0, float("nan")), (3, 4), "any", "finite numbers"),
])
def test_bad_lines(start, end, direction, message):
    with pytest.raises(ConfigError, match=message):
        CountingLine(start, end, direction=direction)


def test_line_outside_the_frame():
    CountingLine((320, 0), (320, 480)).check_fits(640, 480)
    with pytest.raises(ConfigError, match="outside the 640x480 frame"):
        CountingLine((320, 0), (320, 500), where="cell.toml:9").check_fits(640, 480)


@pytest.mark.parametrize("event, path, fired", [
    (ZoneEvent.ENTER, [(20, 100), (120, 100), (250, 100), (120, 100)], 1),
    (ZoneEvent.ENTER, [(120, 100), (250, 100)], 0),  # first seen inside: did not enter here
    (ZoneEvent.EXIT, [(20, 100), (120, 100), (250, 100), (120, 100), (250, 100)], 1),
])
def test_zone_crossing(event, path, fired):
    zone = Zone("gate", [(100, 0), (200, 0), (200, 200), (100, 200)])
    crossing = ZoneCrossing(zone, event)
    out = _run(crossing, {4: path})
    assert len(out) == fired and all(c.way is event and c.name == "gate" for c in out)
    with pytest.raises(ConfigError, match="outside"):
        crossing.check_fits(150, 150)


def test_prime_counts_a_track_confirmed_past_the_line():
    """A track confirmed only after it crossed (weak start, min_frames) still counts, from where it started."""
    line = CountingLine((100, 0), (100, 200), direction="left_to_right")
    line.prime(5, _box(60, 100))
    line.prime(6, _box(140, 100))  # started past the line: nothing to count
    crossed = line.update([5, 6], np.array([_box(120, 100), _box(160, 100)]))
    assert [c.track_id for c in crossed] == [5]
    line.prime(5, _box(60, 100))  # a track seen before keeps its side
    assert line.update([5], np.array([_box(130, 100)])) == []
    zone = ZoneCrossing(Zone("gate", ((80, 0), (200, 0), (200, 200), (80, 200))), "enter")
    zone.prime(1, _box(40, 100))
    assert [c.track_id for c in zone.update([1], np.array([_box(120, 100)]))] == [1]
