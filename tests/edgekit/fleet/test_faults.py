"""What must never reach a running model: a tampered file, a wrong signature, a truncated download,
a server that dies mid-download, a device restarted mid-update. Each is refused or resumed, and
the version that served before serves on."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

from edgekit.fleet.follower import Outcome
from edgekit.fleet.keys import generate_key, load_signing_key
from edgekit.fleet.release import set_rollout, write_release
from edgekit.fleet.transport import url_kind
from tests.edgekit.fleet.conftest import Device, Kit, free_port, wait_until


def one_device(kit: Kit, tmp_path: Path, channel: str, url: str | None = None) -> Device:
    """A device that syncs only when the test says so (its own polls are an hour apart)."""
    settings = kit.settings(channel, poll_seconds=3600.0)
    if url is not None:
        settings = replace(settings, channel=url)
    return Device(f"{channel}-dev", tmp_path / "dev", settings, kit.images).start()


def device_on_version_1(kit: Kit, tmp_path: Path, channel: str) -> tuple[Path, Device]:
    """The channel's folder, with version 1 released, and a device (see :func:`one_device`) serving it."""
    folder = kit.www / channel
    write_release(kit.model, 1, folder, kit.key, golden=kit.golden)
    return folder, one_device(kit, tmp_path, channel)


def refused(d: Device, text: str) -> dict:
    return next(e for e in d.events if e["action"] == "refused" and text in e["reason"])


def test_a_tampered_model_is_deleted_and_reported_and_the_old_one_serves(kit: Kit, tmp_path: Path) -> None:
    folder, d = device_on_version_1(kit, tmp_path, "tamper")
    try:
        write_release(kit.model, 2, folder, kit.key, golden=kit.golden)
        model = folder / "versions" / "2" / "model.tflite"
        good = model.read_bytes()
        model.write_bytes(good[:1000] + bytes([good[1000] ^ 0xFF]) + good[1001:])  # same size, one byte flipped
        start = d.follower.downloaded
        assert d.follower.sync() is Outcome.FAILED
        assert d.follower.downloaded - start >= len(good)  # refused, but every byte of it came over the wire
        assert d.follower.status().downloaded_bytes == d.follower.downloaded
        assert "SHA-256" in refused(d, "model.tflite")["reason"]
        assert d.follower.status().state == "failed" and "tampered" in (d.follower.status().last_error or "")
        assert not any(p.name.startswith(".staging") for p in d.model_dir.iterdir())
        assert d.installed() == {1} and d.serving == 1
        assert d.follower.sync() is Outcome.FAILED and d.follower.sync() is Outcome.FAILED  # tries 2 and 3
        before = d.follower.downloaded
        model.write_bytes(good)  # the operator uploads it again...
        assert d.follower.sync() is Outcome.FAILED  # ...but after three bad copies the device waits
        # for a new channel: at most the channel again (written within the second of the last GET, it
        # has no validator to trust), not the model
        assert d.follower.downloaded - before < 5_000
        set_rollout(folder, 2, kit.key, rollout=1.0)  # any release command writes one
        assert d.sync() is Outcome.INSTALLED
        wait_until(lambda: d.serving == 2, what="version 2 to serve")
    finally:
        d.stop()


@pytest.mark.parametrize("forge", ["other_key", "edited_channel"])
def test_a_channel_with_a_wrong_signature_is_refused(kit: Kit, tmp_path: Path, forge: str) -> None:
    folder, d = device_on_version_1(kit, tmp_path, f"sig-{forge}")
    try:
        if forge == "other_key":  # a release signed by a key this device does not trust
            generate_key(tmp_path / "other.key")
            write_release(kit.model, 2, folder, load_signing_key(tmp_path / "other.key"), golden=kit.golden)
        else:  # a server that rewrites the channel to push version 2 to everyone
            write_release(kit.model, 2, folder, kit.key, rollout=0.0, golden=kit.golden)
            channel = folder / "channel.json"
            channel.write_bytes(channel.read_bytes().replace(b'"rollout":0.0', b'"rollout":1.0'))
        assert d.follower.sync() is Outcome.FAILED
        assert "signature does not match" in refused(d, "channel.json")["reason"]
        assert d.installed() == {1} and d.serving == 1
        assert 2 not in d.served
    finally:
        d.stop()


def test_a_truncated_download_is_resumed_where_it_broke_off(kit: Kit, tmp_path: Path) -> None:
    folder, d = device_on_version_1(kit, tmp_path, "trunc")
    try:
        write_release(kit.model, 2, folder, kit.key, golden=kit.golden)
        size = (folder / "versions" / "2" / "model.tflite").stat().st_size
        kit.server.faults["/trunc/versions/2/model.tflite"] = "truncate"  # type: ignore[attr-defined]
        before = d.follower.downloaded
        assert d.follower.sync() is Outcome.FAILED
        assert "truncated" in (d.follower.last_error or "")
        part = d.model_dir / ".staging-2" / "model.tflite.part"
        assert 0 < part.stat().st_size < size and d.serving == 1
        assert d.sync() is Outcome.INSTALLED
        transferred = d.follower.downloaded - before
        assert size < transferred < size * 1.2  # the second request asked only for the rest
        wait_until(lambda: d.serving == 2, what="version 2 to serve")
    finally:
        d.stop()


class SlowServer:
    """`python -m edgekit.fleet.serve` in its own process (so it can be killed), at `rate` bytes/s."""

    def __init__(self, folder: Path, rate: float | None) -> None:
        self.folder, self.port = folder, free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.start(rate)

    def start(self, rate: float | None) -> None:
        cmd = [sys.executable, "-m", "edgekit.fleet.serve", str(self.folder), "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd + (["--rate", str(rate)] if rate else []), stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        assert b"serving" in self.proc.stdout.readline()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/channel.json"


@pytest.fixture
def slow(kit: Kit, tmp_path: Path) -> Iterator[SlowServer]:
    folder = tmp_path / "www"
    write_release(kit.model, 1, folder, kit.key, golden=kit.golden)
    server = SlowServer(folder, rate=None)
    yield server
    server.kill()


def _partial(d_model_dir: Path) -> int:
    part = d_model_dir / ".staging-2" / "model.tflite.part"
    return part.stat().st_size if part.exists() else 0


def test_a_server_that_dies_mid_download_is_resumed_after_it_returns(kit: Kit, tmp_path: Path, slow: SlowServer) -> None:
    d = one_device(kit, tmp_path, "slow", url=slow.url)
    try:
        write_release(kit.model, 2, slow.folder, kit.key, golden=kit.golden)
        size = (slow.folder / "versions" / "2" / "model.tflite").stat().st_size
        slow.kill()
        slow.start(rate=400_000)  # about 1.3 s for the model
        before = d.follower.downloaded
        outcome: list[Outcome] = []
        t = threading.Thread(target=lambda: outcome.append(d.follower.sync()))
        t.start()
        wait_until(lambda: _partial(d.model_dir) > 50_000, what="the download to be under way")
        slow.kill()
        t.join(20)
        assert outcome == [Outcome.FAILED] and d.serving == 1 and d.installed() == {1}
        have = _partial(d.model_dir)
        assert 0 < have < size
        slow.start(rate=None)
        assert d.sync() is Outcome.INSTALLED
        assert d.follower.downloaded - before < size * 1.2  # resumed, not started over
        wait_until(lambda: d.serving == 2, what="version 2 to serve")
    finally:
        d.stop()


CRASHY = """
import sys
from edgekit.fleet.follower import FleetFollower
from edgekit.fleet.settings import FleetSettings
s = FleetSettings(channel=sys.argv[1], public_key=sys.argv[2], poll_seconds=3600, timeout=10)
f = FleetFollower(s, device="crashy", model_dir=sys.argv[3], state_dir=sys.argv[4], isolate=False)
f.recover()
print(f.sync(), flush=True)
"""


def test_a_device_killed_mid_download_comes_back_on_a_consistent_version(kit: Kit, tmp_path: Path,
                                                                         slow: SlowServer) -> None:
    home = tmp_path / "dev"
    d = one_device(kit, tmp_path, "slow", url=slow.url)  # installs version 1 and stops cleanly
    d.stop()
    write_release(kit.model, 2, slow.folder, kit.key, golden=kit.golden)
    slow.kill()
    slow.start(rate=300_000)
    proc = subprocess.Popen([sys.executable, "-c", CRASHY, slow.url, kit.public.text, str(home / "models"),
                             str(home / "state")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _partial(home / "models") > 30_000, what="the device to be downloading")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(5)
    slow.kill()
    slow.start(rate=None)
    again = Device("slow-dev", home, d.follower.s, kit.images)
    again.follower.recover()
    assert again.installed() == {1}  # the half-downloaded version is not in the folder
    again.start()
    try:
        assert again.serving == 1
        had = _partial(home / "models")
        assert again.sync() is Outcome.INSTALLED
        total = sum(p.stat().st_size for p in (slow.folder / "versions" / "2").rglob("*") if p.is_file())
        assert again.follower.downloaded < total - had + 5_000  # the rest, not all of it again
        wait_until(lambda: again.serving == 2, what="the resumed version 2 to serve")
        assert not (home / "models" / ".staging-2").exists()
    finally:
        again.stop()


def test_a_device_that_died_during_a_trial_comes_back_on_the_previous_version(kit: Kit, tmp_path: Path) -> None:
    folder, d = device_on_version_1(kit, tmp_path, "trialcrash")
    write_release(kit.model, 2, folder, kit.key, golden=kit.golden)
    assert d.sync() is Outcome.INSTALLED
    wait_until(lambda: d.serving == 2 and d.follower.phase.value == "trial", what="version 2 on trial")
    d.stop(clean=False)  # what a segfault in the interpreter leaves behind
    again = Device("trialcrash-dev", d.home, d.follower.s, kit.images).start()
    try:
        assert again.serving == 1 and again.installed() == {1}
        event = next(e for e in again.events if e["action"] == "rollback")
        assert event["version"] == 2 and "ended during the trial" in event["reason"]
        assert again.follower.sync() is Outcome.REJECTED  # not installed again
    finally:
        again.stop()


def test_unsigned_local_trust_is_for_file_urls_only(kit: Kit, tmp_path: Path) -> None:
    from edgekit.errors import ConfigError
    from edgekit.fleet.settings import FleetSettings, Trust

    with pytest.raises(ConfigError, match="file:// channel"):
        FleetSettings(channel=kit.channel_url("x"), trust=Trust.UNSIGNED_LOCAL)
    with pytest.raises(ConfigError, match="public_key"):
        FleetSettings(channel=kit.channel_url("x"))
    folder = tmp_path / "local"
    write_release(kit.model, 1, folder, kit.key, golden=kit.golden)
    (folder / "channel.json.sig").unlink()  # a local folder: the signature is not needed, the hashes still are
    url = (folder / "channel.json").as_uri()
    assert url_kind(url) == "file"
    settings = FleetSettings(channel=url, trust=Trust.UNSIGNED_LOCAL, poll_seconds=3600)
    d = Device("local-dev", tmp_path / "dev", settings, kit.images).start()
    try:
        assert d.serving == 1
        write_release(kit.model, 2, folder, kit.key, golden=kit.golden)
        model = folder / "versions" / "2" / "model.tflite"
        data = model.read_bytes()
        model.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
        assert d.follower.sync() is Outcome.FAILED and d.serving == 1
    finally:
        d.stop()
    shutil.rmtree(folder)
    assert os.path.exists(tmp_path / "dev" / "models" / "1")


def test_a_version_folder_placed_by_hand_is_never_loaded_while_following(kit: Kit, tmp_path: Path) -> None:
    folder, d = device_on_version_1(kit, tmp_path, "byhand")
    refusals: list[dict] = []
    assert d.watcher is not None
    d.watcher._on_event = lambda kind, payload: (refusals.append(payload) if kind.value == "model_refused" else None,
                                                 d.follower.on_model_event(kind, payload))
    try:
        stray = d.model_dir / ".5.tmp"
        stray.mkdir()
        shutil.copyfile(kit.model, stray / "model.tflite")  # a real model, but unsigned
        stray.rename(d.model_dir / "5")
        wait_until(lambda: any(p["version"] == 5 for p in refusals), what="the watcher to refuse version 5")
        assert "no signed manifest" in next(p for p in refusals if p["version"] == 5)["reason"]
        time.sleep(0.3)
        assert d.serving == 1 and 5 not in d.served
    finally:
        d.stop()


def test_a_device_that_died_in_the_self_test_never_loads_that_version_again(kit: Kit, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    folder, d = device_on_version_1(kit, tmp_path, "stcrash")
    write_release(kit.model, 2, folder, kit.key, golden=kit.golden)

    def dies(version: int) -> None:  # the interpreter takes the process down while loading version 2
        raise KeyboardInterrupt

    monkeypatch.setattr(d.follower.staging, "self_test", dies)
    with pytest.raises(KeyboardInterrupt):
        d.follower.sync()
    assert (d.model_dir / ".staging-2" / "model.tflite").is_file()
    d.stop(clean=False)
    again = Device("stcrash-dev", d.home, d.follower.s, kit.images).start()
    try:
        assert again.serving == 1 and again.installed() == {1}
        assert not (d.model_dir / ".staging-2").exists()
        assert "ended during the selftest of version 2" in again.follower.state.rejected[2]
        assert again.follower.sync() is Outcome.REJECTED
    finally:
        again.stop()


@pytest.mark.parametrize("case", ["server_sends_more", "device_cap"])
def test_downloads_are_capped_by_the_signed_manifest_and_the_device(kit: Kit, tmp_path: Path, case: str) -> None:
    folder, d = device_on_version_1(kit, tmp_path, f"cap-{case}")
    try:
        write_release(kit.model, 2, folder, kit.key, golden=kit.golden)
        model = folder / "versions" / "2" / "model.tflite"
        size = model.stat().st_size
        if case == "server_sends_more":
            with open(model, "ab") as f:
                f.write(b"\0" * 4_000_000)
            message = f"more than the {size} bytes its manifest allows"
        else:
            d.follower.staging.max_bytes = size // 2  # [fleet] max_download_mb
            message = "more than the"
        before = d.follower.downloaded
        assert d.follower.sync() is Outcome.FAILED
        assert message in refused(d, "")["reason"]
        assert d.follower.downloaded - before < size + 100_000  # it stopped at the cap, not at 4 MB more
        assert not (d.model_dir / ".staging-2").exists() and d.serving == 1
    finally:
        d.stop()
