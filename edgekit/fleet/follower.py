"""A device following a release channel into its versioned model folder.

:class:`FleetFollower` polls the channel (conditional GETs, jittered) or wakes on an MQTT notification.
When the signed channel selects this device for a version it does not have, it downloads it (resuming a
broken transfer) into a hidden staging folder, checks every file's size and SHA-256 against the signed
manifest *before anything reads the model*, runs the golden self-test and, once the serving version has
a full baseline of frames, renames the folder into place, where the watcher hot-swaps it in. The new
version serves on trial: a health regression against the version before it (:mod:`edgekit.fleet.health`),
a refusal by the watcher, a halted release or a process that died during the trial rolls it back, and the
reason is reported. Anything that fails verification is deleted and reported; the serving model runs on.
"""
from __future__ import annotations

import logging
import queue
import random
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from edgekit.errors import ModelError
from edgekit.fleet.health import Health, HealthTracker, HealthVerdict, frame_health
from edgekit.fleet.keys import SignatureError, parse_public_key
from edgekit.fleet.manifest import Channel, ManifestError, ReleaseManifest, selected
from edgekit.fleet.settings import FleetSettings, Trust
from edgekit.fleet.state import FollowerState, Outcome, Phase, TrialPhase, VersionTrial
from edgekit.fleet.status import DeviceStatus
from edgekit.fleet.poll import ChannelReader
from edgekit.fleet.staging import REFUSED, Staging
from edgekit.fleet.transport import TooLarge, TransferError
from edgekit.fleet.verify import VerificationError, local_problem
from edgekit.inspect.events import EventKind
from edgekit.inspect.versions import Hidden, VersionFolder
from edgekit.inspect.stage import JudgedFrame, StageContext

__all__ = ["FleetFollower", "Phase", "Outcome", "VerificationError"]

log = logging.getLogger(__name__)

STATUS_SECONDS = 30.0


class FleetFollower:
    """Keeps a versioned model folder on the version its channel selects for this device.

    Args:
        settings: the channel, key and thresholds (:func:`edgekit.fleet.settings.parse_fleet`).
        device: this device's id (its rollout bucket is a hash of it).
        model_dir: the versioned folder the serving loop watches.
        state_dir: where ``fleet.json`` keeps what must survive a restart.
        on_event: called with each rollout event's payload (installed, trial, healthy, rollback, refused).
        publisher: a :class:`~edgekit.fleet.status.StatusPublisher` for the retained status.
        isolate: load a new version for its self-test in a child process first.

    Raises:
        ConfigError: a malformed public key. EdgekitError: cryptography is not installed.
    """

    def __init__(self, settings: FleetSettings, *, device: str, model_dir: str | Path, state_dir: str | Path,
                 on_event: Callable[[dict[str, Any]], None] | None = None, publisher: Any = None,
                 isolate: bool = True) -> None:
        self.s, self.device, self.isolate = settings, device, isolate
        self.key = parse_public_key(settings.public_key) \
            if settings.trust is Trust.SIGNED and settings.public_key is not None else None
        if self.key is not None:
            from edgekit.fleet.keys import _crypto

            _crypto()  # say now, not at the first release, that cryptography is missing
        self.root = Path(model_dir)
        self.root.mkdir(parents=True, exist_ok=True)
        self.versions = VersionFolder(self.root)  # its folder names and self-test, shared with the watcher
        self._state_path = Path(state_dir) / "fleet.json"
        self._state_path.parent.mkdir(parents=True, exist_ok=True)
        self.state = FollowerState.load(self._state_path)
        self.health = HealthTracker(settings.health)
        self.on_event, self.publisher = on_event, publisher
        self.serving: int | None = None
        self.pending: int | None = None
        self.phase = Phase.STARTING
        self.last_error: str | None = None
        self.staging = Staging(self.versions, settings.channel, self.key, timeout=settings.timeout,
                               max_bytes=settings.max_download_bytes, stop=threading.Event(), isolate=isolate)
        self.selftest: dict[str, Any] | None = None  # the last golden self-test's cases and result
        self.channel: Channel | None = None
        self.reader = ChannelReader(settings.channel, self.key, self.staging, settings.timeout)
        self._failures: dict[tuple[int, int], int] = {}  # (serial, version) -> failed attempts
        self._lock = threading.RLock()  # one sync or rollback at a time
        self._state_lock = threading.Lock()
        self._actions: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._wake, self._stop = threading.Event(), self.staging.stop
        self._notified = False
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()
        self._frames, self._fps_mark = 0, (time.monotonic(), 0)
        self._held: int | None = None  # a tested version in .staging-<v>, waiting for the baseline
        self._held_manifest: ReleaseManifest | None = None  # (and its manifest)

    # --- start and stop ------------------------------------------------------------------
    def recover(self) -> None:
        """At start, before the folder is served: roll back a version whose trial the last run did
        not survive, and remove version folders whose files do not match their signed manifest."""
        with self._lock:
            st = self.state
            t = st.trial
            if st.running and t is not None and t.phase is not TrialPhase.HELD:  # held: tested, never served
                self._reject(t.version, f"the process ended during the {t.phase.value} of version {t.version} "
                                        "(an interpreter crash?)")
            elif t is not None:  # a clean stop before or during its trial: it starts over, on a new baseline
                self.versions.demote(t.version)
                st.trial = None
            st.running = True
            self._save()
            for left in self.versions.leftovers():
                if left.kind is Hidden.REJECTED or left.version is None or left.version in st.rejected:
                    shutil.rmtree(left.path, ignore_errors=True)  # a staging folder of a live version is resumed
            for version, path in sorted(self.versions.find().items()):
                why = local_problem(path.parent, self.key)
                if why is not None:
                    self._reject(version, why, action="refused")

    def ensure_version(self, timeout: float) -> None:
        """Block until the folder holds a version (a new device's first sync).

        Raises:
            ModelError: none arrived within `timeout` seconds (the last error says why).
        """
        deadline = time.monotonic() + timeout
        while not self.versions.find():
            if self.sync() is Outcome.INSTALLED:
                continue
            if time.monotonic() > deadline:
                raise ModelError(f"no model version from the channel {self.s.channel} within {timeout:.0f} s: "
                                 f"{self.last_error or 'this device is in no release yet'}")
            self._stop.wait(min(2.0, self.s.poll_seconds))

    def start(self) -> FleetFollower:
        """Follow the channel in a background thread."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="edgekit-fleet", daemon=True)
            self._thread.start()
        return self

    def notify(self, payload: bytes = b"") -> None:
        """A release notification arrived: check the channel soon (after a short random spread).

        The serial it carries is honoured: until this device holds a channel with that serial it
        fetches without conditions, looking again after 1, 2, 4 ... s (at most the poll interval)
        while the server still answers with an older channel (:mod:`edgekit.fleet.poll`)."""
        self.reader.announce(payload)
        self._notified = True
        self._wake.set()

    @property
    def behind(self) -> bool:
        """True while a notification announced a newer channel than this device holds."""
        return self.reader.behind(self.state.serial)

    def close(self) -> None:
        """Stop following and record a clean stop (an unfinished trial starts over at the next start,
        after a new baseline). Safe twice."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.s.timeout + 5)
            self._thread = None
        with self._lock:
            if self.phase is not Phase.STOPPED:
                self.state.running = False
                self._save()
                self.phase = Phase.STOPPED
                if self.publisher is not None:
                    self.publisher.close(self.status())

    def _loop(self) -> None:
        s = self.s
        next_poll = time.monotonic() + s.poll_seconds * random.uniform(1 - s.jitter, 1 + s.jitter)
        while not self._stop.is_set():
            # the status (fps, uptime) goes out at least every STATUS_SECONDS, whatever the poll interval
            self._wake.wait(max(0.0, min(next_poll - time.monotonic(), STATUS_SECONDS)))
            self._wake.clear()
            if self._stop.is_set():
                break
            self.act()
            if self._notified and self._stop.wait(random.uniform(0, s.notify_spread)):
                break
            if self._notified or time.monotonic() >= next_poll:
                self._notified = False
                self.sync()
                next_poll = time.monotonic() + s.poll_seconds * random.uniform(1 - s.jitter, 1 + s.jitter)
                if self.behind:  # the server still serves an older channel than announced: look again soon
                    next_poll = min(next_poll, time.monotonic() + self.reader.next_retry(s.poll_seconds))
            self.publish_status()

    # --- what the serving loop reports ----------------------------------------------------
    def on_model_event(self, kind: EventKind, payload: Mapping[str, Any]) -> None:
        """The watcher's MODEL_SWITCH / MODEL_REFUSED events (any thread; never blocks long)."""
        version = payload.get("version")
        trial = self.state.trial
        if kind is EventKind.MODEL_SWITCH and isinstance(version, int):
            self.serving = version
            on_trial = trial is not None and trial.version == version
            self.health.switched(version, trial=on_trial)
            if on_trial and trial is not None:
                trial.phase = TrialPhase.TRIAL
                self._save()
                self.phase, self.pending = Phase.TRIAL, None
                self._emit("trial", version=version, previous=trial.previous)
            elif self.phase in (Phase.STARTING, Phase.INSTALLED, Phase.TRIAL):
                self.phase = Phase.SERVING
            self._wake.set()
        elif kind is EventKind.MODEL_REFUSED and trial is not None and version == trial.version:
            self._actions.put(("reject", version, f"the serving loop refused it: {payload.get('reason')}"))
            self._wake.set()

    def open(self, context: StageContext) -> None:  # a stage of the cell: open_follower started it
        pass

    def process(self, frame: JudgedFrame) -> None:
        """The cell's judged frame, for the health check of a version on trial."""
        self.observe(*frame_health(frame.result, frame.decisions, frame.parts))

    def observe(self, score: float | None, failed: bool | None = None, error: bool = False) -> None:
        """One frame's outcome (top score, FAIL verdict, inference error) for the health check."""
        self._frames += 1
        verdict = self.health.observe(score, failed, error)
        if verdict is not None:
            self._actions.put(("verdict", verdict))
            self._wake.set()
        elif self._held is not None and self.health.baseline_ready:
            self._wake.set()

    def act(self) -> None:
        """Act on health verdicts and refusals reported since the last call (the follower's thread
        does this; call it yourself when the follower runs without one)."""
        while True:
            try:
                action = self._actions.get_nowait()
            except queue.Empty:
                break
            with self._lock:
                if action[0] == "reject":
                    self._reject(action[1], action[2])
                elif action[0] == "verdict":
                    self._judged(action[1])
        if self._held is not None:
            with self._lock:
                self._place_held()

    def _judged(self, v: HealthVerdict) -> None:
        details: dict[str, Any] = {"trial": v.trial.to_dict(), "baseline": v.baseline.to_dict()}
        if v.health is Health.REGRESSED:
            self._reject(v.version, f"health regressed on trial: {v.reason}", **details)
            return
        if self.state.trial is not None and self.state.trial.version == v.version:
            self.state.trial = None
            self._save()
        self.phase = Phase.SERVING
        self._emit("healthy", version=v.version, reason=v.reason, **details)

    # --- following the channel ------------------------------------------------------------
    def sync(self) -> Outcome:
        """Check the channel once and install what it selects for this device (blocking)."""
        with self._lock:
            try:
                outcome = self._sync()
            except TransferError as exc:
                self._failed(str(exc), refused=isinstance(exc, TooLarge))
                return Outcome.FAILED
            except (SignatureError, ManifestError, VerificationError, ModelError) as exc:
                self._failed(str(exc), refused=True)
                return Outcome.FAILED
            if outcome in (Outcome.UP_TO_DATE, Outcome.NOT_SELECTED) and self.phase is Phase.FAILED:
                self.phase, self.pending = Phase.SERVING, None
            return outcome

    def _sync(self) -> Outcome:
        channel = self.reader.read(self.state.serial)
        if channel is None and self.channel is not None and self.phase is not Phase.FAILED:
            return Outcome.UNCHANGED
        if channel is not None:
            self.channel = channel
            if (listen := getattr(self.publisher, "listen", None)) is not None:  # the release names the topic
                listen(self.s.notification_topic_for(channel.name))
            if channel.serial > self.state.serial:
                self.state.serial = channel.serial
                self._save()
        if self.channel is None:
            return Outcome.UNCHANGED
        return self._follow(self.channel)

    def _follow(self, channel: Channel) -> Outcome:
        target, installed = channel.version, self.versions.find()
        if channel.halted:
            if target in installed:
                self._reject(target, "halted by the release (edgekit release --halt)")
            elif self._held == target:
                self._drop_held()
            return Outcome.HALTED
        want: int | None = target if selected(self.device, channel.rollout, target) else None
        if want is None and not installed:  # a new device outside the rollout: the release before
            earlier = [v for v in channel.releases if v < target and v not in self.state.rejected]
            want = max(earlier) if earlier else None
        if want is None:
            return Outcome.NOT_SELECTED
        if want in self.state.rejected:
            return Outcome.REJECTED
        if want in installed or (installed and want < max(installed)):
            return Outcome.UP_TO_DATE
        if self._held is not None and self._held != want:
            self._drop_held()  # the channel moved on while that version waited for its baseline
        if self._held == want:
            return Outcome.INSTALLED if self._place_held() else Outcome.HELD
        if self._failures.get((channel.serial, want), 0) >= 3:
            return Outcome.FAILED  # given up until the channel changes
        self._install(channel, want)
        return Outcome.INSTALLED if self._place_held() else Outcome.HELD

    def _install(self, channel: Channel, version: int) -> None:
        self.pending, self.phase = version, Phase.DOWNLOADING
        self.publish_status()
        try:
            manifest = self.staging.fetch(channel, version)
        except REFUSED:
            # bad bytes (deleted): after three such tries not fetched again until the channel changes
            self._failures[(channel.serial, version)] = self._failures.get((channel.serial, version), 0) + 1
            raise
        # a broken transfer (TransferError) keeps what arrived: every later sync resumes it
        with self._state_lock:
            self.state.trial = VersionTrial(version, self.serving, TrialPhase.SELFTEST)
        self._save()
        self.phase = Phase.TESTING
        try:
            self.selftest = {"version": version, **self.staging.self_test(version).to_dict(), "passed": True}
        except ModelError as exc:
            self.versions.drop(version)
            self.selftest = {"version": version, "cases": None, "passed": False, "reason": str(exc)}
            self._reject(version, f"golden self-test failed: {exc}", action="refused")
            raise
        with self._state_lock:
            if self.state.trial is not None:
                self.state.trial.phase = TrialPhase.HELD
        self._save()
        self._held, self._held_manifest = version, manifest
        self.phase = Phase.BASELINE

    def _place_held(self) -> bool:
        """Rename the held version into the folder (the watcher then switches to it) once it can be
        judged: on a first install at once (nothing to compare with or return to), else only when
        the cell has reported the version it serves, that version has a full baseline of frames
        and no other trial runs. Returns whether it was placed."""
        version, manifest = self._held, self._held_manifest
        if version is None or manifest is None:
            return False
        installed = self.versions.find()
        if installed and (self.serving is None or not self.health.baseline_ready or self.health.on_trial is not None):
            if self.phase is not Phase.BASELINE:
                self.phase = Phase.BASELINE
                self.publish_status()
            return False
        previous = self.serving if installed else None
        self.versions.promote(version)
        self._held = self._held_manifest = None
        with self._state_lock:  # a first version has nothing to compare with or return to: no trial
            self.state.trial = VersionTrial(version, previous, TrialPhase.INSTALLED) if previous is not None else None
        self._save()
        self.phase, self.pending = Phase.INSTALLED, None
        self._emit("installed", version=version, previous=previous, files=len(manifest.files),
                   bytes=manifest.total_size, baseline=self.health.baseline_frames if previous else 0,
                   selftest=self.selftest)
        self.versions.prune(self.s.keep_versions,
                            (self.serving, self.state.trial.previous if self.state.trial else None))
        return True

    def _drop_held(self) -> None:
        if self._held is not None:
            self.versions.drop(self._held)
            with self._state_lock:
                if self.state.trial is not None and self.state.trial.version == self._held:
                    self.state.trial = None
            self._save()
            self._held = self._held_manifest = self.pending = None

    def vet(self, folder: Path) -> str | None:
        """Why the serving loop must not load this version folder (its files differ from the signed
        manifest, or it has none: not from the channel), or None. For ModelWatcher(vet=)."""
        return local_problem(folder, self.key)

    # --- rolling back and reporting --------------------------------------------------------
    def _reject(self, version: int, reason: str, action: str = "rollback", **details: Any) -> None:
        others = [v for v in self.versions.find() if v != version]
        if not (others or action == "refused") and self.versions.folder(version).exists():
            reason += "; no earlier version to roll back to, so it keeps serving"
        else:
            self.versions.reject(version)  # the watcher sees it gone and returns to the highest left
        with self._state_lock:
            self.state.rejected[version] = reason
            if self.state.trial is not None and self.state.trial.version == version:
                self.state.trial = None
        self._save()
        self.health.switched(self.serving or 0, trial=False)
        self.last_error, self.pending = reason, None
        self.phase = Phase.ROLLED_BACK if action == "rollback" else Phase.FAILED
        log.error("model version %d %s: %s", version, "rolled back" if action == "rollback" else "refused", reason)
        self._emit(action, version=version, to=max(others) if others else None, reason=reason, **details)

    def _failed(self, reason: str, refused: bool = False) -> None:
        self.last_error, self.phase = reason, Phase.FAILED
        log.error("following %s: %s", self.s.channel, reason)
        if refused:
            self._emit("refused", version=self.pending, reason=reason)
        self.publish_status()

    def _emit(self, action: str, **payload: Any) -> None:
        event = {"action": action, "device": self.device, **payload}
        for sink in (self.on_event, getattr(self.publisher, "event", None)):
            if sink is not None:
                try:
                    sink(event)
                except Exception as exc:  # noqa: BLE001 - reporting must not stop following
                    log.error("fleet event handler failed: %s", exc)
        self.publish_status()

    def _save(self) -> None:
        with self._state_lock:
            self.state.save(self._state_path)

    @property
    def downloaded(self) -> int:
        """Bytes received from the channel's server since start (refused downloads included)."""
        return self.staging.received

    def status(self) -> DeviceStatus:
        now, (t0, f0) = time.monotonic(), self._fps_mark
        fps = (self._frames - f0) / (now - t0) if now - t0 > 0.5 else None
        if fps is not None:
            self._fps_mark = (now, self._frames)
        return DeviceStatus(device=self.device, state=self.phase.value, running=self.serving, pending=self.pending,
                            last_error=self.last_error, fps=round(fps, 1) if fps is not None else None,
                            uptime_s=round(now - self._started, 1),
                            channel=self.channel.name if self.channel is not None else self.s.channel_name,
                            downloaded_bytes=self.downloaded, selftest=self.selftest, updated=time.time())

    def publish_status(self) -> None:
        if self.publisher is not None:
            self.publisher.publish(self.status())
