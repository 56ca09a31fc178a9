"""The per-part mode's settings and results: which classes are parts and defects, how evidence adds
up (:class:`PartsOptions`, :func:`belt_tracker`), and the one verdict a part gets (:class:`PartVerdict`).
:mod:`edgekit.inspect.parts.inspector` does the work.
"""

from __future__ import annotations

import difflib
import enum
from dataclasses import dataclass, field
from typing import Any, Sequence

from edgekit.errors import ConfigError
from edgekit.ranges import FRACTION, NONNEG_INT, POS_INT, POS_NUM, between, check_ranges, ranged
from edgekit.inspect.verdict import Verdict
from edgekit.track import TrackerOptions

__all__ = ["DefectEvidence", "Evidence", "PartVerdict", "PartsOptions", "belt_tracker"]


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
    min_overlap: float = ranged(0.5, FRACTION)  # share of a defect's box inside the part's box
    evidence: Evidence = Evidence.FRAMES
    min_frames: int = ranged(2, POS_INT)
    min_score_sum: float = ranged(1.0, POS_NUM)
    part_threshold: float = ranged(0.5, FRACTION)  # parts above it start and feed tracks (ByteTrack's high threshold)
    defect_threshold: float = ranged(0.5, FRACTION)  # a defect sighting needs this score
    whole_defects: bool = True  # and its box wholly in the frame: one cut by the frame's edge is partly seen, its
    # class a guess (off: cut boxes count too, for parts that ride along the frame's edge and are never seen whole)
    drop_merged: bool = True  # drop a part box holding two part boxes, or one scoring higher (parts seen as one)
    count_score: float = ranged(0.0, FRACTION)  # a part gets its verdict once a box of it scored this (0: every track)
    count_wait: int = ranged(15, NONNEG_INT)  # frames a track that crossed scoring less waits for such a box
    piece_overlap: float = ranged(0.0, FRACTION)  # a crossing track this much inside an older part's box is a piece
    # of it (0: off; for detectors that box a large part twice; it also swallows a part that a box around two
    # touching parts holds)
    crop: bool = False  # keep the part's best frame as a JPEG in its verdict
    crop_quality: int = ranged(90, between(1, 100, "an integer 1..100"))
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
        check_ranges(self, f"{self.where}: parts" if self.where else "parts")

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
    at_edge: int = 0  # further frames it was seen only in boxes cut by the frame's edge (whole_defects: not counted)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "frames": self.frames, "score_sum": round(self.score_sum, 3),
                "max_score": round(self.max_score, 3), "counted": self.counted, "at_edge": self.at_edge}


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
    outcome: Verdict
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
    judged_frame: int = -1  # the frame the verdict was made in: the crossing's, or later (see count_score)
    crop_jpeg: bytes | None = field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        return self.outcome is Verdict.PASS

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
                "best_score": round(self.best_score, 4), "judged_frame": self.judged_frame,
                "crop_bytes": len(self.crop_jpeg) if self.crop_jpeg else 0}
