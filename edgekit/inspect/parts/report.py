"""Per-part verdicts against a belt's ground truth: the count, the verdicts, a Markdown table.

For ``edgekit demo`` (its belt video knows every part and its defects) and ``benchmarks/parts.py``::

    truth = crossing_truth(video_truth.frames, part_class=0, line_x=160, defects=defects_by_part)
    score = score_parts(verdicts, truth)
    print(score.count_error, score.right, score.markdown())
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from edgekit.inspect.parts.options import PartVerdict
from edgekit.inspect.verdict import Verdict

__all__ = ["PartRow", "PartsScore", "TruePart", "belt_crossings", "crossing_truth", "parts_section", "parts_tables",
           "score_parts"]


@dataclass(frozen=True)
class TruePart:
    """A part of the ground truth: its id in the scene, its defects (none: good), the frame its box
    centre crossed the line and the row of that centre (None: not known)."""

    part_id: int
    defects: tuple[str, ...]
    crossed_frame: int
    row: float | None = None

    @property
    def passed(self) -> bool:
        return not self.defects


@dataclass(frozen=True)
class PartRow:
    """One row of the table: the n-th part to cross, as judged and as it truly was."""

    n: int
    verdict: PartVerdict | None
    truth: TruePart | None

    @property
    def right(self) -> bool:
        return self.verdict is not None and self.truth is not None and self.verdict.passed == self.truth.passed

    @property
    def extra_reasons(self) -> tuple[str, ...]:
        """Reasons the verdict gave that the part does not have, in the verdict's order."""
        if self.verdict is None or self.truth is None:
            return ()
        return tuple(r for r in self.verdict.reasons if r not in self.truth.defects)

    @property
    def missing_reasons(self) -> tuple[str, ...]:
        """Defects the part has that the verdict did not give as reasons, in the truth's order."""
        if self.verdict is None or self.truth is None:
            return ()
        return tuple(d for d in self.truth.defects if d not in self.verdict.reasons)

    @property
    def reasons_right(self) -> bool:
        """The verdict names exactly the part's defects (none for a good part)."""
        return (self.verdict is not None and self.truth is not None and not self.extra_reasons
                and not self.missing_reasons)


@dataclass(frozen=True)
class PartsScore:
    """Verdicts paired with the truth in crossing order."""

    rows: tuple[PartRow, ...]
    counted: int
    expected: int

    @property
    def count_error(self) -> int:
        return self.counted - self.expected

    @property
    def missed(self) -> int:
        """True parts left without a verdict (with ``within``: none crossed at about their frame)."""
        return sum(r.verdict is None for r in self.rows)

    @property
    def extra(self) -> int:
        """Verdicts without a true part."""
        return sum(r.truth is None for r in self.rows)

    @property
    def right(self) -> int:
        """Parts whose PASS/FAIL matches the truth."""
        return sum(r.right for r in self.rows)

    @property
    def accuracy(self) -> float:
        """Verdict accuracy: PASS/FAIL right, per true part."""
        return self.right / self.expected if self.expected else 1.0

    @property
    def reasons_right(self) -> int:
        """Parts whose verdict names exactly their defects (a right PASS names none)."""
        return sum(r.reasons_right for r in self.rows)

    @property
    def reason_accuracy(self) -> float:
        """Reason accuracy: the verdict's reasons are exactly the part's defects, per true part."""
        return self.reasons_right / self.expected if self.expected else 1.0

    @property
    def exact(self) -> bool:
        return self.count_error == 0 and self.right == self.expected

    def markdown(self) -> str:
        """The per-part table and a closing line, for summary.md. A row's verdict column says whether
        PASS/FAIL is right; its reasons column marks the reasons given that the part lacks (extra) and
        its defects the verdict did not name (missing)."""
        lines = ["| # | track | frames | verdict | reasons | truth | verdict right | reasons right |",
                 "|---|---|---|---|---|---|---|---|"]
        for r in self.rows:
            v, t = r.verdict, r.truth
            judged = ("-", "-", "(not counted)", "") if v is None else (
                str(v.track_id), f"{v.first_frame}-{v.last_frame}", v.outcome.value, ", ".join(v.reasons))
            true = "(no such part)" if t is None else (
                Verdict.PASS.value if t.passed else f"{Verdict.FAIL.value} " + ", ".join(t.defects))
            verdict_mark = "ok" if r.right else "**wrong**"
            lines.append(f"| {r.n} | {judged[0]} | {judged[1]} | {judged[2]} | {judged[3]} | {true} | "
                         f"{verdict_mark} | {_reasons_mark(r)} |")
        lines.append("")
        lines.append(f"Parts counted: {self.counted} of {self.expected} (count error {self.count_error:+d}); "
                     f"verdicts right: {self.right} of {self.expected} ({100 * self.accuracy:.0f} %); "
                     f"reasons right: {self.reasons_right} of {self.expected} ({100 * self.reason_accuracy:.0f} %).")
        return "\n".join(lines)


def _reasons_mark(row: PartRow) -> str:
    if row.verdict is None or row.truth is None:
        return "-"
    if row.reasons_right:
        return "ok"
    marks = ([f"extra {', '.join(row.extra_reasons)}"] if row.extra_reasons else []) + \
        ([f"missing {', '.join(row.missing_reasons)}"] if row.missing_reasons else [])
    return "**" + "; ".join(marks) + "**"


def score_parts(verdicts: Sequence[PartVerdict], truth: Sequence[TruePart], *,
                within: int | None = None) -> PartsScore:
    """Pair the n-th verdict with the n-th true part to cross (both in crossing order).

    ``within``: pair instead by crossing frame, in order, a verdict and a true part at most that many
    frames apart (fewest unpaired), so one missed or extra part does not shift every later pair.
    """
    if within is None:
        n = max(len(verdicts), len(truth))
        pairs = [(verdicts[i] if i < len(verdicts) else None, truth[i] if i < len(truth) else None)
                 for i in range(n)]
    else:
        pairs = _untangle(_align(verdicts, truth, within), within)
    rows = tuple(PartRow(i + 1, v, t) for i, (v, t) in enumerate(pairs))
    return PartsScore(rows, len(verdicts), len(truth))


def _align(verdicts: Sequence[PartVerdict], truth: Sequence[TruePart],
           within: int) -> list[tuple[PartVerdict | None, TruePart | None]]:
    """Order-keeping alignment (edit distance): an unpaired item costs ``within + 1``, a pair its frame gap."""
    n, m, gap = len(verdicts), len(truth), within + 1
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0 or j == 0:
                cost[i][j] = (i + j) * gap
                continue
            d = abs(verdicts[i - 1].crossed_frame - truth[j - 1].crossed_frame)
            paired = cost[i - 1][j - 1] + d if d <= within else 1 << 30
            cost[i][j] = min(paired, cost[i - 1][j] + gap, cost[i][j - 1] + gap)
    out: list[tuple[PartVerdict | None, TruePart | None]] = []
    i, j = n, m
    while i or j:
        d = abs(verdicts[i - 1].crossed_frame - truth[j - 1].crossed_frame) if i and j else within + 1
        if i and j and d <= within and cost[i][j] == cost[i - 1][j - 1] + d:
            out.append((verdicts[i - 1], truth[j - 1]))
            i, j = i - 1, j - 1
        elif i and cost[i][j] == cost[i - 1][j] + gap:
            out.append((verdicts[i - 1], None))
            i -= 1
        else:
            out.append((None, truth[j - 1]))
            j -= 1
    return out[::-1]


ROW_MARGIN = 40.0  # pixels: parts side by side ride rows apart; a verdict's box may be cut or merged


def _untangle(pairs: list[tuple[PartVerdict | None, TruePart | None]],
              within: int) -> list[tuple[PartVerdict | None, TruePart | None]]:
    """Two parts side by side cross within a frame or two of each other, in either order: pair each such
    verdict with the true part in its row (the centre of its box) when the truth knows the rows and the
    rows tell them apart by ``ROW_MARGIN`` pixels more than the crossing order does."""
    out = list(pairs)
    for i in range(len(out) - 1):
        (va, ta), (vb, tb) = out[i], out[i + 1]
        if va is None or vb is None or ta is None or tb is None or ta.row is None or tb.row is None:
            continue
        ya, yb = (va.box[1] + va.box[3]) / 2, (vb.box[1] + vb.box[3]) / 2
        if (abs(va.crossed_frame - tb.crossed_frame) <= within and abs(vb.crossed_frame - ta.crossed_frame) <= within
                and abs(ya - tb.row) + abs(yb - ta.row) + ROW_MARGIN < abs(ya - ta.row) + abs(yb - tb.row)):
            out[i], out[i + 1] = (va, tb), (vb, ta)
    return out


def crossing_truth(frames: Sequence[Any], *, part_class: int, line_x: float,
                   defects: Mapping[int, Sequence[str]]) -> list[TruePart]:
    """The parts whose box centre crosses ``x = line_x`` left to right, in crossing order.

    ``frames``: per frame, an object with ``boxes`` (K, 4) xyxy, ``class_ids`` (K,) and ``part_ids`` (K,)
    (``edgekit.demo.conveyor.FrameTruth``); ``defects``: each part id's defect labels.
    """
    side: dict[int, bool] = {}
    crossed: dict[int, tuple[int, float]] = {}
    for t, f in enumerate(frames):
        boxes, ids, owners = np.asarray(f.boxes), np.asarray(f.class_ids), np.asarray(f.part_ids)
        for box, pid in zip(boxes[ids == part_class], owners[ids == part_class].tolist()):
            right = (box[0] + box[2]) / 2 > line_x
            if side.get(pid) is False and right and pid not in crossed:
                crossed[pid] = (t, float(box[1] + box[3]) / 2)
            side[pid] = bool(right)
    return [TruePart(pid, tuple(defects.get(pid, ())), t, row)
            for pid, (t, row) in sorted(crossed.items(), key=lambda kv: kv[1][0])]


def parts_tables(width: int, height: int, *, classes: Sequence[str] = ("part",),
                 defects: Sequence[str] = ("scratch", "dent", "missing_hole"), min_frames: int = 2,
                 defect_threshold: float = 0.5) -> str:
    """TOML for per-part mode on a belt running left to right, judged at the frame's middle (what
    ``edgekit demo`` adds to its inspection config)."""
    x = width // 2
    return (f'\n[parts]\nclasses = {list(classes)!r}\ndefects = {list(defects)!r}\nmin_frames = {min_frames}\n'
            f'defect_threshold = {defect_threshold:g}\n'
            f'\n[line]\nstart = [{x}, 0]\nend = [{x}, {height}]\ndirection = "left_to_right"\n').replace("'", '"')


def belt_crossings(frames: Sequence[Any], parts: Sequence[Any], *, part_class: int, line_x: float) -> list[TruePart]:
    """The parts of a belt's truth that cross ``x = line_x`` (``frames``: its FrameTruth list; ``parts``:
    objects with ``part_id`` and ``defects``): the parts a run is expected to judge, and the one count of
    parts ``edgekit demo`` states."""
    return crossing_truth(frames, part_class=part_class, line_x=line_x,
                          defects={p.part_id: p.defects for p in parts})


def parts_section(verdicts: Sequence[PartVerdict], expected: Sequence[TruePart], *, line_x: float) -> list[str]:
    """The per-part section of ``edgekit demo``'s summary.md: counts and the table against the parts
    expected at the line (:func:`belt_crossings`)."""
    score = score_parts(verdicts, expected)
    passed = sum(v.passed for v in verdicts)
    return ["## Parts: one verdict per part where it crossed the line", "",
            f"Tracked parts judged at x = {line_x:g} (a defect counts once seen in enough frames wholly inside the "
            "frame, not cut by its edge): "
            f"PASS {passed}, FAIL {len(verdicts) - passed} parts.", "", score.markdown(), ""]
