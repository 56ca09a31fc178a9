"""One verdict per part: parts tracked over the frames, defects attached to them, judged at a line.

The config says which classes are parts and which are defects. Each frame:

1. the parts are tracked (:class:`edgekit.track.ByteTracker`, with :func:`belt_tracker`'s settings), so a
   part keeps one id; a box holding another part's box is dropped first (parts on a belt do not overlap);
2. each defect belongs to the part whose box holds at least ``min_overlap`` of the defect's box
   (the part holding most of it);
3. a part's defects build up evidence over its track: a defect counts once it was seen in
   ``min_frames`` frames (``evidence = "frames"``) or its scores add up to ``min_score_sum``
   (``evidence = "score"``), so one noisy frame does not fail a good part;
4. when the part's track crosses the counting line (or zone) it gets exactly one verdict,
   :class:`PartVerdict`: PASS, or FAIL with the defects that counted as reasons::

    parts = PartInspector(PartsOptions(parts=("part",), defects=("scratch", "dent")),
                          CountingLine((160, 0), (160, 320), direction="left_to_right"))
    for r in detector.stream(source):
        for verdict in parts.update(r.detections, frame=r.index, timestamp=r.timestamp,
                                    captured_at=r.capture_ts, image_bgr=r.frame_bgr).verdicts:
            print(verdict.sequence, verdict.outcome.value, verdict.reasons)
"""

from __future__ import annotations

import difflib
import enum
import functools
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from edgekit.errors import ConfigError
from edgekit.results import Detections
from edgekit.track import ByteTracker, CountingLine, Tracked, TrackerOptions, ZoneCrossing

__all__ = ["DefectEvidence", "Evidence", "Outcome", "PartInspector", "PartVerdict", "PartsFrame", "PartsOptions",
           "belt_tracker"]


class Outcome(str, enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"


class Evidence(str, enum.Enum):
    """How a defect's sightings over a part's track add up to a reason to fail it."""

    FRAMES = "frames"  # seen in at least min_frames frames
    SCORE = "score"  # its best score per frame adds up to at least min_score_sum
    # (either way a sighting is a defect box scoring at least defect_threshold)


@dataclass(frozen=True)
class PartsOptions:
    """Which classes are parts and defects, and how defects are judged.

    Raises:
        ConfigError: no part class, a class that is both, or a setting out of range.
    """

    parts: tuple[str, ...]
    defects: tuple[str, ...] = ()
    min_overlap: float = 0.5  # share of a defect's box inside the part's box
    evidence: Evidence = Evidence.FRAMES
    min_frames: int = 2
    min_score_sum: float = 1.0
    part_threshold: float = 0.5  # parts above it start and feed tracks (ByteTrack's high threshold)
    defect_threshold: float = 0.5  # a defect sighting needs this score
    drop_merged: bool = True  # drop a part box holding two part boxes, or one scoring higher (parts seen as one)
    crop: bool = False  # keep the part's best frame as a JPEG in its verdict
    crop_quality: int = 90
    tracker: TrackerOptions | None = None  # default: belt_tracker(part_threshold)
    where: str = ""  # where the options were written ("cell.toml:31"), for error messages

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(self.parts))
        object.__setattr__(self, "defects", tuple(self.defects))
        object.__setattr__(self, "evidence", Evidence(self.evidence))
        at = f"{self.where}: " if self.where else ""
        if not self.parts:
            raise ConfigError(f"{at}parts: name at least one class that is a part")
        both = sorted(set(self.parts) & set(self.defects))
        if both:
            raise ConfigError(f"{at}{', '.join(map(repr, both))} cannot be both a part and a defect")
        for name in ("min_overlap", "part_threshold", "defect_threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{at}{name} must be within 0..1, got {getattr(self, name)!r}")
        if self.min_frames < 1 or not self.min_score_sum > 0 or not 1 <= self.crop_quality <= 100:
            raise ConfigError(f"{at}min_frames must be >= 1, min_score_sum > 0 and crop_quality 1..100; got "
                              f"{self.min_frames}, {self.min_score_sum}, {self.crop_quality}")

    def tracker_options(self) -> TrackerOptions:
        if self.tracker is not None:
            return self.tracker
        return belt_tracker(self.part_threshold)

    def check_labels(self, labels: Sequence[str]) -> None:
        """Raises ConfigError when a part or defect class is not a label of the model."""
        known = set(labels)
        for kind, names in (("parts", self.parts), ("defects", self.defects)):
            for name in names:
                if name not in known:
                    close = difflib.get_close_matches(name, list(labels), n=1)
                    hint = f" Did you mean {close[0]!r}?" if close else f" The model knows: {', '.join(labels)}."
                    at = f"{self.where}: " if self.where else ""
                    raise ConfigError(f"{at}{kind} class {name!r} is not a label of the model.{hint}")


def belt_tracker(threshold: float, *, lost_buffer: int = 30, min_frames: int = 1) -> TrackerOptions:
    """ByteTrack's settings for parts on a belt: ``threshold`` is its high threshold, and weak boxes
    count for more than in ByteTrack, because a part touching its neighbour often scores low for a
    dozen frames (the detector sees the pair as one) right where it crosses the line:

    * a weak box nobody claimed starts a tentative track, confirmed after 2 more frames running
      (ByteTrack starts tracks only from boxes scoring ``threshold + 0.1``);
    * a weak box also finds a track lost for at most 3 frames (ByteTrack: only a track matched in
      the frame before).

    With the merged-box rule and the line placing a track where it started, this took the count
    error on 135 generated belts (seeds 1-15, 3 speeds, 3 spacings; benchmarks/parts.py) from 7 parts to 1.
    """
    return TrackerOptions(high_threshold=threshold, low_threshold=min(0.1, threshold), lost_buffer=lost_buffer,
                          min_frames=min_frames, weak_start_frames=2, weak_refind_frames=3)


@dataclass(frozen=True)
class DefectEvidence:
    """What was seen of one defect class on one part."""

    label: str
    frames: int  # frames it was seen in (scoring at least defect_threshold)
    score_sum: float  # its best score per frame, added up
    max_score: float
    counted: bool  # enough evidence: a reason for FAIL

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "frames": self.frames, "score_sum": round(self.score_sum, 3),
                "max_score": round(self.max_score, 3), "counted": self.counted}


@dataclass(frozen=True)
class PartVerdict:
    """A part's one verdict, made when its track crossed the line.

    ``sequence`` numbers the verdicts (1, 2, ...); frames are source frame indices; ``*_seen`` and
    ``crossed_at`` are wall-clock seconds; ``captured_at`` is the ``time.perf_counter()`` capture
    time of the crossing frame (what a reject delay counts from). ``crop_jpeg``: the part's best
    frame cut to its box, when crops are on.
    """

    sequence: int
    track_id: int
    label: str
    outcome: Outcome
    reasons: tuple[str, ...]
    defects: tuple[DefectEvidence, ...]
    first_frame: int
    last_frame: int
    frames_seen: int
    first_seen: float
    last_seen: float
    crossed_frame: int
    crossed_at: float
    captured_at: float
    line: str
    box: tuple[float, float, float, float]
    best_frame: int
    best_score: float
    crop_jpeg: bytes | None = field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        return self.outcome is Outcome.PASS

    @property
    def reason(self) -> str:
        """One label for counters: the reasons joined by "+" ("none" for a PASS)."""
        return "+".join(sorted(self.reasons)) or "none"

    def to_dict(self) -> dict[str, Any]:
        return {"part": self.sequence, "track_id": self.track_id, "label": self.label, "verdict": self.outcome.value,
                "reasons": list(self.reasons), "defects": [d.to_dict() for d in self.defects],
                "first_frame": self.first_frame, "last_frame": self.last_frame, "frames_seen": self.frames_seen,
                "first_seen": round(self.first_seen, 6), "last_seen": round(self.last_seen, 6),
                "crossed_frame": self.crossed_frame, "crossed_at": round(self.crossed_at, 6), "line": self.line,
                "box": [round(v, 1) for v in self.box], "best_frame": self.best_frame,
                "best_score": round(self.best_score, 4), "crop_bytes": len(self.crop_jpeg) if self.crop_jpeg else 0}


@dataclass(frozen=True)
class PartsFrame:
    """One frame through :class:`PartInspector`: its detections, the rows that are parts (each with
    its track id, -1: none) and defects (each with the track id of the part holding it, -1: none),
    and the verdicts of parts that crossed the line in this frame."""

    detections: Detections
    part_rows: tuple[int, ...]
    track_ids: tuple[int, ...]
    ended: tuple[int, ...]
    defect_rows: tuple[int, ...]
    owners: tuple[int, ...]
    verdicts: tuple[PartVerdict, ...] = ()

    @functools.cached_property
    def parts(self) -> Tracked:
        """The parts (merged boxes left out) with their track ids."""
        return Tracked(self.detections[np.array(self.part_rows, np.int64)], np.array(self.track_ids, np.int64),
                       self.ended)

    @functools.cached_property
    def defects(self) -> Detections:
        return self.detections[np.array(self.defect_rows, np.int64)]

    @property
    def defect_owners(self) -> np.ndarray:
        return np.array(self.owners, dtype=np.int64)


class _Part:
    """What is known of one tracked part so far (internal)."""

    __slots__ = ("label", "first_frame", "last_frame", "first_seen", "last_seen", "frames", "box", "best_score",
                 "best_frame", "crop", "crop_whole", "defects", "judged")

    def __init__(self, label: str, frame: int, timestamp: float) -> None:
        self.label = label
        self.first_frame = self.last_frame = frame
        self.first_seen = self.last_seen = timestamp
        self.frames, self.best_score, self.best_frame = 0, -1.0, frame
        self.box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
        self.crop: np.ndarray | None = None
        self.crop_whole = False  # the kept crop shows the whole part (not cut by the frame's edge)
        self.defects: dict[str, list[float]] = {}  # label -> [frames, score_sum, max_score]
        self.judged = False


class PartInspector:
    """Tracks parts, attaches defects, and gives each part one verdict at the line.

    Args:
        options: part and defect classes, evidence rule, crops.
        line: a :class:`~edgekit.track.CountingLine` or :class:`~edgekit.track.ZoneCrossing`.
        numbering: gives each verdict its sequence number (default 1, 2, ...; the cell passes a
            counter kept on disk, so the numbers go on across restarts).
    """

    def __init__(self, options: PartsOptions, line: CountingLine | ZoneCrossing, *,
                 numbering: Callable[[], int] | None = None) -> None:
        self.options = options
        self.line = line
        self.tracker = ByteTracker(options.tracker_options())
        self._numbering = numbering or itertools.count(1).__next__
        self._parts: dict[int, _Part] = {}
        self._part_set, self._defect_set = set(options.parts), set(options.defects)

    @property
    def following(self) -> int:
        """Parts being followed that have no verdict yet."""
        return sum(not p.judged for p in self._parts.values())

    def update(self, detections: Detections, *, frame: int, timestamp: float, captured_at: float,
               image_bgr: np.ndarray | None = None) -> PartsFrame:
        """Feed one frame's detections (all classes); returns the frame's parts, defects and verdicts."""
        labels, boxes, all_scores = detections.labels, detections.xyxy.tolist(), detections.scores.tolist()
        part_rows = [i for i, lab in enumerate(labels) if lab in self._part_set]
        defect_rows = [i for i, lab in enumerate(labels) if lab in self._defect_set]
        if self.options.drop_merged and len(part_rows) > 1:
            merged = _merged([boxes[i] for i in part_rows], [all_scores[i] for i in part_rows])
            part_rows = [i for i, m in zip(part_rows, merged) if not m]
        part_boxes, scores = [boxes[i] for i in part_rows], [all_scores[i] for i in part_rows]
        ids, ended = self.tracker.associate(part_boxes, scores)
        owners = self._owners(part_boxes, ids, [boxes[i] for i in defect_rows])
        for i, tid in enumerate(ids):
            if tid >= 0:
                if tid not in self._parts:  # confirmed now: it may have crossed while tentative
                    origin = self.tracker.origin(tid)
                    if origin is not None:
                        self.line.prime(tid, origin)
                self._see(tid, labels[part_rows[i]], part_boxes[i], scores[i], frame, timestamp, image_bgr)
        self._add_defects([labels[i] for i in defect_rows], [all_scores[i] for i in defect_rows], owners)
        confirmed = [i for i, tid in enumerate(ids) if tid >= 0]
        crossings = self.line.update([ids[i] for i in confirmed], [part_boxes[i] for i in confirmed])
        verdicts = []
        for c in crossings:
            part = self._parts.get(c.track_id)
            if part is not None and not part.judged:
                verdicts.append(self._judge(c.track_id, part, frame, timestamp, captured_at))
        if ended:
            for tid in ended:
                self._parts.pop(tid, None)
            self.line.forget(list(ended))
        return PartsFrame(detections, tuple(part_rows), tuple(ids), ended, tuple(defect_rows), tuple(owners),
                          tuple(verdicts))

    def _owners(self, parts: list[list[float]], track_ids: list[int], defects: list[list[float]]) -> list[int]:
        """The track id of the part holding each defect (-1: no part holds enough of it)."""
        owners = []
        for dx1, dy1, dx2, dy2 in defects:  # plain floats: a few boxes a frame
            area = max(dx2 - dx1, 1e-9) * max(dy2 - dy1, 1e-9)
            best, owner = -1.0, -1  # a part that is not on a track yet may still hold the defect
            for (px1, py1, px2, py2), tid in zip(parts, track_ids):
                share = max(min(dx2, px2) - max(dx1, px1), 0.0) * max(min(dy2, py2) - max(dy1, py1), 0.0) / area
                if share > best:
                    best, owner = share, tid
            owners.append(owner if best >= self.options.min_overlap else -1)
        return owners

    def _see(self, tid: int, label: str, xyxy: list[float], score: float, frame: int, timestamp: float,
             image_bgr: np.ndarray | None) -> None:
        part = self._parts.get(tid)
        if part is None:
            part = self._parts[tid] = _Part(label, frame, timestamp)
        part.last_frame, part.last_seen = frame, timestamp
        part.frames += 1
        box = (xyxy[0], xyxy[1], xyxy[2], xyxy[3])
        part.box = box
        whole = image_bgr is not None and _inside(box, image_bgr.shape)
        if (whole, score) > (part.crop_whole, part.best_score):  # a whole view first, then the best score
            part.best_score, part.best_frame, part.crop_whole = score, frame, whole
            if self.options.crop and image_bgr is not None:
                part.crop = _cut(image_bgr, box)

    def _add_defects(self, labels: list[str], scores: list[float], owners: list[int]) -> None:
        best: dict[tuple[int, str], float] = {}  # (part, defect label) -> best score this frame
        for tid, label, score in zip(owners, labels, scores):
            if tid >= 0 and tid in self._parts and score >= self.options.defect_threshold:
                best[(tid, label)] = max(best.get((tid, label), 0.0), score)
        for (tid, label), score in best.items():
            part = self._parts[tid]
            if part.judged:
                continue
            ev = part.defects.setdefault(label, [0, 0.0, 0.0])
            ev[0] += 1
            ev[1] += score
            ev[2] = max(ev[2], score)

    def _counted(self, frames: float, score_sum: float) -> bool:
        if self.options.evidence is Evidence.FRAMES:
            return frames >= self.options.min_frames
        return score_sum >= self.options.min_score_sum

    def _judge(self, tid: int, part: _Part, frame: int, timestamp: float, captured_at: float) -> PartVerdict:
        part.judged = True
        evidence = sorted((DefectEvidence(label, int(f), s, m, self._counted(f, s))
                           for label, (f, s, m) in part.defects.items()),
                          key=lambda e: (-e.counted, -e.frames, -e.score_sum, e.label))
        reasons = tuple(e.label for e in evidence if e.counted)
        crop = _jpeg(part.crop, self.options.crop_quality) if part.crop is not None else None
        part.crop = None
        seq = self._numbering()
        return PartVerdict(
            sequence=seq, track_id=tid, label=part.label, outcome=Outcome.FAIL if reasons else Outcome.PASS,
            reasons=reasons, defects=tuple(evidence), first_frame=part.first_frame, last_frame=part.last_frame,
            frames_seen=part.frames, first_seen=part.first_seen, last_seen=part.last_seen, crossed_frame=frame,
            crossed_at=timestamp, captured_at=captured_at, line=self.line.name, box=part.box,
            best_frame=part.best_frame, best_score=part.best_score, crop_jpeg=crop)


def _merged(boxes: list[list[float]], scores: list[float]) -> list[bool]:
    """Which boxes hold most (70 %) of two or more other boxes, or of one box scoring higher: parts
    lying side by side on a belt cannot overlap like that, so such a box is two touching parts seen
    as one (or a part seen twice)."""
    areas = [max(x2 - x1, 1e-9) * max(y2 - y1, 1e-9) for x1, y1, x2, y2 in boxes]
    out = []
    for i, (ax1, ay1, ax2, ay2) in enumerate(boxes):
        held, stronger = 0, False
        for j, ((bx1, by1, bx2, by2), area) in enumerate(zip(boxes, areas)):
            inter = max(min(ax2, bx2) - max(ax1, bx1), 0.0) * max(min(ay2, by2) - max(ay1, by1), 0.0)
            if j != i and inter / area >= 0.7:
                held += 1
                stronger = stronger or scores[j] > scores[i]
        out.append(held >= 2 or stronger)
    return out


def _inside(box: tuple[float, ...], shape: tuple[int, ...]) -> bool:
    x1, y1, x2, y2 = box
    return x1 >= 1 and y1 >= 1 and x2 <= shape[1] - 1 and y2 <= shape[0] - 1


def _cut(image: np.ndarray, box: tuple[float, ...]) -> np.ndarray | None:
    h, w = image.shape[:2]
    x1, y1 = max(0, int(box[0])), max(0, int(box[1]))
    x2, y2 = min(w, int(np.ceil(box[2]))), min(h, int(np.ceil(box[3])))
    return image[y1:y2, x1:x2].copy() if x2 > x1 and y2 > y1 else None


def _jpeg(crop: np.ndarray, quality: int) -> bytes | None:
    import cv2

    ok, buf = cv2.imencode(".jpg", crop, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    return buf.tobytes() if ok else None
