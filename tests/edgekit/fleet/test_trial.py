"""The trial against a real belt: what the demo's int8 detector and inspection.toml reported to the
fleet health check on a generated belt video, frame by frame (data/belt_verdicts.json, written by
``benchmarks/fleet_trial.py --record``), replayed at 20 seeded offsets. A model whose verdicts
equal the serving one's, frame for frame on later frames, is never rolled back; a bad one (every
verdict FAIL, scores 0.2 lower) always is, within the trial (at most 4 windows)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from edgekit.fleet.compare import autocorrelation_time, difference
from edgekit.fleet.health import EXTEND, Health, HealthThresholds, HealthTracker

DATA = Path(__file__).parent / "data" / "belt_verdicts.json"
SEQUENCES = {m: [tuple(f) for f in s] for m, s in json.loads(DATA.read_text())["sequences"].items()}


def trial(seq: list[tuple], offset: int, bad: bool) -> Health:
    """One trial with the default thresholds at `offset` of the recording (looped, as a belt video)."""
    t = HealthThresholds()
    n, baseline = len(seq), t.baseline
    loop = [seq[(offset + i) % n] for i in range(baseline + EXTEND * t.window)]
    tracker = HealthTracker(t)
    tracker.switched(1, trial=False)
    for score, failed in loop[:baseline]:
        tracker.observe(score, failed)
    tracker.switched(2, trial=True)
    for score, failed in loop[baseline:]:
        if bad:
            score, failed = (None if score is None else max(0.0, score - 0.2)), (None if failed is None else True)
        verdict = tracker.observe(score, failed)
        if verdict is not None:
            return verdict.health
    raise AssertionError(f"no verdict in {EXTEND} windows")


@pytest.mark.parametrize("mode", sorted(SEQUENCES))
def test_identical_models_are_kept_and_bad_ones_rolled_back_on_a_real_belt(mode: str) -> None:
    seq = SEQUENCES[mode]
    assert sum(bool(f[1]) for f in seq) > 0.05 * sum(f[1] is not None for f in seq)  # the belt has defects
    rng = random.Random(mode)
    offsets = [rng.randrange(len(seq)) for _ in range(20)]
    identical = [trial(seq, o, bad=False) for o in offsets]
    bad = [trial(seq, o, bad=True) for o in offsets]
    assert identical.count(Health.REGRESSED) == 0
    assert bad.count(Health.REGRESSED) == 20


@pytest.mark.parametrize(("x", "tau"), [
    (np.zeros(300), 1.0),  # constant: nothing to correct for
    (np.tile([0, 1], 150), 1.0),  # alternating: negatively correlated, counted as independent
    (np.repeat(np.tile([0.0, 1.0], 5), 30), (10.0, 60.0)),  # runs of 30 frames: a look per 10-60 frames
])
def test_autocorrelation_time_counts_runs_as_single_looks(x: np.ndarray, tau: float | tuple[float, float]) -> None:
    got = autocorrelation_time(x)
    assert (tau[0] <= got <= tau[1]) if isinstance(tau, tuple) else got == tau


def test_a_difference_is_judged_against_the_effective_sample_size() -> None:
    runs = np.repeat(np.tile([0.0, 1.0], 5), 30)  # 300 frames, 10 runs: a FAIL rate of 0.5
    base, trial_ = runs, np.roll(runs, 30)[:150]  # other frames of the same belt: 2 or 3 runs of FAIL
    d = difference(base, trial_, binary=True)
    assert d is not None and d.tau > 10 and abs(d.z) < 3  # 0.5 vs whatever 150 frames hold: no evidence
    iid = difference(np.zeros(300), np.ones(300), binary=True)
    assert iid is not None and iid.z > 10
