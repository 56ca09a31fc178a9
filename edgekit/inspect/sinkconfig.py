"""The [sinks.jsonl], [sinks.mqtt] and [sinks.webhook] tables of an inspection config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.errors import ConfigError
from edgekit.inspect.schema import Constraint, Section, Setting
from edgekit.inspect.tomlpos import Table
from edgekit.sinks.mqtt import MqttConfig
from edgekit.sinks.rotating import RotatingConfig
from edgekit.sinks.webhook import WebhookConfig

__all__ = ["SinksConfig", "parse_sinks"]


@dataclass(frozen=True)
class SinksConfig:
    jsonl: RotatingConfig | None = None
    mqtt: MqttConfig | None = None
    webhook: WebhookConfig | None = None


def parse_sinks(t: Table, device: str, state_dir: str) -> SinksConfig:
    """The [sinks.*] tables; a sink's own check failing is reported at its table's line."""
    t.allow(*SinksConfig.__dataclass_fields__)
    out: dict[str, Any] = {}
    for key, build in (("jsonl", _jsonl), ("mqtt", _mqtt), ("webhook", _webhook)):
        sub = t.table(key)
        if sub is not None:
            try:
                out[key] = build(sub, device, state_dir)
            except ConfigError as exc:
                if str(exc).startswith(t.ctx.name):
                    raise
                raise sub.error(None, str(exc)) from None
    return SinksConfig(**out)


# The sinks' defaults and ranges are their dataclasses' (edgekit.ranges on the fields): here only how the file spells them.
_JSONL = Section(RotatingConfig, {
    "directory": Setting(str, path=True), "prefix": Setting(str), "max_bytes": Setting(int),
    "keep": Setting(int), "fsync_every": Setting(int)})
_MQTT = Section(MqttConfig, {
    "host": Setting(str), "port": Setting(int), "username": Setting(str), "password": Setting(str),
    "password_env": Setting(str, doc="the name of an environment variable", default=None), "tls": Setting(bool),
    "ca_certs": Setting(str, path=True), "certfile": Setting(str, path=True), "keyfile": Setting(str, path=True),
    "tls_insecure": Setting(bool), "topic_prefix": Setting(str), "client_id": Setting(str),
    "keepalive": Setting(int), "max_inflight": Setting(int), "reconnect_min": Setting(float),
    "reconnect_max": Setting(float), "queue_path": Setting(str, key="queue", path=True),
    "max_queued": Setting(int)})
_WEBHOOK = Section(WebhookConfig, {
    "url": Setting(str, doc="an http:// or https:// URL"), "queue_path": Setting(str, key="queue", path=True),
    "headers": Setting(dict, Constraint(lambda v: all(isinstance(x, str) for x in v.values()),
                                   "a table of header names to string values")),
    "timeout": Setting(float), "backoff_initial": Setting(float),
    "backoff_max": Setting(float), "max_queued": Setting(int)})


def _jsonl(t: Table, device: str, state_dir: str) -> RotatingConfig:
    return _JSONL.read(t, defaults={"directory": str(Path(state_dir) / "events")})


def _mqtt(t: Table, device: str, state_dir: str) -> MqttConfig:
    v = _MQTT.read_values(t, defaults={"queue_path": str(Path(state_dir) / "mqtt-queue.db")})
    env_name = v.pop("password_env")
    if env_name is not None:
        if v["password"] is not None:
            raise t.error("password_env", "give password or password_env, not both")
        if env_name not in t.ctx.env:
            raise t.error("password_env", f"environment variable {env_name} is not set (systemd: "
                                          "Environment= or EnvironmentFile= in the unit)")
        v["password"] = t.ctx.env[env_name]
    return MqttConfig(device=device, **v)


def _webhook(t: Table, device: str, state_dir: str) -> WebhookConfig:
    return _WEBHOOK.read(t, defaults={"queue_path": str(Path(state_dir) / "webhook-queue.db")})
