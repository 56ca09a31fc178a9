"""A tiny sd_notify: tell systemd we are ready, alive (watchdog) and stopping. No dependency.

systemd passes a unix datagram socket in ``$NOTIFY_SOCKET`` to a ``Type=notify`` service and,
with ``WatchdogSec=``, the interval in ``$WATCHDOG_USEC``. A service that stops pinging
within that interval is killed and, with ``Restart=on-failure``, started again: so ping
from the loop that does the work, never from a timer thread that would outlive a hang.
Outside systemd every call is a cheap no-op.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Callable

__all__ = ["notify", "Watchdog"]


def notify(state: str, *, env: dict[str, str] | None = None) -> bool:
    """Send one sd_notify message ("READY=1", "WATCHDOG=1", "STOPPING=1", "STATUS=...").

    Returns False (and does nothing) when not run by systemd; never raises for a socket
    that went away, because a notification is advice, not work.
    """
    environ = os.environ if env is None else env
    address = environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # an abstract-namespace socket
    elif not address.startswith("/"):
        return False  # vsock and other schemes: not used on the devices edgekit targets
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
        return True
    except OSError:
        return False


class Watchdog:
    """Pings systemd's watchdog at half its interval, however often :meth:`ping` is called.

    Call :meth:`ping` once per processed frame; it sends at most one datagram per half
    interval. ``enabled`` is False outside a service with ``WatchdogSec=``.
    """

    def __init__(self, *, env: dict[str, str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        environ = dict(os.environ if env is None else env)
        self._env = environ
        self._clock = clock
        self.interval = _watchdog_interval(environ)
        self.enabled = self.interval is not None and bool(environ.get("NOTIFY_SOCKET"))
        self._last = float("-inf")
        self.sent = 0

    def ready(self, status: str = "") -> None:
        """Tell systemd start-up is complete (Type=notify waits for this)."""
        notify("READY=1" + (f"\nSTATUS={status}" if status else ""), env=self._env)

    def status(self, text: str) -> None:
        notify(f"STATUS={text}", env=self._env)

    def ping(self) -> None:
        if not self.enabled or self.interval is None:  # (enabled means an interval is set)
            return
        now = self._clock()
        if now - self._last >= self.interval / 2:
            if notify("WATCHDOG=1", env=self._env):
                self.sent += 1
            self._last = now

    def stopping(self) -> None:
        notify("STOPPING=1", env=self._env)


def _watchdog_interval(env: dict[str, str]) -> float | None:
    """WATCHDOG_USEC in seconds, if it is meant for this process (WATCHDOG_PID, when set)."""
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    pid = env.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):
        return None
    return usec / 1e6 if usec > 0 else None
