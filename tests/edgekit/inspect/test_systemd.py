"""edgekit.inspect.systemd: the sd_notify client the Raspberry Pi unit relies on (READY=1, watchdog)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from edgekit.inspect.systemd import Watchdog, notify


@pytest.fixture
def notify_socket(tmp_path: Path) -> Any:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.settimeout(1)
    yield sock, str(tmp_path / "notify")
    sock.close()


def test_notify_sends_datagrams(notify_socket: Any) -> None:
    sock, path = notify_socket
    assert notify("READY=1\nSTATUS=warming up", env={"NOTIFY_SOCKET": path})
    assert sock.recv(100) == b"READY=1\nSTATUS=warming up"


def test_notify_abstract_socket() -> None:
    name = f"edgekit-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(1)
        assert notify("WATCHDOG=1", env={"NOTIFY_SOCKET": "@" + name})
        assert sock.recv(100) == b"WATCHDOG=1"


@pytest.mark.parametrize("env", [{}, {"NOTIFY_SOCKET": "/nonexistent/socket"}, {"NOTIFY_SOCKET": "vsock:2:9"}])
def test_notify_outside_systemd_is_a_no_op(env: dict[str, str]) -> None:
    assert notify("READY=1", env=env) is False


def test_watchdog_pings_at_half_the_interval(notify_socket: Any) -> None:
    sock, path = notify_socket
    now = [100.0]
    wd = Watchdog(env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"}, clock=lambda: now[0])
    assert wd.enabled and wd.interval == 2.0
    for t in (100.0, 100.5, 100.99, 101.0, 101.5, 102.1):  # called per frame
        now[0] = t
        wd.ping()
    assert wd.sent == 3  # at 100.0, 101.0 and 102.1
    assert [sock.recv(100) for _ in range(3)] == [b"WATCHDOG=1"] * 3


@pytest.mark.parametrize("env", [
    {"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"},  # meant for another process
    {"NOTIFY_SOCKET": "/x"},
    {"WATCHDOG_USEC": "2000000"},
    {"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "soon"},
])
def test_watchdog_disabled(env: dict[str, str]) -> None:
    assert not Watchdog(env=env).enabled
