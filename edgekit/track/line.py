"""A counting line (or zone) that fires once per track when the track crosses it the configured way.

A line runs from ``start`` to ``end`` in frame pixels; a track crosses it when its anchor point (the
box centre, or the bottom centre for objects seen from the side) moves from one side to the other
within the segment. ``direction`` says which way counts (``left_to_right`` for a belt running
right, ``any`` for both); a track counts at most once, however much it jitters on the line::

    line = CountingLine((320, 0), (320, 480), direction=Direction.LEFT_TO_RIGHT)
    for crossing in line.update(track_ids, boxes_xyxy):
        ...   # crossing.track_id crossed this frame

A :class:`ZoneCrossing` fires when a track enters (or leaves) a zone: any object with
``contains(boxes) -> bool array``, such as :class:`edgekit.inspect.rules.Zone`.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple, Protocol, Sequence

import numpy as np

from edgekit.errors import ConfigError

__all__ = ["Anchor", "LINE_ANCHORS", "CountingLine", "Crossing", "Direction", "ZoneCrossing", "ZoneEvent"]


class Anchor(str, enum.Enum):
    """Which point(s) of a box stand for it: the one that crosses a counting line, the ones that
    must lie inside a zone for the box to count there (``[[zones]] anchor``, ``[line] anchor``)."""

    CENTER = "center"
    BOTTOM_CENTER = "bottom_center"  # where an object seen from the side stands on the belt
    ALL_CORNERS = "all_corners"  # the whole box (inside a zone; a line needs one point)

    def point(self, boxes: np.ndarray) -> np.ndarray:
        """(N, 2) anchor points of (N, 4) xyxy boxes (one-point anchors: see :data:`LINE_ANCHORS`).

        Raises:
            ConfigError: the anchor is ALL_CORNERS, which is four points.
        """
        if self is Anchor.ALL_CORNERS:
            raise ConfigError("a box crosses a line at one point: anchor center or bottom_center, not all_corners")
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        y = boxes[:, 3] if self is Anchor.BOTTOM_CENTER else (boxes[:, 1] + boxes[:, 3]) / 2
        return np.stack([(boxes[:, 0] + boxes[:, 2]) / 2, y], axis=1)

    def points(self, boxes: np.ndarray) -> np.ndarray:
        """(N, P, 2) anchor points of (N, 4) xyxy boxes (P = 4 for ALL_CORNERS, else 1)."""
        x1, y1, x2, y2 = (boxes[:, i] for i in range(4))
        if self is Anchor.CENTER:
            pts = [((x1 + x2) / 2, (y1 + y2) / 2)]
        elif self is Anchor.BOTTOM_CENTER:
            pts = [((x1 + x2) / 2, y2)]
        else:
            pts = [(x1, y1), (x2, y1), (x2, y2), (x1, y2)]
        return np.stack([np.stack(p, axis=-1) for p in pts], axis=1)


LINE_ANCHORS = (Anchor.CENTER, Anchor.BOTTOM_CENTER)  # the anchors of one point, that can cross a line


class Direction(str, enum.Enum):
    """Which way a crossing counts (image axes: x grows to the right, y downwards)."""

    LEFT_TO_RIGHT = "left_to_right"
    RIGHT_TO_LEFT = "right_to_left"
    TOP_TO_BOTTOM = "top_to_bottom"
    BOTTOM_TO_TOP = "bottom_to_top"
    ANY = "any"

    @property
    def axis(self) -> np.ndarray:
        return np.array({"left_to_right": (1, 0), "right_to_left": (-1, 0), "top_to_bottom": (0, 1),
                         "bottom_to_top": (0, -1), "any": (0, 0)}[self.value], dtype=np.float64)


class ZoneEvent(str, enum.Enum):
    ENTER = "enter"
    EXIT = "exit"


class Crossing(NamedTuple):
    """A track that crossed a line (``way``: the way it went) or entered/left a zone, in this frame."""

    track_id: int
    name: str
    way: Direction | ZoneEvent
    point: tuple[float, float]


class _Contains(Protocol):
    def contains(self, boxes: np.ndarray) -> np.ndarray: ...


class _OncePerTrack:
    """Per-track last state, the tracks that already fired, and forgetting tracks long unseen."""

    def __init__(self, name: str, forget_after: int) -> None:
        self.name = name
        self.count = 0  # crossings fired so far
        self._forget_after = forget_after
        self._state: dict[int, Any] = {}
        self._seen: dict[int, int] = {}
        self._fired: set[int] = set()
        self._updates = 0

    def _tick(self, track_ids: Sequence[int]) -> None:
        self._updates += 1
        for tid in track_ids:
            self._seen[tid] = self._updates
        if self._updates % 64 == 0:  # track ids are never reused: a long-gone one can be dropped
            old = [t for t, last in self._seen.items() if self._updates - last > self._forget_after]
            self.forget(old)

    def forget(self, track_ids: Sequence[int]) -> None:
        """Drop what is kept about tracks that ended."""
        for tid in track_ids:
            self._state.pop(tid, None)
            self._seen.pop(tid, None)
            self._fired.discard(tid)

    def _fire(self, tid: int, way: Direction | ZoneEvent, point: Sequence[float]) -> Crossing:
        self._fired.add(tid)
        self.count += 1
        return Crossing(tid, self.name, way, (float(point[0]), float(point[1])))


class CountingLine(_OncePerTrack):
    """A directed line segment; see the module docstring.

    Raises:
        ConfigError: the two points are the same or not finite, or the line runs along
            ``direction`` (it could never be crossed that way).
    """

    def __init__(self, start: Sequence[float], end: Sequence[float], *, direction: Direction | str = Direction.ANY,
                 anchor: Anchor | str = Anchor.CENTER, name: str = "line", where: str = "",
                 forget_after: int = 1000) -> None:
        super().__init__(name, forget_after)
        self.start = np.asarray(start, dtype=np.float64).reshape(-1)
        self.end = np.asarray(end, dtype=np.float64).reshape(-1)
        self.direction, self.anchor, self.where = Direction(direction), Anchor(anchor), where
        at = f" ({where})" if where else ""
        if self.anchor not in LINE_ANCHORS:
            raise ConfigError(f"line {name!r}{at}: a box crosses a line at one point: anchor "
                              f"{' or '.join(a.value for a in LINE_ANCHORS)}, not {self.anchor.value}")
        if self.start.shape != (2,) or self.end.shape != (2,) or not np.isfinite([*self.start, *self.end]).all():
            raise ConfigError(f"line {name!r}{at}: start and end must be [x, y] points of finite numbers, got "
                              f"{list(start)} and {list(end)}")
        self._d = self.end - self.start
        length = float(np.hypot(*self._d))
        if length == 0:
            raise ConfigError(f"line {name!r}{at}: start and end are the same point {self.start.tolist()}")
        normal = np.array([-self._d[1], self._d[0]]) / length  # the side the cross product calls positive
        along = float(normal @ self.direction.axis)
        if self.direction is not Direction.ANY and abs(along) < 0.2:
            raise ConfigError(f"line {name!r}{at} from {self.start.tolist()} to {self.end.tolist()} runs along "
                              f"{self.direction.value}, so nothing can cross it that way: draw it across the motion")
        self._target = 0 if self.direction is Direction.ANY else int(np.sign(along))
        self._ways = {1: _way(normal), -1: _way(-normal)}

    def check_fits(self, width: int, height: int) -> None:
        """Raises ConfigError when an end of the line lies outside a width x height frame."""
        pts = np.stack([self.start, self.end])
        if pts.min() < 0 or (pts[:, 0] > width).any() or (pts[:, 1] > height).any():
            at = f" ({self.where})" if self.where else ""
            raise ConfigError(f"line {self.name!r}{at} from {self.start.tolist()} to {self.end.tolist()} reaches "
                              f"outside the {width}x{height} frame; lines are in pixels of the camera frame")

    def sides(self, points: np.ndarray) -> np.ndarray:
        """(N,) -1, 0 or 1: which side of the line each (N, 2) point lies on."""
        rel = np.asarray(points, dtype=np.float64).reshape(-1, 2) - self.start
        return np.sign(self._d[0] * rel[:, 1] - self._d[1] * rel[:, 0]).astype(np.int64)

    def prime(self, track_id: int, box: Sequence[float]) -> None:
        """Place a track not seen yet on the side of ``box`` (where it started while still tentative), so
        that crossing the line before it was confirmed still counts. Does nothing for a track seen before."""
        if track_id >= 0 and track_id not in self._state:
            x1, y1, x2, y2 = (float(v) for v in box)
            px, py = (x1 + x2) / 2, (y2 if self.anchor is Anchor.BOTTOM_CENTER else (y1 + y2) / 2)
            cross = self._d[0] * (py - self.start[1]) - self._d[1] * (px - self.start[0])
            if cross != 0:
                self._state[track_id] = 1 if cross > 0 else -1

    def update(self, track_ids: Any, boxes: Any) -> list[Crossing]:
        """The crossings this frame: tracks (ids >= 0, with their xyxy boxes) that crossed since last seen."""
        if isinstance(track_ids, list) and isinstance(boxes, list):  # plain lists (PartInspector): no numpy
            ids, rows = track_ids, boxes
        else:
            ids = np.asarray(track_ids, dtype=np.int64).reshape(-1).tolist()
            rows = np.asarray(boxes, dtype=np.float64).reshape(-1, 4).tolist()
        self._tick(ids)
        (sx, sy), (dx, dy) = self.start.tolist(), self._d.tolist()
        length2 = dx * dx + dy * dy
        bottom = self.anchor is Anchor.BOTTOM_CENTER
        out = []
        for tid, (x1, y1, x2, y2) in zip(ids, rows):  # plain floats: a handful of tracks per frame
            px, py = (x1 + x2) / 2, (y2 if bottom else (y1 + y2) / 2)
            rx, ry = px - sx, py - sy
            cross = dx * ry - dy * rx
            side = (cross > 0) - (cross < 0)
            if tid < 0 or side == 0:
                continue
            before = self._state.get(tid)
            self._state[tid] = side
            within = 0.0 <= (rx * dx + ry * dy) / length2 <= 1.0  # beside the segment's ends does not count
            if before is None or before == side or tid in self._fired or not within:
                continue
            if self._target in (0, side):
                out.append(self._fire(tid, self._ways[side], (px, py)))
        return out


def _way(normal: np.ndarray) -> Direction:
    """The named direction closest to travelling along ``normal``."""
    x, y = normal
    if abs(x) >= abs(y):
        return Direction.LEFT_TO_RIGHT if x > 0 else Direction.RIGHT_TO_LEFT
    return Direction.TOP_TO_BOTTOM if y > 0 else Direction.BOTTOM_TO_TOP


class ZoneCrossing(_OncePerTrack):
    """Fires once per track when it enters (having been seen outside) or leaves (having been seen inside)
    ``zone``; the zone decides which point of a box counts."""

    def __init__(self, zone: _Contains, event: ZoneEvent | str = ZoneEvent.ENTER, *, name: str | None = None,
                 forget_after: int = 1000) -> None:
        super().__init__(name or str(getattr(zone, "name", "zone")), forget_after)
        self.zone, self.event = zone, ZoneEvent(event)

    def check_fits(self, width: int, height: int) -> None:
        """Raises ConfigError when the zone reaches outside the frame (when the zone can tell)."""
        check = getattr(self.zone, "check_fits", None)
        if check is not None:
            check(width, height)

    def prime(self, track_id: int, box: Sequence[float]) -> None:
        """Place a track not seen yet inside or outside the zone as ``box`` (where it started while still
        tentative) was. Does nothing for a track seen before."""
        if track_id >= 0 and track_id not in self._state:
            inside = np.asarray(self.zone.contains(np.asarray(box, np.float64).reshape(1, 4)), bool).reshape(-1)
            self._state[track_id] = bool(inside[0])

    def update(self, track_ids: Any, boxes: Any) -> list[Crossing]:
        ids = np.asarray(track_ids, dtype=np.int64).reshape(-1)
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        self._tick(ids.tolist())
        inside = np.asarray(self.zone.contains(boxes), dtype=bool).reshape(-1) if len(boxes) else np.zeros(0, bool)
        centres = Anchor.CENTER.point(boxes)
        want = self.event is ZoneEvent.ENTER
        out = []
        for tid, now, pt in zip(ids.tolist(), inside.tolist(), centres):
            if tid < 0:
                continue
            before = self._state.get(tid)
            self._state[tid] = now
            if before is not None and before != now and now == want and tid not in self._fired:
                out.append(self._fire(tid, self.event, pt))
        return out
