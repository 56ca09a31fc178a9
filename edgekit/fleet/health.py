"""Is a new model version healthy? Its first frames compared with the version before it.

The follower feeds every frame's outcome (the top score, the verdict when there was one, an
inference error) to :class:`HealthTracker`. Frames of the serving version are remembered (the
last ``baseline`` of them); when a version on trial takes over, its first ``window`` frames are
compared with those. A regression is a FAIL rate higher by more than ``max_fail_rate_increase``,
a mean top score moved by more than ``max_score_shift`` either way, or more than ``max_errors``
inference errors, and the follower rolls the version back. The two rates are different frames
at different moments, so a difference also has to exceed 3 standard errors of the belt's own
variation, more with few independent looks (:mod:`edgekit.fleet.compare`): a model whose
verdicts equal the serving one's is not rolled back because the belt carried more defective
parts during its trial.
"""

from __future__ import annotations

import collections
import enum
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Sequence

import numpy as np

from edgekit.fleet.compare import Difference, critical, difference
from edgekit.results import Detections

if TYPE_CHECKING:
    from edgekit.inspect.inspector import Decision
    from edgekit.inspect.parts import PartVerdict
    from edgekit.results import FrameResult

__all__ = ["HealthThresholds", "HealthStats", "HealthVerdict", "Health", "HealthTracker"]


EXTEND = 4  # a trial whose differences the belt's variation could explain runs on, up to this many windows
END_Z = 2.0  # at the end of the longest trial, a difference beyond a threshold needs only this many standard errors


@dataclass(frozen=True)
class HealthThresholds:
    window: int = 300  # frames a version on trial must serve before it counts as healthy
    # frames of the previous version it is compared with (a new version waits for them): 3 windows, so
    # the baseline's own noise (a few parts in 300 frames) does not decide an extended trial
    baseline: int = 900
    max_fail_rate_increase: float = 0.2  # absolute: 0.05 -> 0.30 is a regression
    max_score_shift: float = 0.15  # absolute change of the mean top score, either way
    max_errors: int = 3  # inference errors allowed in the window


class HealthStats(NamedTuple):
    frames: int
    fail_rate: float | None  # of the frames that had a verdict
    mean_score: float | None  # of the frames that had a score
    errors: int

    def to_dict(self) -> dict[str, float | int | None]:
        r = lambda v: None if v is None else round(v, 4)  # noqa: E731
        return {"frames": self.frames, "fail_rate": r(self.fail_rate), "mean_score": r(self.mean_score),
                "errors": self.errors}


class Health(str, enum.Enum):
    HEALTHY = "healthy"
    REGRESSED = "regressed"


class HealthVerdict(NamedTuple):
    version: int
    health: Health
    reason: str
    trial: HealthStats
    baseline: HealthStats


class _Sums:
    """Running totals of a window of frames (O(1) per frame)."""

    __slots__ = ("frames", "judged", "fails", "scored", "score_sum", "errors")

    def __init__(self) -> None:
        self.frames = self.judged = self.fails = self.scored = self.errors = 0
        self.score_sum = 0.0

    def add(self, score: float | None, failed: bool | None, error: bool) -> None:
        self.frames += 1
        if failed is not None:
            self.judged += 1
            self.fails += bool(failed)
        if score is not None:
            self.scored += 1
            self.score_sum += score
        self.errors += bool(error)

    def stats(self) -> HealthStats:
        return HealthStats(self.frames, self.fails / self.judged if self.judged else None,
                           self.score_sum / self.scored if self.scored else None, self.errors)


class HealthTracker:
    """Remembers the serving version's recent frames and judges a version on trial (thread-safe;
    a frame costs a few additions, the baseline is summed once when the trial starts)."""

    def __init__(self, thresholds: HealthThresholds) -> None:
        self.t = thresholds
        self._lock = threading.Lock()
        self._recent: collections.deque[tuple[float | None, bool | None, bool]] = collections.deque(
            maxlen=max(1, thresholds.baseline))
        self._trial: int | None = None
        self._baseline = HealthStats(0, None, None, 0)
        self._base_frames: list[tuple[float | None, bool | None, bool]] = []
        self._trial_frames: list[tuple[float | None, bool | None, bool]] = []
        self._window = _Sums()

    def switched(self, version: int, *, trial: bool) -> None:
        """`version` serves from now on; judge it when `trial` (its predecessor's frames are the baseline)."""
        with self._lock:
            if trial:
                base = _Sums()
                for frame in self._recent:
                    base.add(*frame)
                self._baseline, self._trial, self._window = base.stats(), version, _Sums()
                self._base_frames, self._trial_frames = list(self._recent), []
            elif version != self._trial:
                self._trial = None
            self._recent.clear()

    @property
    def on_trial(self) -> int | None:
        return self._trial

    @property
    def baseline_frames(self) -> int:
        """Frames of the serving version remembered (what a trial starting now is compared with)."""
        return len(self._recent)

    @property
    def baseline_ready(self) -> bool:
        """Whether the serving version has served the full ``baseline`` of frames: a new version is
        placed only then (a restarted device collects them first), so no trial is judged against a
        short or empty baseline."""
        return len(self._recent) >= self.t.baseline

    def observe(self, score: float | None, failed: bool | None, error: bool = False) -> HealthVerdict | None:
        """One frame's outcome; returns the verdict on the version on trial once it is decided."""
        with self._lock:
            self._recent.append((score, failed, error))
            if self._trial is None:
                return None
            self._window.add(score, failed, error)
            self._trial_frames.append((score, failed, error))
            n, w = self._window.frames, self.t.window
            if not error and (n < w or ((n - w) % max(1, w // 10) and n < EXTEND * w)):
                return None  # decided on a full window (then every tenth of one), unless errors pile up
            trial, base = self._window.stats(), self._baseline
            reason, decided = self._regression(trial, base)
            if not decided:
                return None
            version, self._trial = self._trial, None
        health = Health.HEALTHY if reason is None else Health.REGRESSED
        return HealthVerdict(version, health, reason or f"{trial.frames} frames within the thresholds", trial, base)

    def _regression(self, trial: HealthStats, base: HealthStats) -> tuple[str | None, bool]:
        """(why it regressed or None, whether that is decided). A difference beyond a threshold that
        the belt's own variation could explain extends the trial, up to EXTEND windows; at the end
        END_Z standard errors suffice (a bad version does not stay for want of a longer trial)."""
        t = self.t
        if trial.errors > t.max_errors:
            return f"{trial.errors} inference errors in {trial.frames} frames (allowed {t.max_errors})", True
        if trial.frames < t.window:
            return None, False
        if base.frames < t.baseline:
            return (f"the baseline holds {base.frames} frames of the version before, fewer than the "
                    f"{t.baseline} a comparison needs; the trial cannot clear it"), True
        last = trial.frames >= EXTEND * t.window
        pending = False
        fails = difference(*self._series(1), binary=True)
        if fails is not None and fails.delta > t.max_fail_rate_increase:
            if fails.significant or (last and fails.z > END_Z):
                return (f"FAIL rate {base.fail_rate:.1%} -> {trial.fail_rate:.1%} "
                        f"(more than +{t.max_fail_rate_increase:.0%}, {_beyond(fails)})"), True
            pending = True
        scores = difference(*self._series(0), binary=False)
        if scores is not None and abs(scores.delta) > t.max_score_shift:
            if scores.significant or (last and abs(scores.z) > END_Z):
                return (f"mean top score {base.mean_score:.3f} -> {trial.mean_score:.3f} "
                        f"(shift beyond {t.max_score_shift}, {_beyond(scores)})"), True
            pending = True
        return None, last or not pending

    def _series(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The baseline's and the trial's scores (i=0) or FAIL verdicts (i=1), frames without one left out."""
        pick = lambda frames: np.array([f[i] for f in frames if f[i] is not None], dtype=np.float64)  # noqa: E731
        return pick(self._base_frames), pick(self._trial_frames)


def _beyond(d: Difference) -> str:
    if not d.significant:
        return (f"after {EXTEND} windows, {abs(d.z):.1f} standard errors of the belt's own variation, "
                f"beyond {END_Z} ({d.tau:.0f} frames a look)")
    return (f"{abs(d.z):.1f} standard errors of the belt's own variation, beyond the {critical(d.df):.1f} "
            f"for {d.df:.0f} degrees of freedom ({d.tau:.0f} frames a look)")


def frame_health(result: FrameResult, decisions: Sequence[Decision],
                 parts: Sequence[PartVerdict] = ()) -> tuple[float | None, bool | None]:
    """A frame's top score (None: no detection) and whether a verdict failed (None: no verdict).

    ``decisions``: the frame's per-frame decisions; ``parts``: the per-part verdicts it gave (parts that
    crossed the line in it), so a cell judging parts has its FAIL rate watched too."""
    scores = result.result.scores if isinstance(result.result, Detections) else None
    top = float(scores.max()) if scores is not None and len(scores) else None
    passed = [d.verdict.passed for d in decisions if d.verdict is not None]
    passed += [p.passed for p in parts]
    return top, (not all(passed) if passed else None)
