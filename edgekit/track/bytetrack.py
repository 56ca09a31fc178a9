"""ByteTrack: multi-object tracking by associating every detection box, the weak ones too.

Each frame (Zhang et al., "ByteTrack", ECCV 2022):

1. The detections are split at ``high_threshold``: high-score boxes, and low-score boxes above
   ``low_threshold`` (often the same object, partly hidden or blurred).
2. Every tracked and recently lost track predicts its box with a constant-velocity Kalman filter
   on (cx, cy, a, h) and is matched to the high-score boxes by IoU (weighted by the score), with
   the Hungarian method; matches costing more than ``match_threshold`` are refused.
3. Tracks still unmatched are matched to the low-score boxes (IoU above 0.5); those still
   unmatched are lost, and removed after ``lost_buffer`` frames without a match.
4. Tentative tracks (one frame old) are matched to the remaining high-score boxes; a new track
   starts from a box scoring at least ``new_track_threshold``.
5. A track gets its id once it was matched ``min_frames`` frames running.

Two options depart from the reference for objects the detector scores low for many frames (parts
touching on a belt), both off by default: ``weak_start_frames`` lets a low box nobody claimed start a
tentative track (confirmed after that many frames running), and ``weak_refind_frames`` lets low
boxes find a track lost for at most that many frames.

The steps, their order and their constants follow the reference implementation (the one supervision
carried up to 0.30); ``tests/edgekit/track`` compares the track ids of both on the same detections.
Numpy only (SciPy, when installed, solves the assignment)::

    tracker = ByteTracker()
    for r in detector.stream(source):
        tracked = tracker.update(r.detections)
        for d, track_id in zip(tracked.detections, tracked.track_ids):
            ...   # track_id -1: the box is not (yet) on a confirmed track
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

import numpy as np

from edgekit.errors import InputError
from edgekit.results import Detections
from edgekit.track.assign import box_iou, linear_assignment
from edgekit.track.kalman import KalmanXYAH, box_of, xyah_of

__all__ = ["ByteTracker", "Track", "TrackedDetections", "TrackerOptions", "TrackState", "Tracked"]


class TrackState(enum.Enum):
    NEW = 0
    TRACKED = 1
    LOST = 2
    REMOVED = 3


@dataclass(frozen=True)
class TrackerOptions:
    """ByteTrack's settings (defaults: the reference implementation's).

    Raises:
        InputError: a threshold outside 0..1, ``low_threshold`` above ``high_threshold``, or a
            count below 1.
    """

    high_threshold: float = 0.25  # boxes scoring above it take part in the first association
    low_threshold: float = 0.1  # boxes between the two are used only to keep existing tracks
    new_track_threshold: float | None = None  # a new track needs this score (None: high + 0.1)
    match_threshold: float = 0.8  # highest (1 - IoU x score) cost accepted in the first association
    lost_buffer: int = 30  # frames a lost track is kept for re-identification
    min_frames: int = 1  # consecutive matched frames before a track gets its id
    weak_start_frames: int = 0  # 0: ByteTrack (only boxes >= new_track_threshold start tracks); n: a box
    # below it (but above low_threshold) nobody claimed starts a tentative track that needs n frames running
    weak_refind_frames: int = 0  # 0: ByteTrack (low boxes keep tracked tracks only); n: they also find a track
    # lost for at most n frames

    def __post_init__(self) -> None:
        for name in ("high_threshold", "low_threshold", "match_threshold"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InputError(f"TrackerOptions.{name} must be within 0..1, got {value!r}")
        if self.low_threshold > self.high_threshold:
            raise InputError(f"TrackerOptions.low_threshold ({self.low_threshold}) must not exceed "
                             f"high_threshold ({self.high_threshold})")
        if self.weak_start_frames < 0:
            raise InputError(f"TrackerOptions.weak_start_frames must be >= 0 (0: off), got {self.weak_start_frames}")
        if self.lost_buffer < 1 or self.min_frames < 1:
            raise InputError(f"TrackerOptions.lost_buffer and min_frames must be >= 1, got {self.lost_buffer} "
                             f"and {self.min_frames}")

    @property
    def start_threshold(self) -> float:
        return self.high_threshold + 0.1 if self.new_track_threshold is None else self.new_track_threshold


@dataclass(frozen=True)
class TrackedDetections(Detections):
    """Detections that carry a track id per row (-1: not on a confirmed track): what
    ``edgekit detect --track`` writes (``track_id`` in each JSON row) and draws ("#7 part 0.91")."""

    track_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __post_init__(self) -> None:
        super().__post_init__()
        ids = np.asarray(self.track_ids, dtype=np.int64).reshape(-1)
        if len(ids) != len(self):
            raise InputError(f"TrackedDetections expects one track id per detection: {len(self)} detections, "
                             f"{len(ids)} track ids")
        object.__setattr__(self, "track_ids", ids)

    def _rows(self, idx: np.ndarray) -> TrackedDetections:
        """Slicing, masks and :meth:`filter` keep each row's track id."""
        d = Detections(self.xyxy[idx], self.scores[idx], self.class_ids[idx], tuple(self.labels[i] for i in idx))
        return TrackedDetections(d.xyxy, d.scores, d.class_ids, d.labels, self.track_ids[idx])

    def to_list(self, ndigits: int = 2) -> list[dict[str, Any]]:
        """JSON-ready detections, each with ``track_id`` (None when not on a confirmed track)."""
        rows = super().to_list(ndigits)
        for row, tid in zip(rows, self.track_ids.tolist()):
            row["track_id"] = tid if tid >= 0 else None
        return rows


@dataclass(frozen=True)
class Tracked:
    """One frame's detections with the id of the track each one belongs to (-1: none yet).

    ``ended`` lists the ids of tracks removed in this frame (gone longer than the lost buffer).
    """

    detections: Detections
    track_ids: np.ndarray
    ended: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.detections)

    def confirmed(self) -> Tracked:
        """Only the detections on a confirmed track."""
        keep = self.track_ids >= 0
        return self if keep.all() else Tracked(self.detections[keep], self.track_ids[keep], self.ended)

    def as_detections(self) -> TrackedDetections:
        """The detections with their track ids, as one result (for sinks and :func:`edgekit.draw`)."""
        d = self.detections
        return TrackedDetections(d.xyxy, d.scores, d.class_ids, d.labels, self.track_ids)

    def to_list(self, ndigits: int = 2) -> list[dict[str, Any]]:
        """JSON-ready detections, each with ``track_id`` (None when not on a confirmed track)."""
        return self.as_detections().to_list(ndigits)


class Track(NamedTuple):
    """A confirmed track in the current frame: its filtered box (x1, y1, x2, y2), the score of the
    detection it took and that detection's row in the frame's Detections."""

    track_id: int
    box: tuple[float, float, float, float]
    score: float
    detection: int


class _Track:
    """One track's mutable state (internal)."""

    __slots__ = ("mean", "cov", "score", "state", "activated", "key", "track_id", "frame", "start", "streak",
                 "det", "need", "origin", "box")

    def __init__(self, xyah: list[float], score: float, det: int, box: Sequence[float]) -> None:
        self.mean = xyah  # cx, cy, a, h (a detection) and their velocities (a track)
        self.box = box  # x1, y1, x2, y2 of the detection, or of the track's current estimate
        self.cov: list[float] = []
        self.score, self.det = score, det
        self.state, self.activated = TrackState.NEW, False
        self.key, self.track_id, self.frame, self.start, self.streak = -1, -1, 0, 0, 0
        self.need = 0  # matched frames running before the track is confirmed (set when it starts)
        self.origin = xyah  # the box the track started from (cx, cy, a, h)


class ByteTracker:
    """Gives each object a track id that stays with it from frame to frame.

    Class-agnostic, like ByteTrack: filter the detections to the classes to track first.
    ``update`` once per frame, in order; a frame with no detections is still an update.
    """

    def __init__(self, options: TrackerOptions | None = None) -> None:
        self.options = options or TrackerOptions()
        self.reset()

    @classmethod
    def at_threshold(cls, threshold: float) -> ByteTracker:
        """ByteTrack on the boxes a detector kept at ``threshold`` (all at least that): each can start or
        feed a track. ByteTrack's high boxes score above its threshold, so it sits one float32 step
        below: a box scoring exactly ``threshold`` (0.5 is a step of a uint8 score) is a high box too."""
        below = float(np.nextafter(np.float32(threshold), np.float32(0)))
        return cls(TrackerOptions(high_threshold=below, low_threshold=below, new_track_threshold=below))

    def follow(self, detections: Detections) -> TrackedDetections:
        """One frame's :meth:`update`, as supervision's ByteTrack gives it: the detections on a confirmed
        track, each with its id. A box no confirmed track took (a new object's first frame) is left out
        rather than given no id."""
        return self.update(detections).confirmed().as_detections()

    def reset(self) -> None:
        """Forget every track (a new video); ids start at 1 again."""
        self._frame = 0
        self._tracked: list[_Track] = []
        self._lost: list[_Track] = []
        self._removed: list[_Track] = []
        self._next_key, self._next_id = 0, 1

    @property
    def frame_count(self) -> int:
        return self._frame

    def tracks(self) -> list[Track]:
        """The confirmed tracks matched in the last frame, with their Kalman-filtered boxes."""
        return [Track(t.track_id, box_of(t.mean), t.score, t.det) for t in self._tracked if t.activated]

    def estimates(self) -> dict[int, Sequence[float]]:
        """Every confirmed track's box (x1, y1, x2, y2) as the filter has it now: corrected in this frame
        for the tracks matched, predicted for the ones lost (not yet removed); a track confirmed in its
        first frame has the detection's box as given (a list from :meth:`associate`)."""
        return {t.track_id: t.box for t in self._tracked + self._lost if t.activated and t.track_id >= 0}

    def origin(self, track_id: int) -> tuple[float, float, float, float] | None:
        """The box (x1, y1, x2, y2) a tracked track started from, frames before it was confirmed: where
        a counting line should first place a track that was tentative while it crossed. None: no such
        track is being tracked."""
        for t in self._tracked:
            if t.track_id == track_id:
                return box_of(t.origin)
        return None

    def update(self, detections: Detections) -> Tracked:
        """Associate one frame's detections with the tracks; returns them with their track ids.

        Raises:
            InputError: ``detections`` is not a :class:`~edgekit.results.Detections`.
        """
        if not isinstance(detections, Detections):
            raise InputError(f"ByteTracker.update expects edgekit Detections, got {type(detections).__name__}")
        ids, ended = self.associate(detections.xyxy.tolist(), detections.scores.tolist())
        return Tracked(detections, np.array(ids, dtype=np.int64).reshape(-1), ended)

    def associate(self, boxes: list[list[float]], scores: list[float]) -> tuple[list[int], tuple[int, ...]]:
        """:meth:`update` on plain lists (xyxy boxes, scores): each box's track id (-1: none) and the
        ids of the tracks that ended. For callers that keep their boxes in lists."""
        o = self.options
        self._frame += 1
        high: list[_Track] = []
        low: list[_Track] = []
        for i, (box, score) in enumerate(zip(boxes, scores)):
            if score > o.high_threshold:
                high.append(_Track(xyah_of(*box), score, i, box))
            elif o.low_threshold < score < o.high_threshold:
                low.append(_Track(xyah_of(*box), score, i, box))
        for t in self._tracked + self._lost:
            t.det = -1
        unconfirmed = [t for t in self._tracked if not t.activated]
        pool = [t for t in self._tracked if t.activated] + self._lost  # two disjoint lists
        self._predict(pool)
        updated: list[_Track] = []  # matched while tracked, or new
        refound: list[_Track] = []  # matched while lost
        lost_now: list[_Track] = []
        removed: list[_Track] = []

        # First association: confirmed and lost tracks with the high-score boxes.
        matches, rest_tracks, rest_high = _assign(pool, high, o.match_threshold, fused=True)
        for ti, di in matches:
            (refound if self._take(pool[ti], high[di]) else updated).append(pool[ti])
        # Second: tracks still tracked last frame with the low-score boxes.
        remaining = [pool[i] for i in rest_tracks if pool[i].state is TrackState.TRACKED
                     or self._frame - pool[i].frame <= o.weak_refind_frames]
        matches, rest_tracks, rest_low = _assign(remaining, low, 0.5)
        for ti, di in matches:
            (refound if self._take(remaining[ti], low[di]) else updated).append(remaining[ti])
        for i in rest_tracks:
            if remaining[i].state is not TrackState.LOST:
                remaining[i].state = TrackState.LOST
                lost_now.append(remaining[i])
        # Tentative tracks with the high-score boxes left over.
        high = [high[i] for i in rest_high]
        matches, rest_unconfirmed, rest_high = _assign(unconfirmed, high, 0.7, fused=True)
        for ti, di in matches:
            self._take(unconfirmed[ti], high[di])
            updated.append(unconfirmed[ti])
        weak: list[_Track] = []
        if o.weak_start_frames:  # tentative tracks may also go on with a low box left over
            low = [low[i] for i in rest_low]
            unconfirmed = [unconfirmed[i] for i in rest_unconfirmed]
            matches, rest_unconfirmed, rest_low = _assign(unconfirmed, low, 0.5)
            for ti, di in matches:
                self._take(unconfirmed[ti], low[di])
                updated.append(unconfirmed[ti])
            weak = [low[i] for i in rest_low]
        for i in rest_unconfirmed:
            unconfirmed[i].state = TrackState.REMOVED
            removed.append(unconfirmed[i])
        # New tracks from strong boxes nobody claimed (and from weak ones, when they may start tracks).
        for i in rest_high:
            if high[i].score >= o.start_threshold:
                self._start(high[i], o.min_frames)
                updated.append(high[i])
            elif o.weak_start_frames:
                weak.append(high[i])
        for det in weak:
            self._start(det, max(o.min_frames, o.weak_start_frames))
            updated.append(det)
        for t in self._lost:
            if self._frame - t.frame > o.lost_buffer:
                t.state = TrackState.REMOVED
                removed.append(t)

        # As in the reference, a track removed for age leaves the lost list one frame later (and
        # can still be found again in that frame).
        tracked = _join(_join([t for t in self._tracked if t.state is TrackState.TRACKED], updated), refound)
        kept = {t.key for t in tracked}
        dropping = {t.key for t in self._removed}
        lost = [t for t in self._lost if t.key not in kept] + lost_now
        ended = tuple(sorted(t.track_id for t in lost if t.key in dropping and t.track_id >= 0))
        self._removed = removed
        self._tracked, self._lost = _drop_duplicates(tracked, [t for t in lost if t.key not in dropping])
        ids = [-1] * len(boxes)
        for t in self._tracked:
            if t.activated and t.det >= 0:
                ids[t.det] = t.track_id
        return ids, ended

    def _predict(self, tracks: list[_Track]) -> None:
        for t in tracks:
            if t.state is not TrackState.TRACKED:
                t.mean[7] = 0.0  # a lost box keeps its place and size, not its growth
            KalmanXYAH.predict(t.mean, t.cov)
            t.box = box_of(t.mean)

    def _take(self, track: _Track, det: _Track) -> bool:
        """Correct ``track`` with the box ``det`` (a match); True when the track was lost."""
        KalmanXYAH.update(track.mean, track.cov, det.mean)
        track.box = box_of(track.mean)
        track.score, track.det, track.frame = det.score, det.det, self._frame
        if track.state is TrackState.TRACKED:
            track.streak += 1
            if track.streak == track.need:
                track.activated = True
                if track.track_id < 0:
                    track.track_id = self._new_id()
            return False
        track.streak, track.state = 0, TrackState.TRACKED  # found again after being lost
        return True

    def _start(self, det: _Track, need: int) -> None:
        """A new track from the box ``det``, confirmed after ``need`` matched frames (at once in the first
        frame, as in the reference, unless it is a weak start)."""
        det.key, self._next_key = self._next_key, self._next_key + 1
        det.mean, det.cov = KalmanXYAH.initiate(det.mean)
        det.state, det.streak, det.need = TrackState.TRACKED, 0, need
        det.activated = self._frame == 1 and need == self.options.min_frames
        if need == 1:
            det.track_id = self._new_id()
        det.frame = det.start = self._frame

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1


def _assign(tracks: list[_Track], dets: list[_Track], thresh: float,
            fused: bool = False) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Match tracks to detections at least cost (:func:`_fused_cost` or :func:`_iou_cost`), refusing
    pairs above ``thresh``: the matched (track, detection) pairs, the unmatched tracks and detections."""
    n, m = len(tracks), len(dets)
    if n == 0 or m == 0:  # most frames, for some of the steps
        return [], list(range(n)), list(range(m))
    cost = _fused_cost(tracks, dets) if fused else _iou_cost(tracks, dets)
    fits = [[j for j, c in enumerate(row) if c <= thresh] for row in cost]
    taken = [f[0] for f in fits if f]
    if all(len(f) <= 1 for f in fits) and len(set(taken)) == len(taken):
        # Each track fits one box at most and no box twice (objects apart, the usual frame): those pairs
        # are the optimum (every other pair costs the same clipped amount), with no solver to set up.
        used = set(taken)
        return ([(i, f[0]) for i, f in enumerate(fits) if f], [i for i, f in enumerate(fits) if not f],
                [j for j in range(m) if j not in used])
    return linear_assignment(cost, thresh)


def _iou_cost(tracks: list[_Track], dets: list[_Track]) -> list[list[float]] | np.ndarray:
    """1 - IoU of every track's box with every detection's box (rows: tracks)."""
    if not tracks:
        return np.zeros((0, len(dets)))  # keeps the column count for the assignment
    if not dets:
        return [[] for _ in tracks]
    a, b = [t.box for t in tracks], [d.box for d in dets]
    if len(a) * len(b) > 256:  # many objects: numpy's vectorised IoU pays off
        return (1.0 - box_iou(np.array(a), np.array(b))).tolist()
    area_b = [(x2 - x1) * (y2 - y1) for x1, y1, x2, y2 in b]
    out = []
    for ax1, ay1, ax2, ay2 in a:
        area_a = (ax2 - ax1) * (ay2 - ay1)
        row = []
        for (bx1, by1, bx2, by2), ab in zip(b, area_b):
            inter = max(min(ax2, bx2) - max(ax1, bx1), 0.0) * max(min(ay2, by2) - max(ay1, by1), 0.0)
            union = area_a + ab - inter
            row.append(1.0 - (inter / union if union > 0 else 0.0))
        out.append(row)
    return out


def _fused_cost(tracks: list[_Track], dets: list[_Track]) -> list[list[float]] | np.ndarray:
    """1 - IoU x detection score: a weak box must overlap better to win."""
    if not tracks or not dets:
        return _iou_cost(tracks, dets)
    scores = [d.score for d in dets]
    return [[1.0 - (1.0 - c) * s for c, s in zip(row, scores)] for row in _iou_cost(tracks, dets)]


def _join(a: list[_Track], b: list[_Track]) -> list[_Track]:
    """``a`` then the tracks of ``b`` not in it (a track is one object: its key says which)."""
    return list({t.key: t for t in a + b}.values())


def _drop_duplicates(tracked: list[_Track], lost: list[_Track]) -> tuple[list[_Track], list[_Track]]:
    """A lost track sitting on a tracked one (IoU > 0.85): keep whichever was followed longer."""
    if not tracked or not lost:
        return tracked, lost
    drop_a, drop_b = set(), set()
    for i, row in enumerate(_iou_cost(tracked, lost)):
        for j, cost in enumerate(row):
            if cost < 0.15:
                if tracked[i].frame - tracked[i].start > lost[j].frame - lost[j].start:
                    drop_b.add(j)
                else:
                    drop_a.add(i)
    return [t for i, t in enumerate(tracked) if i not in drop_a], [t for j, t in enumerate(lost) if j not in drop_b]
