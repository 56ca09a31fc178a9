"""One verdict per part: parts tracked over the frames, defects attached to them, judged at a line.

The config says which classes are parts and which are defects. Each frame:

1. the parts are tracked (:class:`edgekit.track.ByteTracker`, with :func:`belt_tracker`'s settings), so a
   part keeps one id; a box holding another part's box is dropped first (parts on a belt do not overlap);
2. each defect belongs to the part whose box holds at least ``min_overlap`` of the defect's box
   (the part holding most of it);
3. a part's defects build up evidence over its track: a defect counts once it was seen in
   ``min_frames`` frames (``evidence = "frames"``) or its scores add up to ``min_score_sum``
   (``evidence = "score"``), so one noisy frame does not fail a good part. With ``whole_defects``
   (on by default) only a defect box wholly inside the frame is a sighting: one cut by the frame's
   edge shows part of the defect, and the detector's class for it is a guess (on the demo's belt a
   scratch entering the frame was called a missing hole for two frames); the part is seen whole
   before it reaches the line. Such sightings are kept apart (:attr:`DefectEvidence.at_edge`);
4. when the part's track crosses the counting line (or zone) it gets exactly one verdict,
   :class:`PartVerdict`: PASS, or FAIL with the defects that counted as reasons. Two settings, off by
   default, keep tracks that are not parts from a verdict, for detectors that need them:
   ``piece_overlap`` (a crossing track whose box lies that much inside an older part's: the detector
   boxed one part twice) and ``count_score`` (a track that never scored that much; it waits up to
   ``count_wait`` frames after crossing for such a box, and the verdict then names both frames)::

    parts = PartInspector(PartsOptions(parts=("part",), defects=("scratch", "dent")),
                          CountingLine((160, 0), (160, 320), direction="left_to_right"))
    for r in detector.stream(source):
        for verdict in parts.update(r.detections, frame=r.index, timestamp=r.timestamp,
                                    captured_at=r.capture_ts, image_bgr=r.frame_bgr).verdicts:
            print(verdict.sequence, verdict.outcome.value, verdict.reasons)
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from edgekit.inspect.parts.options import (DefectEvidence, Evidence, PartsOptions, PartVerdict,
                                          belt_tracker)
from edgekit.inspect.verdict import Verdict
from edgekit.results import Detections
from edgekit.track import ByteTracker, CountingLine, Tracked, ZoneCrossing

__all__ = ["DefectEvidence", "Evidence", "PartInspector", "PartVerdict", "PartsFrame", "PartsOptions",
           "belt_tracker"]


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
                 "best_frame", "crop", "crop_whole", "defects", "judged", "peak", "crossed")

    def __init__(self, label: str, frame: int, timestamp: float) -> None:
        self.label = label
        self.first_frame = self.last_frame = frame
        self.first_seen = self.last_seen = timestamp
        self.frames, self.best_score, self.best_frame = 0, -1.0, frame
        self.box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
        self.crop: np.ndarray | None = None
        self.crop_whole = False  # the kept crop shows the whole part (not cut by the frame's edge)
        self.defects: dict[str, list[float]] = {}  # label -> [frames, score_sum, max_score, frames at the edge]
        self.judged = False
        self.peak = 0.0  # its highest score
        self.crossed = (-1, 0.0, 0.0)  # frame, timestamp, capture time of its crossing


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
        self._count_score = options.count_score
        self._waiting: set[int] = set()  # crossed, waiting for a box scoring count_score
        self.uncounted = 0  # tracks that crossed without ever scoring count_score: no verdict
        self.pieces = 0  # crossing tracks taken as a piece of an older part: no verdict

    @property
    def following(self) -> int:
        """Parts being followed that have no verdict yet."""
        return sum(not p.judged for p in self._parts.values())

    def update(self, detections: Detections, *, frame: int, timestamp: float, captured_at: float,
               image_bgr: np.ndarray | None = None) -> PartsFrame:
        """Feed one frame's detections (all classes); returns the frame's parts, defects and verdicts.
        ``image_bgr`` (the frame) gives the crops and the frame's edge for ``whole_defects`` (without
        it every defect box counts as whole)."""
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
        whole = [not self.options.whole_defects or image_bgr is None or _inside(boxes[i], image_bgr.shape)
                 for i in defect_rows]
        self._add_defects([labels[i] for i in defect_rows], [all_scores[i] for i in defect_rows], owners, whole)
        confirmed = [i for i, tid in enumerate(ids) if tid >= 0]
        crossings = self.line.update([ids[i] for i in confirmed], [part_boxes[i] for i in confirmed])
        verdicts = []
        for c in crossings:
            part = self._parts.get(c.track_id)
            if part is None or part.judged or self._piece(c.track_id, part):
                continue
            part.crossed = (frame, timestamp, captured_at)
            if part.peak >= self._count_score:
                verdicts.append(self._judge(c.track_id, part, frame))
            else:
                self._waiting.add(c.track_id)
        if self._waiting:
            verdicts += self._settle(frame, ended)
        if ended:
            for tid in ended:
                self._parts.pop(tid, None)
            self.line.forget(list(ended))
        return PartsFrame(detections, tuple(part_rows), tuple(ids), ended, tuple(defect_rows), tuple(owners),
                          tuple(verdicts))

    def _settle(self, frame: int, ended: tuple[int, ...]) -> list[PartVerdict]:
        """Verdicts for the tracks that crossed before scoring ``count_score`` and have now; tracks that
        waited ``count_wait`` frames in vain (or ended) get none."""
        out = []
        for tid in sorted(self._waiting):
            part = self._parts.get(tid)
            if part is not None and part.peak >= self._count_score:
                out.append(self._judge(tid, part, frame))
            elif part is not None and frame - part.crossed[0] < self.options.count_wait and tid not in ended:
                continue
            elif part is not None:
                part.judged = True
                self.uncounted += 1
            self._waiting.discard(tid)
        return out

    def _piece(self, tid: int, part: _Part) -> bool:
        """Whether the crossing track ``tid`` is a piece of an older part's track: ``piece_overlap`` of its
        box lies in that track's box (parts on a belt do not overlap, so the detector saw one part as two).
        Then it gets no verdict, and its defect sightings go to the older part when that has none yet."""
        if not self.options.piece_overlap:
            return False
        x1, y1, x2, y2 = part.box
        area = max(x2 - x1, 1e-9) * max(y2 - y1, 1e-9)
        for other, (ox1, oy1, ox2, oy2) in self.tracker.estimates().items():
            host = self._parts.get(other)
            if other == tid or host is None or host.first_frame >= part.first_frame:
                continue
            inter = max(min(x2, ox2) - max(x1, ox1), 0.0) * max(min(y2, oy2) - max(y1, oy1), 0.0)
            if inter >= self.options.piece_overlap * area:
                part.judged = True
                self.pieces += 1
                if not host.judged:
                    for label, (n, total, top, edge) in part.defects.items():
                        ev = host.defects.setdefault(label, [0, 0.0, 0.0, 0])
                        ev[0], ev[1], ev[2], ev[3] = ev[0] + n, ev[1] + total, max(ev[2], top), ev[3] + edge
                return True
        return False

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
        part.peak = max(part.peak, score)
        box = (xyxy[0], xyxy[1], xyxy[2], xyxy[3])
        part.box = box
        whole = image_bgr is not None and _inside(box, image_bgr.shape)
        if (whole, score) > (part.crop_whole, part.best_score):  # a whole view first, then the best score
            part.best_score, part.best_frame, part.crop_whole = score, frame, whole
            if self.options.crop and image_bgr is not None:
                part.crop = _cut(image_bgr, box)

    def _add_defects(self, labels: list[str], scores: list[float], owners: list[int], whole: list[bool]) -> None:
        """Add this frame's sightings: per part and defect label its best score among the boxes wholly in
        the frame; a label seen on a part only in boxes cut by the frame's edge adds a frame at the edge."""
        best: dict[tuple[int, str], float] = {}  # (part, defect label) -> best score this frame
        edge: set[tuple[int, str]] = set()
        for tid, label, score, inside in zip(owners, labels, scores, whole):
            if tid >= 0 and tid in self._parts and score >= self.options.defect_threshold:
                if inside:
                    best[(tid, label)] = max(best.get((tid, label), 0.0), score)
                else:
                    edge.add((tid, label))
        for (tid, label), score in best.items():
            part = self._parts[tid]
            if part.judged:
                continue
            ev = part.defects.setdefault(label, [0, 0.0, 0.0, 0])
            ev[0] += 1
            ev[1] += score
            ev[2] = max(ev[2], score)
        for tid, label in edge.difference(best):
            if not self._parts[tid].judged:
                self._parts[tid].defects.setdefault(label, [0, 0.0, 0.0, 0])[3] += 1

    def _counted(self, frames: float, score_sum: float) -> bool:
        if self.options.evidence is Evidence.FRAMES:
            return frames >= self.options.min_frames
        return score_sum >= self.options.min_score_sum

    def _judge(self, tid: int, part: _Part, frame: int) -> PartVerdict:
        part.judged = True
        crossed_frame, crossed_at, captured_at = part.crossed
        evidence = sorted((DefectEvidence(label, int(f), s, m, self._counted(f, s), int(e))
                           for label, (f, s, m, e) in part.defects.items()),
                          key=lambda e: (-e.counted, -e.frames, -e.score_sum, e.label))
        reasons = tuple(e.label for e in evidence if e.counted)
        crop = _jpeg(part.crop, self.options.crop_quality) if part.crop is not None else None
        part.crop = None
        seq = self._numbering()
        return PartVerdict(
            sequence=seq, track_id=tid, label=part.label, outcome=Verdict.of(not reasons),
            reasons=reasons, defects=tuple(evidence), first_frame=part.first_frame, last_frame=part.last_frame,
            frames_seen=part.frames, first_seen=part.first_seen, last_seen=part.last_seen,
            crossed_frame=crossed_frame, crossed_at=crossed_at, captured_at=captured_at, line=self.line.name,
            box=part.box, best_frame=part.best_frame, best_score=part.best_score, judged_frame=frame, crop_jpeg=crop)


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
