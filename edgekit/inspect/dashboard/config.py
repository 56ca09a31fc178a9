"""The ``[dashboard]`` table of an inspection config, and the access token it asks for.

::

    [dashboard]                    # the operator's page: live view, last parts, counters, health
    port = 8080
    host = "127.0.0.1"             # the default; any other address needs a token
    token_env = "EDGEKIT_DASHBOARD_TOKEN"   # the token, from this environment variable
    max_fps = 5                    # the live view's rate (the loop never waits for it)
    max_width = 960                # the live view is scaled down to this width
    shifts = ["06:00", "14:00", "22:00"]    # local start times; counters per current shift
    trigger = false                # on-demand cells: a token-protected POST /api/trigger

Errors name the file, line and key, like the rest of the config.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from dataclasses import dataclass
from typing import Mapping

from edgekit.errors import ConfigError
from edgekit.inspect.schema import POS_INT, Constraint, Section, Setting, between, check_values, setting
from edgekit.inspect.tomlpos import Table

__all__ = ["DashboardConfig", "TokenSource", "is_local", "parse_dashboard", "resolve_token"]

_CLOCK = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


class TokenSource:
    """Where the token came from: it is printed at start only when edgekit made it up."""

    NONE = "none"
    ENVIRONMENT = "environment"
    GENERATED = "generated"


@dataclass(frozen=True)
class DashboardConfig:
    """Where the dashboard listens and what it shows.

    ``token`` is the value (never shown in any response or log when it came from the environment);
    ``token_source`` says where it came from (:class:`TokenSource`). ``shifts`` are local start times
    in minutes after midnight, sorted.

    Raises:
        ConfigError: a value out of range, or a non-local bind or trigger without a token.
    """

    # the file's port is a real one (1-65535); Python's may be 0: the system picks a free one (tests, benchmarks)
    port: int = setting(int, check=Constraint(lambda v: 0 < v < 65536, "a port number 1-65535 (e.g. 8080)"))
    host: str = setting(str, "127.0.0.1", Constraint(lambda v: bool(v.strip()), "an address to bind"))
    token: str | None = None
    token_source: str = TokenSource.NONE
    max_fps: float = setting(float, 5.0, Constraint(lambda v: 0 < v <= 60, "frames per second in (0, 60]"))
    max_width: int = setting(int, 960, between(64, 4096, "pixels, 64-4096"))
    quality: int = setting(int, 75, between(10, 100, "a JPEG quality 10-100"))
    # local start times in the file ("06:00"), minutes after midnight here
    shifts: tuple[int, ...] = setting(list, (0,), Constraint(lambda v: bool(v) and all(
        isinstance(s, str) and _CLOCK.match(s) for s in v), 'an array of "HH:MM" shift start times'),
        convert=lambda v: tuple(_minutes(s) for s in v))
    trigger: bool = setting(bool, False)
    title: str = setting(str, "")
    recent: int = setting(int, 200, POS_INT)  # parts and events kept for the page and the API

    def __post_init__(self) -> None:
        if not 0 <= self.port < 65536:
            raise ConfigError(f"dashboard port must be 0-65535, got {self.port}")
        check_values(self, "dashboard", skip=("port",))
        if not self.shifts or any(not 0 <= s < 1440 for s in self.shifts):
            raise ConfigError(f"dashboard shifts must be minutes after midnight (0-1439), got {self.shifts}")
        object.__setattr__(self, "shifts", tuple(sorted(set(self.shifts))))
        if not is_local(self.host) and not self.token:
            raise ConfigError(f"the dashboard binds {self.host}, which other machines reach: it needs a token "
                              "(token_env = \"EDGEKIT_DASHBOARD_TOKEN\", or resolve_token() to make one)")
        if self.trigger and not self.token:
            raise ConfigError("the dashboard's trigger endpoint needs a token (token_env = \"...\")")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def is_local(host: str) -> bool:
    """True for a loopback address or ``localhost``: only this machine can connect."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_token(host: str, env: Mapping[str, str], name: str | None = None) -> tuple[str | None, str]:
    """The token for a bind on ``host``: from the environment variable ``name`` when it is given
    (and set), else a random one when ``host`` is not local, else none. Returns (token, source).

    Raises:
        ConfigError: ``name`` is given but not set, or its value is shorter than 16 characters.
    """
    if name is not None:
        value = env.get(name)
        if value is None:
            raise ConfigError(f"environment variable {name} is not set (systemd: Environment= or EnvironmentFile= "
                              "in the unit)")
        if len(value) < 16:
            raise ConfigError(f"the dashboard token in {name} is {len(value)} characters long; use at least 16 "
                              "(python -c 'import secrets; print(secrets.token_urlsafe())')")
        return value, TokenSource.ENVIRONMENT
    if not is_local(host):
        return secrets.token_urlsafe(24), TokenSource.GENERATED
    return None, TokenSource.NONE


def _minutes(text: str) -> int:
    m = _CLOCK.match(text)
    if m is None:
        raise ValueError(text)
    return int(m.group(1)) * 60 + int(m.group(2))


_TOKEN_ENV = Constraint(lambda v: bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v)),
                        "the name of an environment variable")
_SECTION = Section(DashboardConfig, {"token_env": Setting(str, _TOKEN_ENV, default=None)})


def parse_dashboard(t: Table, *, on_demand: bool) -> DashboardConfig:
    """The ``[dashboard]`` table (``on_demand``: the cell takes triggers, so ``trigger`` may be on).

    Raises:
        ConfigError: naming the file, line and key.
    """
    kw = _SECTION.read_values(t)
    if kw["trigger"] and not on_demand:
        raise t.error("trigger", "needs [trigger] mode = \"on-demand\" (a continuous cell judges every frame)")
    try:
        kw["token"], kw["token_source"] = resolve_token(kw["host"], t.ctx.env, kw.pop("token_env"))
    except ConfigError as exc:
        raise t.error("token_env", str(exc)) from None
    if kw["trigger"] and kw["token"] is None:
        raise t.error("trigger", "the trigger endpoint needs a token: set token_env = \"EDGEKIT_DASHBOARD_TOKEN\"")
    try:
        return DashboardConfig(**kw)
    except ConfigError as exc:
        raise t.error(None, str(exc)) from None
