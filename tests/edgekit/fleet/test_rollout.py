"""Twenty devices on localhost follow one channel over HTTP: a staged release reaches exactly the
devices its fraction selects, widening reaches the rest without a second download on the first
ones, and a release whose health regresses rolls back on its canaries and never reaches the others."""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from edgekit.fleet.release import set_rollout, write_release
from tests.edgekit.fleet.conftest import Device, Kit, wait_until

pytestmark = pytest.mark.slow


def bucket(device: str, version: int) -> float:
    """The rollout bucket as the channel format defines it: SHA-256 of "<id>/<version>", first 8 bytes."""
    return int.from_bytes(hashlib.sha256(f"{device}/{version}".encode()).digest()[:8], "big") / 2.0**64


def test_staged_rollout_widening_and_rollback_on_canaries(kit: Kit, tmp_path: Path) -> None:
    folder = kit.www / "line1"
    write_release(kit.model, 1, folder, kit.key, golden=kit.golden)
    names = [f"line1-{i:02d}" for i in range(20)]
    devices = [Device(n, tmp_path / n, kit.settings("line1"), kit.images) for n in names]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda d: d.start(), devices))
    try:
        assert [d.serving for d in devices] == [1] * 20
        canaries = {n for n in names if bucket(n, 2) < 0.25}
        assert 0 < len(canaries) < 20
        first = [d for d in devices if d.name in canaries]
        rest = [d for d in devices if d.name not in canaries]

        write_release(kit.model, 2, folder, kit.key, rollout=0.25, golden=kit.golden)
        wait_until(lambda: all(d.serving == 2 for d in first), what="the canaries to serve version 2")
        wait_until(lambda: all(any(e["action"] == "healthy" and e["version"] == 2 for e in d.events) for d in first),
                   what="version 2's trial to pass on the canaries")
        time.sleep(1.0)  # three more polls of every device
        assert {d.name for d in devices if 2 in d.installed()} == canaries
        assert all(d.serving == 1 and 2 not in d.served for d in rest)

        size = (folder / "versions" / "2" / "model.tflite").stat().st_size
        before = {d.name: d.follower.downloaded for d in devices}
        set_rollout(folder, 2, kit.key, rollout=1.0)
        wait_until(lambda: all(d.serving == 2 for d in devices), what="every device to serve version 2")
        for d in first:  # already had it: only the new channel document came over the wire
            assert d.follower.downloaded - before[d.name] < 0.05 * size
        for d in rest:
            assert d.follower.downloaded - before[d.name] >= size

        first = [d for d in devices if bucket(d.name, 3) < 0.25]  # version 3 draws its own canaries
        rest = [d for d in devices if bucket(d.name, 3) >= 0.25]
        assert first and rest and {d.name for d in first} != canaries
        write_release(kit.bad_model, 3, folder, kit.key, rollout=0.25, golden=kit.golden)
        wait_until(lambda: all(any(e["action"] == "rollback" and e["version"] == 3 for e in d.events) for d in first),
                   timeout=30, what="the canaries to roll version 3 back")
        for d in first:
            event = next(e for e in d.events if e["action"] == "rollback" and e["version"] == 3)
            assert event["to"] == 2 and "health regressed" in event["reason"]
            assert "FAIL rate" in event["reason"] or "mean top score" in event["reason"]
            assert event["trial"]["fail_rate"] > event["baseline"]["fail_rate"]
            assert 3 in d.served  # it did serve, on trial, before the rollback
        wait_until(lambda: all(d.serving == 2 and 3 not in d.installed() for d in first),
                   what="the canaries to serve version 2 again")
        statuses = [d.follower.status() for d in first]
        assert all(s.state == "rolled_back" and "health regressed" in (s.last_error or "") for s in statuses)

        set_rollout(folder, 3, kit.key, halted=True)  # the operator stops it; widening a halted one does nothing
        set_rollout(folder, 3, kit.key, rollout=1.0)
        time.sleep(1.2)
        assert all(d.serving == 2 and 3 not in d.installed() and 3 not in d.served for d in rest)
        assert all(d.serving == 2 for d in first)
    finally:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda d: d.stop(), devices))
