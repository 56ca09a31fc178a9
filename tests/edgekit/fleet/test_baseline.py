"""A device that was off or restarting while a bad version went out still tries it against a real
baseline: the tested version is held in staging until the serving version (as the cell reports
it) has served the full baseline of frames, and a trial interrupted by a clean stop starts over.
The three ways the issue saw a bad version pass: a restart with a short baseline, a sync before
the cell reported what it serves, a SIGTERM just after "installed"."""

from __future__ import annotations

from pathlib import Path

from edgekit.fleet.follower import Outcome
from edgekit.fleet.health import Health, HealthThresholds, HealthTracker
from edgekit.fleet.release import write_release
from tests.edgekit.fleet.conftest import Device, Kit, wait_until


def serving_version_1(kit: Kit, tmp_path: Path, channel: str) -> tuple[Path, Device]:
    folder = kit.www / channel
    write_release(kit.model, 1, folder, kit.key, golden=kit.golden)
    d = Device(f"{channel}-dev", tmp_path / "dev", kit.settings(channel, poll_seconds=3600.0), kit.images).start()
    return folder, d


def rolled_back_against_a_full_baseline(d: Device, version: int, frames: int) -> dict:
    wait_until(lambda: any(e["action"] == "rollback" and e["version"] == version for e in d.events), 30,
               f"version {version} to be rolled back")
    assert not any(e["action"] == "healthy" and e["version"] == version for e in d.events)
    event = next(e for e in d.events if e["action"] == "rollback" and e["version"] == version)
    assert event["baseline"]["frames"] >= frames and "health regressed" in event["reason"]
    installed = next(e for e in d.events if e["action"] == "installed" and e["version"] == version)
    assert installed["previous"] == 1 and installed["baseline"] >= frames
    wait_until(lambda: d.serving == 1 and version not in d.installed(), what="version 1 to serve again")
    return event


def test_a_restarted_device_collects_its_baseline_before_the_trial(kit: Kit, tmp_path: Path) -> None:
    folder, d = serving_version_1(kit, tmp_path, "restarted")
    d.stop()
    write_release(kit.bad_model, 2, folder, kit.key, golden=kit.golden)
    again = Device(d.name, d.home, d.follower.s, kit.images).start()
    try:
        assert again.follower.health.baseline_frames < 20
        assert again.follower.sync() is Outcome.HELD  # tested, but only a few frames of version 1 so far
        status = again.follower.status()
        assert status.state == "baseline" and status.pending == 2 and status.running == 1
        assert again.installed() == {1} and (again.model_dir / ".staging-2").is_dir()
        rolled_back_against_a_full_baseline(again, 2, 20)
    finally:
        again.stop()


def test_no_version_is_placed_before_the_cell_reports_what_it_serves(kit: Kit, tmp_path: Path) -> None:
    folder, d = serving_version_1(kit, tmp_path, "unreported")
    d.stop()
    write_release(kit.bad_model, 2, folder, kit.key, golden=kit.golden)
    again = Device(d.name, d.home, d.follower.s, kit.images)
    again.follower.recover()
    assert again.follower.sync() is Outcome.HELD  # the watcher has not started: serving is unknown
    assert again.follower.serving is None and again.installed() == {1}
    assert again.follower.state.trial is not None and again.follower.state.trial.phase == "held"
    again.start()
    try:
        rolled_back_against_a_full_baseline(again, 2, 20)
    finally:
        again.stop()


def test_a_clean_stop_just_after_installed_starts_the_trial_over(kit: Kit, tmp_path: Path) -> None:
    folder, d = serving_version_1(kit, tmp_path, "sigterm")
    write_release(kit.bad_model, 2, folder, kit.key, golden=kit.golden)
    assert d.sync() is Outcome.INSTALLED
    d.stop()  # what SIGTERM does: a clean close, the trial unfinished
    assert d.follower.state.trial is not None and d.follower.state.trial.version == 2
    again = Device(d.name, d.home, d.follower.s, kit.images)
    again.follower.recover()
    assert again.installed() == {1} and (again.model_dir / ".staging-2" / "model.tflite").is_file()
    again.start()
    try:
        assert again.serving == 1
        before = again.follower.downloaded
        assert again.sync() is Outcome.INSTALLED
        assert again.follower.downloaded - before < 5_000  # verified from staging, not fetched again
        rolled_back_against_a_full_baseline(again, 2, 20)
    finally:
        again.stop()


def test_a_short_baseline_never_clears_a_trial() -> None:
    tracker = HealthTracker(HealthThresholds(window=40, baseline=40))
    tracker.switched(1, trial=False)
    for _ in range(23):
        tracker.observe(0.8, False)
    assert not tracker.baseline_ready and tracker.baseline_frames == 23
    tracker.switched(2, trial=True)
    verdict = None
    for _ in range(40):
        verdict = tracker.observe(0.8, False) or verdict
    assert verdict is not None and verdict.health is Health.REGRESSED and "23 frames" in verdict.reason
