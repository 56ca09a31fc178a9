"""Fleet status over MQTT: each device's retained status, its rollout events, release notifications.

Topics (``prefix`` is ``edgekit`` unless configured):

- ``<prefix>/<device>/fleet``: retained JSON, the device's latest :class:`DeviceStatus` (the
  broker's last will replaces it with ``state: offline`` when the device vanishes);
- ``<prefix>/<device>/rollout``: one JSON object per rollout event (installed, trial, healthy,
  rolled back, refused), QoS 1;
- ``<prefix>/channel/<name>``: retained notification of a new channel state, written by
  ``edgekit release --mqtt``; only a wake-up call, the device still fetches and verifies the
  signed channel.

``edgekit fleet status`` reads the retained status messages (:func:`read_fleet_status`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

from edgekit.errors import EdgekitError

__all__ = ["DeviceStatus", "StatusPublisher", "read_fleet_status", "publish_notification", "status_topic"]

log = logging.getLogger(__name__)


def _paho() -> Any:
    try:
        import paho.mqtt.client as mqtt
    except ImportError:
        raise EdgekitError("fleet status and notifications need paho-mqtt 2.x: "
                           "pip install 'edgekit-tflite[mqtt]'") from None
    return mqtt


def status_topic(prefix: str, device: str) -> str:
    return f"{prefix}/{device}/fleet"


@dataclass(frozen=True)
class DeviceStatus:
    device: str
    state: str
    running: int | None = None  # version serving now
    pending: int | None = None  # version being downloaded, tested or on trial
    last_error: str | None = None
    fps: float | None = None
    uptime_s: float | None = None
    channel: str | None = None
    downloaded_bytes: int = 0  # every byte received from the channel's server since start, refused ones too
    selftest: dict[str, Any] | None = None  # the last golden self-test: version, passed, cases, compared, max_error
    updated: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_json(cls, data: bytes | str) -> DeviceStatus | None:
        """None for anything that is not a status object (a receiver never trusts the payload)."""
        try:
            d = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return None
        if not isinstance(d, dict) or not isinstance(d.get("device"), str) or not isinstance(d.get("state"), str):
            return None
        known = cls.__dataclass_fields__
        if not isinstance(d.get("selftest"), (dict, type(None))):
            d["selftest"] = None
        return cls(**{k: v for k, v in d.items() if k in known})


def _client(mqtt: Any, client_id: str) -> Any:
    return mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True,
                       protocol=mqtt.MQTTv311)


class StatusPublisher:
    """A device's MQTT connection for its fleet status, rollout events and notifications.

    Connects in the background and reconnects by itself (paho's network thread); the last
    status is published again after a reconnect.

    Args:
        on_notify: called (from paho's thread) when a message arrives on ``notify_topic``.
    """

    def __init__(self, host: str, port: int, *, device: str, prefix: str = "edgekit",
                 notify_topic: str | None = None, on_notify: Callable[[bytes], None] | None = None) -> None:
        mqtt = _paho()
        self.topic = status_topic(prefix, device)
        self.events_topic = f"{prefix}/{device}/rollout"
        self._notify_topic, self._on_notify = notify_topic, on_notify
        self._last: str | None = None
        self._lock = threading.Lock()
        self.connected = threading.Event()
        c = self._c = _client(mqtt, f"edgekit-fleet-{device}")
        c.will_set(self.topic, json.dumps({"device": device, "state": "offline"}), qos=1, retain=True)
        c.reconnect_delay_set(0.5, 30)
        c.max_queued_messages_set(200)  # a long outage must not grow memory; the last status is re-sent anyway
        c.on_connect = self._on_connect
        c.on_disconnect = lambda *a: self.connected.clear()
        c.on_message = self._on_message
        c.connect_async(host, port, keepalive=30)
        c.loop_start()

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, properties: Any) -> None:
        if getattr(reason, "is_failure", False):
            log.error("fleet MQTT: the broker refused the connection: %s", reason)
            return
        self.connected.set()
        if self._notify_topic:
            client.subscribe(self._notify_topic, qos=1)
        with self._lock:
            last = self._last
        if last is not None:
            client.publish(self.topic, last, qos=1, retain=True)

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        if self._on_notify is not None and msg.topic == self._notify_topic:
            try:
                self._on_notify(bytes(msg.payload))
            except Exception as exc:  # noqa: BLE001 - a handler bug must not end paho's thread
                log.error("fleet notification handler failed: %s", exc)

    def listen(self, topic: str) -> None:
        """Take notifications from ``topic`` instead (the channel's own name, once the follower read it)."""
        old, self._notify_topic = self._notify_topic, topic
        if topic != old and self._c is not None and self.connected.is_set():
            if old:
                self._c.unsubscribe(old)
            self._c.subscribe(topic, qos=1)

    def publish(self, status: DeviceStatus) -> None:
        text = status.to_json()
        with self._lock:
            self._last = text
        self._c.publish(self.topic, text, qos=1, retain=True)

    def event(self, payload: dict[str, Any]) -> None:
        self._c.publish(self.events_topic, json.dumps(payload, separators=(",", ":")), qos=1)

    def close(self, final: DeviceStatus | None = None) -> None:
        """Publish `final` (e.g. state 'stopped'), then disconnect (safe twice)."""
        if self._c is None:
            return
        c, self._c = self._c, None
        if final is not None and self.connected.is_set():
            info = c.publish(self.topic, final.to_json(), qos=1, retain=True)
            try:
                info.wait_for_publish(2.0)
            except (RuntimeError, ValueError):
                pass
        c.disconnect()
        c.loop_stop()


def _run_once(host: str, port: int, client_id: str, body: Callable[[Any, Any], None], timeout: float) -> None:
    mqtt = _paho()
    c = _client(mqtt, client_id)
    try:
        c.connect(host, port, keepalive=30)
    except OSError as exc:
        raise EdgekitError(f"cannot reach the MQTT broker {host}:{port}: {exc.strerror or exc}") from None
    c.loop_start()
    try:
        body(c, mqtt)
    finally:
        c.disconnect()
        c.loop_stop()


def publish_notification(host: str, port: int, topic: str, payload: dict[str, Any], timeout: float = 5.0) -> None:
    """Publish a retained notification (QoS 1) and wait for the broker's acknowledgement.

    Raises:
        EdgekitError: the broker cannot be reached or does not acknowledge in time.
    """
    def body(c: Any, mqtt: Any) -> None:
        info = c.publish(topic, json.dumps(payload, separators=(",", ":")), qos=1, retain=True)
        info.wait_for_publish(timeout)
        if not info.is_published():
            raise EdgekitError(f"the MQTT broker {host}:{port} did not acknowledge the notification")

    _run_once(host, port, f"edgekit-release-{time.monotonic_ns()}", body, timeout)


def read_fleet_status(host: str, port: int, *, prefix: str = "edgekit", wait: float = 1.0) -> list[DeviceStatus]:
    """Every device's retained status, sorted by device id. Retained messages arrive right after
    subscribing; the call listens for `wait` seconds past the last one.

    Raises:
        EdgekitError: the broker cannot be reached.
    """
    found: dict[str, DeviceStatus] = {}
    last = [time.monotonic()]

    def on_message(client: Any, userdata: Any, msg: Any) -> None:
        status = DeviceStatus.from_json(bytes(msg.payload))
        if status is not None and msg.topic == status_topic(prefix, status.device):
            found[status.device] = status
        last[0] = time.monotonic()

    def body(c: Any, mqtt: Any) -> None:
        subscribed = threading.Event()
        c.on_message = on_message
        c.on_subscribe = lambda *a: subscribed.set()
        c.subscribe(f"{prefix}/+/fleet", qos=1)
        subscribed.wait(5.0)
        last[0] = time.monotonic()
        while time.monotonic() - last[0] < wait:
            time.sleep(0.05)

    _run_once(host, port, f"edgekit-fleet-status-{time.monotonic_ns()}", body, wait)
    return [found[d] for d in sorted(found)]
