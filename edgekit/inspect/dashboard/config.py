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
from typing import Any, Mapping

from edgekit.errors import ConfigError
from edgekit.inspect.tomlpos import PORT, POS_INT, Table

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

    port: int
    host: str = "127.0.0.1"
    token: str | None = None
    token_source: str = TokenSource.NONE
    max_fps: float = 5.0
    max_width: int = 960
    quality: int = 75
    shifts: tuple[int, ...] = (0,)
    trigger: bool = False
    title: str = ""
    recent: int = 200  # parts and events kept for the page and the API

    def __post_init__(self) -> None:
        if not 0 <= self.port < 65536:
            raise ConfigError(f"dashboard port must be 0-65535, got {self.port}")
        if not 0 < self.max_fps <= 60 or not 64 <= self.max_width <= 4096 or not 10 <= self.quality <= 100:
            raise ConfigError(f"dashboard max_fps must be in (0, 60], max_width 64-4096 and quality 10-100; got "
                              f"{self.max_fps}, {self.max_width}, {self.quality}")
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


def parse_dashboard(t: Table, *, on_demand: bool) -> DashboardConfig:
    """The ``[dashboard]`` table (``on_demand``: the cell takes triggers, so ``trigger`` may be on).

    Raises:
        ConfigError: naming the file, line and key.
    """
    t.allow("port", "host", "token_env", "max_fps", "max_width", "quality", "shifts", "trigger", "title", "recent")
    port = t.get("port", int, expect="a port number 1-65535 (e.g. 8080)", check=PORT["check"])
    host = t.get("host", str, "127.0.0.1", check=lambda v: bool(v.strip()), expect="an address to bind")
    env_name = t.get("token_env", str, None, check=lambda v: bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v)),
                     expect="the name of an environment variable")
    shifts_raw = t.get("shifts", list, ["00:00"], check=lambda v: bool(v) and all(
        isinstance(s, str) and _CLOCK.match(s) for s in v), expect='an array of "HH:MM" shift start times')
    trigger = t.get("trigger", bool, False)
    if trigger and not on_demand:
        raise t.error("trigger", "needs [trigger] mode = \"on-demand\" (a continuous cell judges every frame)")
    try:
        token, source = resolve_token(host, t.ctx.env, env_name)
    except ConfigError as exc:
        raise t.error("token_env", str(exc)) from None
    if trigger and token is None:
        raise t.error("trigger", "the trigger endpoint needs a token: set token_env = \"EDGEKIT_DASHBOARD_TOKEN\"")
    kw: dict[str, Any] = dict(
        port=port, host=host, token=token, token_source=source,
        max_fps=t.get("max_fps", float, 5.0, check=lambda v: 0 < v <= 60, expect="frames per second in (0, 60]"),
        max_width=t.get("max_width", int, 960, check=lambda v: 64 <= v <= 4096, expect="pixels, 64-4096"),
        quality=t.get("quality", int, 75, check=lambda v: 10 <= v <= 100, expect="a JPEG quality 10-100"),
        shifts=tuple(_minutes(s) for s in shifts_raw), trigger=trigger, title=t.get("title", str, ""),
        recent=t.get("recent", int, 200, **POS_INT))
    try:
        return DashboardConfig(**kw)
    except ConfigError as exc:
        raise t.error(None, str(exc)) from None

