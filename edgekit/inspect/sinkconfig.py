"""The [sinks.jsonl], [sinks.mqtt] and [sinks.webhook] tables of an inspection config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.errors import ConfigError
from edgekit.inspect.tomlpos import NONNEG_INT, PORT, POS_INT, POS_NUM, Table
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
    t.allow("jsonl", "mqtt", "webhook")
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


def _jsonl(t: Table, device: str, state_dir: str) -> RotatingConfig:
    t.allow("directory", "prefix", "max_bytes", "keep", "fsync_every")
    return RotatingConfig(
        directory=t.path_value("directory") or str(Path(state_dir) / "events"),
        prefix=t.get("prefix", str, "events"), max_bytes=t.get("max_bytes", int, 10 * 1024 * 1024, **POS_INT),
        keep=t.get("keep", int, 20, **POS_INT), fsync_every=t.get("fsync_every", int, 0, **NONNEG_INT))


def _mqtt(t: Table, device: str, state_dir: str) -> MqttConfig:
    t.allow("host", "port", "username", "password", "password_env", "tls", "ca_certs", "certfile", "keyfile",
            "tls_insecure", "topic_prefix", "client_id", "keepalive", "max_inflight", "reconnect_min",
            "reconnect_max", "queue", "max_queued")
    password = t.get("password", str, None)
    env_name = t.get("password_env", str, None, expect="the name of an environment variable")
    if env_name is not None:
        if password is not None:
            raise t.error("password_env", "give password or password_env, not both")
        if env_name not in t.ctx.env:
            raise t.error("password_env", f"environment variable {env_name} is not set (systemd: "
                                          "Environment= or EnvironmentFile= in the unit)")
        password = t.ctx.env[env_name]
    return MqttConfig(
        device=device, queue_path=t.path_value("queue") or str(Path(state_dir) / "mqtt-queue.db"),
        host=t.get("host", str, "127.0.0.1"), port=t.get("port", int, 1883, **PORT),
        username=t.get("username", str, None), password=password, tls=t.get("tls", bool, False),
        ca_certs=t.path_value("ca_certs"), certfile=t.path_value("certfile"), keyfile=t.path_value("keyfile"),
        tls_insecure=t.get("tls_insecure", bool, False), topic_prefix=t.get("topic_prefix", str, "edgekit"),
        client_id=t.get("client_id", str, None), keepalive=t.get("keepalive", int, 30, **POS_INT),
        max_inflight=t.get("max_inflight", int, 20, **POS_INT),
        reconnect_min=t.get("reconnect_min", float, 0.5, **POS_NUM),
        reconnect_max=t.get("reconnect_max", float, 30.0, **POS_NUM),
        max_queued=t.get("max_queued", int, None, **POS_INT))


def _webhook(t: Table, device: str, state_dir: str) -> WebhookConfig:
    t.allow("url", "headers", "timeout", "backoff_initial", "backoff_max", "queue", "max_queued")
    headers = t.get("headers", dict, {}, check=lambda v: all(isinstance(x, str) for x in v.values()),
                    expect="a table of header names to string values")
    return WebhookConfig(
        url=t.get("url", str, expect="an http:// or https:// URL"),
        queue_path=t.path_value("queue") or str(Path(state_dir) / "webhook-queue.db"), headers=headers,
        timeout=t.get("timeout", float, 5.0, **POS_NUM),
        backoff_initial=t.get("backoff_initial", float, 0.5, **POS_NUM),
        backoff_max=t.get("backoff_max", float, 60.0, **POS_NUM),
        max_queued=t.get("max_queued", int, None, **POS_INT))
