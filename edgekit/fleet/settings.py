"""What a device following a release channel is told: the ``[model]`` channel keys and ``[fleet]``.

::

    [model]
    dir = "models/inspection"                       # the versioned folder the cell serves
    channel = "https://releases.example.com/line1/channel.json"
    public_key = "ed25519:8Jt1...="                 # signing.pub from edgekit keygen

    [fleet]                                         # all optional
    poll_seconds = 300      # jittered by +-jitter; an MQTT notification wakes the device sooner
    jitter = 0.2
    notify_spread = 1.0     # seconds woken devices spread their fetches over (stretch it with the fleet)
    broker = "10.0.0.5:1883"  # status and notifications (default: [sinks.mqtt]'s broker, if any)
    health_window = 300     # frames a new version serves on trial
    health_baseline = 900   # frames of the serving version it is compared with, collected before it is placed
    max_fail_rate_increase = 0.2
    max_score_shift = 0.15
    max_errors = 3
    max_download_mb = 512
    keep_versions = 3

There is no switch that turns verification off. ``trust = "unsigned-local"`` (instead of a
public key) accepts an unsigned channel only from a ``file://`` folder on the device itself; the
SHA-256 of every file is still checked.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from edgekit.errors import ConfigError
from edgekit.fleet.health import HealthThresholds
from edgekit.inspect.schema import FRACTION, NONNEG_INT, POS_INT, POS_NUM, Constraint, Section, Setting

__all__ = ["Trust", "FleetSettings", "channel_topic", "parse_fleet", "parse_broker"]


class Trust(str, enum.Enum):
    SIGNED = "signed"
    UNSIGNED_LOCAL = "unsigned-local"


@dataclass(frozen=True)
class FleetSettings:
    channel: str
    public_key: str | None = field(default=None, repr=False)  # public, but long; its id is what we show
    trust: Trust = Trust.SIGNED
    poll_seconds: float = 300.0
    jitter: float = 0.2
    notify_spread: float = 1.0  # seconds over which devices woken by one notification spread their fetches
    broker: tuple[str, int] | None = None
    topic_prefix: str = "edgekit"
    notify_topic: str | None = None  # default: channel_topic(the channel's name), see notification_topic_for
    health: HealthThresholds = field(default_factory=HealthThresholds)
    max_download_bytes: int = 512 << 20
    keep_versions: int = 3
    timeout: float = 10.0

    def __post_init__(self) -> None:
        from edgekit.fleet.transport import TransferError, url_kind

        try:
            kind = url_kind(self.channel)
        except TransferError as exc:
            raise ConfigError(str(exc)) from None
        if self.trust is Trust.UNSIGNED_LOCAL and kind != "file":
            raise ConfigError(f"trust = \"unsigned-local\" is for a file:// channel on the device itself; "
                              f"{kind}:// channels need public_key (edgekit keygen writes it)")
        if self.trust is Trust.SIGNED and not self.public_key:
            raise ConfigError("a channel needs public_key = \"ed25519:...\" (the .pub file edgekit keygen wrote)")
        if self.public_key:
            from edgekit.fleet.keys import parse_public_key

            parse_public_key(self.public_key)
        _FLEET.check(self, "fleet")

    @property
    def channel_name(self) -> str:
        """The channel's name before its signed channel.json is read: its URL's folder (which is also
        the name `edgekit release` gives a channel without --channel)."""
        parts = [p for p in self.channel.split("?")[0].split("/") if p]
        return parts[-2] if len(parts) >= 2 else "default"

    @property
    def notification_topic(self) -> str:
        return self.notification_topic_for(None)

    def notification_topic_for(self, name: str | None) -> str:
        """The topic a release of the channel named ``name`` (the signed channel's own, once read; None:
        :attr:`channel_name`) notifies this device on: the one ``edgekit release --mqtt`` publishes to."""
        return self.notify_topic or channel_topic(name or self.channel_name, self.topic_prefix)


def channel_topic(channel_name: str, prefix: str = FleetSettings.topic_prefix) -> str:
    """The MQTT topic a release notifies the devices of channel ``channel_name`` on (retained)."""
    return f"{prefix}/channel/{channel_name}"


def parse_broker(text: str) -> tuple[str, int]:
    """'HOST:PORT' or 'HOST' (1883).

    Raises:
        ConfigError: a port that is not 1-65535.
    """
    host, _, port = text.rpartition(":") if ":" in text else (text, "", "1883")
    try:
        number = int(port)
    except ValueError:
        number = 0
    if not host or not 0 < number < 65536:
        raise ConfigError(f"a broker is HOST:PORT like 127.0.0.1:1883, got {text!r}")
    return host, number


# The wing's sections of the inspection file: its [model] keys, [fleet], and [fleet]'s health_* keys
# (the defaults are FleetSettings' and HealthThresholds').
_MODEL_KEYS = Section(FleetSettings, {
    "channel": Setting(str, doc="an https:// or file:// URL of a channel.json"), "public_key": Setting(str),
    "trust": Setting(Trust, doc="\"unsigned-local\" (or leave it out: signed)")})
_HEALTH = Section(HealthThresholds, {
    "window": Setting(int, POS_INT, key="health_window"), "baseline": Setting(int, POS_INT, key="health_baseline"),
    "max_fail_rate_increase": Setting(float, FRACTION), "max_score_shift": Setting(float, FRACTION),
    "max_errors": Setting(int, NONNEG_INT)})
_FLEET = Section(FleetSettings, {
    "poll_seconds": Setting(float, POS_NUM), "jitter": Setting(float, FRACTION),
    "notify_spread": Setting(float, POS_NUM), "broker": Setting(str, convert=parse_broker),
    "topic_prefix": Setting(str), "notify_topic": Setting(str),
    "max_download_bytes": Setting(float, POS_NUM, key="max_download_mb", convert=lambda mb: int(mb * (1 << 20))),
    "keep_versions": Setting(int, Constraint(lambda v: v >= 2, "an integer >= 2 (the serving version and the one "
                                                               "to roll back to)")),
    "timeout": Setting(float, POS_NUM)}, extra_keys=_HEALTH.keys)


def parse_fleet(model: Any, fleet: Any, default_broker: tuple[str, int] | None) -> FleetSettings | None:
    """The settings from the config's ``[model]`` and ``[fleet]`` tables (tomlpos Tables; `fleet`
    may be None); None when ``[model]`` names no channel.

    Raises:
        ConfigError: naming the key and line.
    """
    if not model.has("channel"):
        if fleet is not None or model.has("public_key") or model.has("trust"):
            raise model.error("channel", "public_key, trust and [fleet] need [model] channel = \"https://...\"")
        return None
    if not model.has("dir"):
        raise model.error("channel", "a channel fills a versioned folder: give [model] dir, not path")
    kw = _MODEL_KEYS.read_values(model, allow=None)
    if fleet is not None:
        kw.update(_FLEET.read_values(fleet, defaults={"broker": default_broker}),
                  health=_HEALTH.read(fleet, allow=None))
    kw.setdefault("broker", default_broker)
    try:
        return FleetSettings(**kw)
    except ConfigError as exc:
        raise model.error("channel", str(exc)) from None
