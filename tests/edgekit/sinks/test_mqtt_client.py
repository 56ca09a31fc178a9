"""The MQTT sink's client seam: what it asks of the client, without a broker (tests/edgekit/sinks/test_mqtt.py
proves the same options against a real mosquitto with a password file and a TLS listener)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from edgekit.errors import ConfigError
from edgekit.sinks.mqtt import MqttConfig, MqttSink

pytest.importorskip("paho.mqtt.client")


class RecordingClient:
    """Stands in for paho's Client: records every call; no socket, so every connect attempt fails."""

    made: list[RecordingClient] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs
        self.calls: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        RecordingClient.made.append(self)

    def connect(self, *args: Any, **kwargs: Any) -> None:
        self.calls["connect"] = (args, kwargs)

    def socket(self) -> None:
        return None  # never connected: the sink gives up on this client and retries later

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *a, **kw: self.calls.__setitem__(name, (a, kw))


def test_credentials_tls_and_last_will_reach_the_client(tmp_path: Path) -> None:
    RecordingClient.made = []
    cfg = MqttConfig(device="d", queue_path=str(tmp_path / "q"), host="broker.local", port=8883, username="edge",
                     password="s3cret", tls=True, ca_certs="/etc/ca.pem", certfile="/etc/c.pem",
                     keyfile="/etc/c.key", reconnect_min=5.0, reconnect_max=10.0)
    with MqttSink(cfg, client_factory=RecordingClient) as sink:
        deadline = time.monotonic() + 5
        while "no CONNACK" not in (sink.stats().last_error or "") and time.monotonic() < deadline:
            time.sleep(0.01)  # the sender thread made a client, connected it, and gave up on it
        assert sink.stats().connected is False and "no CONNACK" in (sink.stats().last_error or "")
        [client] = RecordingClient.made  # one attempt: the next waits reconnect_min
    assert client.kwargs["client_id"] == "edgekit-d" and client.kwargs["clean_session"] is True
    assert client.calls["will_set"] == ((cfg.status_topic, "offline"), {"qos": 1, "retain": True})
    assert client.calls["username_pw_set"] == (("edge", "s3cret"), {})
    assert client.calls["tls_set"] == ((), {"ca_certs": "/etc/ca.pem", "certfile": "/etc/c.pem",
                                            "keyfile": "/etc/c.key"})
    assert client.calls["tls_insecure_set"] == ((False,), {})
    assert client.calls["connect"] == (("broker.local", 8883, cfg.keepalive), {})
    assert "s3cret" not in repr(cfg)


def test_a_password_needs_a_username(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="password given without username"):
        MqttConfig(device="d", queue_path=str(tmp_path / "q"), password="x")
