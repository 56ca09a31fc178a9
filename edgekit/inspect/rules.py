"""Zones, count rules and the PASS/FAIL verdict, over plain arrays of boxes and labels.

A zone is a polygon in frame pixels; a detection belongs to it when its anchor point (the
box centre by default) lies inside. A rule counts one label inside one zone (or the whole
frame) and says how many are allowed: ``defect`` exactly 0, ``screw`` exactly 4,
``label`` at least 1. The frame passes when every rule does::

    zones = [Zone("tray", [(100, 80), (540, 80), (540, 400), (100, 400)])]
    rules = [Rule("screw", zone="tray", min=4, max=4), Rule("defect", max=0)]
    verdict = evaluate(boxes_xyxy, labels, zones, rules, scores=scores, threshold=0.5)
    verdict.passed, verdict.to_dict()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from edgekit.errors import ConfigError, InputError
from edgekit.inspect.verdict import Verdict
from edgekit.track.line import Anchor

__all__ = ["Anchor", "Zone", "Rule", "RuleResult", "RulesVerdict", "evaluate", "points_in_polygon"]


@dataclass(frozen=True)
class Zone:
    """A named polygon in frame pixels (at least 3 points, in order around the area).

    ``where`` says where it was defined ("inspection.toml:14") for error messages.
    """

    name: str
    polygon: np.ndarray
    anchor: Anchor = Anchor.CENTER
    where: str = ""

    def __init__(self, name: str, polygon: Any, anchor: Anchor | str = Anchor.CENTER, where: str = "") -> None:
        pts = np.asarray(polygon, dtype=np.float64)
        at = f" ({where})" if where else ""
        if pts.ndim != 2 or pts.shape[1] != 2 or len(pts) < 3:
            raise ConfigError(f"zone {name!r}{at}: polygon must be at least 3 [x, y] points, got shape "
                              f"{pts.shape}")
        if not np.isfinite(pts).all():
            raise ConfigError(f"zone {name!r}{at}: polygon points must be finite numbers")
        area = 0.5 * abs(float(np.dot(pts[:, 0], np.roll(pts[:, 1], -1)) - np.dot(pts[:, 1], np.roll(pts[:, 0], -1))))
        if area <= 0:
            raise ConfigError(f"zone {name!r}{at}: polygon has no area (its points are on one line)")
        pts.setflags(write=False)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "polygon", pts)
        object.__setattr__(self, "anchor", Anchor(anchor))
        object.__setattr__(self, "where", where)

    def contains(self, boxes: np.ndarray) -> np.ndarray:
        """(N,) bool: which xyxy boxes count inside this zone."""
        if len(boxes) == 0:
            return np.zeros(0, dtype=bool)
        pts = self.anchor.points(boxes)  # (N, P, 2)
        inside = points_in_polygon(pts.reshape(-1, 2), self.polygon).reshape(pts.shape[:2])
        return np.asarray(inside.all(axis=1), dtype=bool)

    def check_fits(self, width: int, height: int) -> None:
        """Raises ConfigError when a point lies outside a width x height frame."""
        xs, ys = self.polygon[:, 0], self.polygon[:, 1]
        if xs.min() < 0 or ys.min() < 0 or xs.max() > width or ys.max() > height:
            at = f" ({self.where})" if self.where else ""
            raise ConfigError(
                f"zone {self.name!r}{at} reaches outside the {width}x{height} frame: x spans "
                f"{xs.min():g}..{xs.max():g}, y spans {ys.min():g}..{ys.max():g}. Zones are in pixels of "
                "the camera frame; fix the points or the source's width/height.")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Zone) and self.name == other.name and self.anchor == other.anchor
                and np.array_equal(self.polygon, other.polygon))

    def __hash__(self) -> int:
        return hash((self.name, self.anchor, self.polygon.tobytes()))


def points_in_polygon(points: np.ndarray, polygon: np.ndarray) -> np.ndarray:
    """(M,) bool: even-odd ray casting of (M, 2) points against a (K, 2) polygon."""
    x, y = points[:, :1], points[:, 1:2]
    x1, y1 = polygon[:, 0], polygon[:, 1]
    x2, y2 = np.roll(x1, -1), np.roll(y1, -1)
    crosses = (y1 > y) != (y2 > y)
    dy = np.where(y2 == y1, 1.0, y2 - y1)  # horizontal edges never cross (crosses is False)
    x_at = x1 + (y - y1) * (x2 - x1) / dy
    return ((crosses & (x < x_at)).sum(axis=1) % 2) == 1


@dataclass(frozen=True)
class Rule:
    """How many `label` detections `zone` (None: the whole frame) may hold: min..max inclusive."""

    label: str
    zone: str | None = None
    min: int | None = None
    max: int | None = None
    min_score: float | None = None  # overrides the threshold for this rule
    where: str = ""
    min_area: float | None = None  # count only boxes or regions of at least this many pixels

    def __post_init__(self) -> None:
        at = f" ({self.where})" if self.where else ""
        if self.min is None and self.max is None:
            raise ConfigError(f"rule for {self.label!r}{at} needs count, min or max")
        for name, v in (("min", self.min), ("max", self.max)):
            if v is not None and v < 0:
                raise ConfigError(f"rule for {self.label!r}{at}: {name} must be >= 0, got {v}")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ConfigError(f"rule for {self.label!r}{at}: min {self.min} is above max {self.max}")
        if self.min_area is not None and self.min_area < 0:
            raise ConfigError(f"rule for {self.label!r}{at}: min_area must be >= 0, got {self.min_area}")

    def allows(self, count: int) -> bool:
        return (self.min is None or count >= self.min) and (self.max is None or count <= self.max)

    def describe(self) -> str:
        where = f"in {self.zone}" if self.zone else "in frame"
        if self.min == self.max:
            want = f"== {self.min}"
        elif self.min is None:
            want = f"<= {self.max}"
        elif self.max is None:
            want = f">= {self.min}"
        else:
            want = f"in {self.min}..{self.max}"
        size = f" with area >= {self.min_area:g} px" if self.min_area is not None else ""
        return f"count({self.label}{size}) {where} {want}"


@dataclass(frozen=True)
class RuleResult:
    rule: Rule
    count: int
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule.describe(), "label": self.rule.label, "zone": self.rule.zone,
                "min": self.rule.min, "max": self.rule.max, "count": self.count, "passed": self.passed}


@dataclass(frozen=True)
class RulesVerdict:
    """A frame's rules judged: PASS when every rule passed."""

    passed: bool
    results: tuple[RuleResult, ...] = field(default_factory=tuple)

    @property
    def verdict(self) -> Verdict:
        return Verdict.of(self.passed)

    @property
    def label(self) -> str:
        """"PASS" or "FAIL" (the verdict's value)."""
        return self.verdict.value

    @property
    def failed(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.label, "rules": [r.to_dict() for r in self.results]}


def evaluate(boxes: Any, labels: Sequence[str], zones: Iterable[Zone], rules: Iterable[Rule], *,
             scores: Any = None, threshold: float = 0.0, areas: Any = None) -> RulesVerdict:
    """Apply count rules to one frame's detections.

    Args:
        boxes: (N, 4) boxes as x1, y1, x2, y2 in frame pixels.
        labels: N label names.
        zones: the zones rules may name.
        rules: the rules; the verdict passes when all pass (no rules: PASS).
        scores: N scores, or None to count every detection.
        threshold: detections scoring below it are not counted (a rule's min_score overrides).
        areas: N areas in pixels for rules with min_area (a segmentation's regions give their
            pixel counts, e.g. ``[r.area for r in seg.regions]``), or None: the boxes' areas.

    Raises:
        InputError: boxes, labels and scores disagree in shape or length.
        ConfigError: a rule names a zone that is not given.
    """
    b = np.asarray(boxes, dtype=np.float64)
    if b.size == 0:
        b = b.reshape(0, 4)
    if b.ndim != 2 or b.shape[1] != 4:
        raise InputError(f"boxes must be an (N, 4) array of x1, y1, x2, y2, got shape {b.shape}")
    lab = np.asarray([str(x) for x in labels], dtype=object)
    s = np.ones(len(b)) if scores is None else np.asarray(scores, dtype=np.float64).reshape(-1)
    if not len(b) == len(lab) == len(s):
        raise InputError(f"boxes, labels and scores must have one entry per detection; got {len(b)} boxes, "
                         f"{len(lab)} labels, {len(s)} scores")
    a = (np.maximum(b[:, 2] - b[:, 0], 0) * np.maximum(b[:, 3] - b[:, 1], 0) if areas is None
         else np.asarray(areas, dtype=np.float64).reshape(-1))
    if len(a) != len(b):
        raise InputError(f"areas must have one entry per detection; got {len(a)} areas for {len(b)} boxes")
    by_name = {z.name: z for z in zones}
    in_zone: dict[str, np.ndarray] = {}
    results = []
    for rule in rules:
        mask = (lab == rule.label) & (s >= (rule.min_score if rule.min_score is not None else threshold))
        if rule.min_area is not None:
            mask &= a >= rule.min_area
        if rule.zone is not None:
            if rule.zone not in by_name:
                raise ConfigError(f"rule {rule.describe()!r} names zone {rule.zone!r}, which is not defined; "
                                  f"zones: {', '.join(sorted(by_name)) or 'none'}")
            if rule.zone not in in_zone:
                in_zone[rule.zone] = by_name[rule.zone].contains(b)
            mask &= in_zone[rule.zone]
        n = int(mask.sum())
        results.append(RuleResult(rule, n, rule.allows(n)))
    return RulesVerdict(all(r.passed for r in results), tuple(results))
