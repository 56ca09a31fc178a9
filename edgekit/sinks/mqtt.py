"""MQTT event sink: QoS 1, a last will, and an on-disk queue so that nothing is lost.

Topics: ``<prefix>/<device>/events`` (every event, JSON) and ``<prefix>/<device>/status``
(retained ``online`` while connected; the broker publishes the retained last will
``offline`` if the device vanishes).

Every event is written to a :class:`DiskQueue` first (durable when ``write`` returns) and
deleted only when the broker's PUBACK for it arrives. One thread owns the connection and
sends the queue head in order, at most ``max_inflight`` unacknowledged at a time. When the
connection drops, that thread discards the client (and paho's own copies of unacknowledged
messages) and, once reconnected, starts again from the oldest unacknowledged event. So the
broker receives events in sequence order, an acknowledged event is never sent again, and
the only duplicates possible are the (at most ``max_inflight``) events in flight when the
connection broke, which QoS 1 allows; receivers drop those by ``seq``.
"""

from __future__ import annotations

import logging
import os
import random
import select
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

from edgekit.errors import ConfigError, EdgekitError
from edgekit.sinks import EventRecord
from edgekit.sinks.diskqueue import DiskQueue
from edgekit.ranges import NONNEG_NUM, PORT, POS_INT, POS_NUM, check_ranges, ranged

__all__ = ["MqttConfig", "MqttSink", "MqttStats", "check_topic_part"]

log = logging.getLogger(__name__)


def check_topic_part(name: str, value: str) -> str:
    """A device id or prefix usable inside a topic: no wildcards, no '/', not empty.

    Raises:
        ConfigError: naming the offending value.
    """
    if not value or any(c in value for c in "/+#\0") or value.strip() != value:
        raise ConfigError(f"{name} must be a non-empty MQTT topic level without '/', '+', '#' or "
                          f"surrounding spaces, got {value!r}")
    return value


@dataclass(frozen=True)
class MqttConfig:
    """Broker, credentials, topics and queue of an :class:`MqttSink`."""

    device: str
    queue_path: str
    host: str = "127.0.0.1"
    port: int = ranged(1883, PORT)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    ca_certs: str | None = None  # None with tls=True: the system's CA store
    certfile: str | None = None  # client certificate, for brokers that require one
    keyfile: str | None = None
    tls_insecure: bool = False  # skip the host name check (self-signed test brokers only)
    topic_prefix: str = "edgekit"
    client_id: str | None = None
    keepalive: int = ranged(30, POS_INT)
    max_inflight: int = ranged(20, POS_INT)
    reconnect_min: float = ranged(0.5, POS_NUM)
    reconnect_max: float = ranged(30.0, POS_NUM)
    connect_timeout: float = ranged(5.0, POS_NUM)
    drain_timeout: float = ranged(2.0, NONNEG_NUM)  # close() waits this long for the queue to empty
    max_queued: int | None = ranged(None, POS_INT)

    def __post_init__(self) -> None:
        check_topic_part("device", self.device)
        check_topic_part("topic_prefix", self.topic_prefix)
        check_ranges(self, "mqtt")
        if not self.reconnect_min <= self.reconnect_max:
            raise ConfigError(f"need reconnect_min <= reconnect_max, got {self.reconnect_min} "
                              f"and {self.reconnect_max}")
        if self.password is not None and self.username is None:
            raise ConfigError("password given without username")
        if (self.certfile is None) != (self.keyfile is None):
            raise ConfigError("certfile and keyfile go together: give both or neither")

    @property
    def events_topic(self) -> str:
        return f"{self.topic_prefix}/{self.device}/events"

    @property
    def status_topic(self) -> str:
        return f"{self.topic_prefix}/{self.device}/status"


class MqttStats(NamedTuple):
    connected: bool
    queued: int  # written, not yet acknowledged (on disk)
    sent: int  # PUBLISH packets sent (resends included)
    acked: int  # PUBACKs received for events
    connects: int
    last_error: str | None


class _Session:
    """What paho's callbacks report about one connection (all on the sender thread)."""

    def __init__(self) -> None:
        self.connack: Any = None
        self.connected = False
        self.lost = False
        self.acks: list[int] = []


def _paho() -> Any:
    try:
        import paho.mqtt.client as mqtt
    except ImportError:
        raise EdgekitError("the MQTT sink needs paho-mqtt 2.x: pip install 'edgekit-tflite[mqtt]'") from None
    if not hasattr(mqtt, "CallbackAPIVersion"):
        raise EdgekitError("the MQTT sink needs paho-mqtt 2.x (found 1.x): pip install -U 'paho-mqtt>=2'")
    return mqtt


class MqttSink:
    """Publishes events to MQTT with QoS 1, queueing them on disk while the broker is away.

    Args:
        config: broker, credentials, topics and the queue file.
        client_factory: makes the MQTT client, called as paho's ``mqtt.Client`` is
            (``callback_api_version, client_id=, clean_session=, protocol=, userdata=``);
            default paho's own. The sink configures it (last will, credentials, TLS,
            callbacks) and drives its network loop from its sender thread. A test passes a
            fake that records those calls; an app may pass a subclass (websockets, a proxy).

    Raises:
        EdgekitError: paho-mqtt 2.x is not installed.
        QueueError: the queue file cannot be opened.
    """

    def __init__(self, config: MqttConfig, *, client_factory: Callable[..., Any] | None = None) -> None:
        self._mqtt = _paho()
        self._client_factory = client_factory if client_factory is not None else self._mqtt.Client
        self.config = config
        self.queue = DiskQueue(config.queue_path, max_items=config.max_queued)
        self._stop = threading.Event()
        self._hurry = threading.Event()  # set by close(): a sender waiting to reconnect tries at once
        self._idle = threading.Condition()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._connected = False
        self._sent = self._acked = self._connects = 0
        self._last_error: str | None = None
        self._closed = False
        self._client_id = config.client_id or f"edgekit-{config.device}"
        self._thread = threading.Thread(target=self._run, name="edgekit-mqtt", daemon=True)
        self._thread.start()

    # --- producer side -------------------------------------------------------------------
    def write(self, event: EventRecord) -> None:
        """Queue one event on disk (durable on return); the sender thread publishes it."""
        self.queue.put(event.to_json(), key=event.seq)
        self._wake()

    def write_many(self, events: Sequence[EventRecord]) -> None:
        """Queue several events in one disk commit (durable on return), in order."""
        self.queue.put_many([(e.to_json(), e.seq) for e in events])
        self._wake()

    def queued(self) -> int:
        """Events waiting on disk for delivery (what a cell's live state and metrics show)."""
        return len(self.queue)

    def stats(self) -> MqttStats:
        return MqttStats(self._connected, len(self.queue), self._sent, self._acked, self._connects,
                         self._last_error)

    def flush(self, timeout: float) -> bool:
        """Wait until every queued event is acknowledged. True if the queue emptied in time."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while len(self.queue) > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.1))
        return True

    def close(self) -> None:
        """Send what can be sent within ``drain_timeout``, say ``offline``, disconnect. A sender
        waiting out its reconnect backoff tries again at once (the broker may be back).

        Unsent events stay in the queue file for the next run. Safe to call twice.
        """
        if self._closed:
            return
        self._closed = True
        if len(self.queue) > 0:  # connected or not: a broker back moments ago still gets the backlog
            self._hurry.set()
            self.flush(self.config.drain_timeout)
        self._stop.set()
        self._hurry.set()
        self._wake()
        self._thread.join(timeout=self.config.connect_timeout + 5)
        self.queue.close()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    def __enter__(self) -> MqttSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):
            pass  # the pipe is full (a wake-up is pending anyway) or closed

    # --- sender thread -------------------------------------------------------------------
    def _run(self) -> None:
        delay = self.config.reconnect_min
        outage_logged = False
        while not self._stop.is_set():
            session = _Session()
            client = self._connect(session)
            if client is None:
                if not outage_logged:
                    log.warning("MQTT broker %s:%d unreachable (%s); events are kept in %s and sent when "
                                "it returns", self.config.host, self.config.port, self._last_error,
                                self.config.queue_path)
                    outage_logged = True
                # Full jitter: many cameras of a plant must not reconnect in lockstep.
                if self._hurry.wait(random.uniform(0.5, 1.0) * delay):  # closing: try now, then back off anew
                    self._hurry.clear()
                    delay = self.config.reconnect_min
                else:
                    delay = min(delay * 2, self.config.reconnect_max)
                continue
            delay = self.config.reconnect_min
            outage_logged = False
            log.info("MQTT connected to %s:%d; %d queued event(s) to send", self.config.host,
                     self.config.port, len(self.queue))
            try:
                self._pump(client, session)
            except Exception as exc:  # noqa: BLE001 - the sender must survive anything and retry
                self._last_error = f"{type(exc).__name__}: {exc}"
                log.error("MQTT sender error: %s", self._last_error)
            finally:
                self._connected = False
                self._teardown(client, session)

    def _new_client(self, session: _Session) -> Any:
        mqtt, cfg = self._mqtt, self.config
        client = self._client_factory(mqtt.CallbackAPIVersion.VERSION2, client_id=self._client_id,
                                      clean_session=True, protocol=mqtt.MQTTv311, userdata=session)
        client.will_set(cfg.status_topic, "offline", qos=1, retain=True)
        if cfg.username is not None:
            client.username_pw_set(cfg.username, cfg.password)
        if cfg.tls:
            client.tls_set(ca_certs=cfg.ca_certs, certfile=cfg.certfile, keyfile=cfg.keyfile)
            client.tls_insecure_set(cfg.tls_insecure)
        client.max_inflight_messages_set(0)  # our window decides, paho must not hold anything back
        client.connect_timeout = cfg.connect_timeout
        client.on_connect = _on_connect
        client.on_disconnect = _on_disconnect
        client.on_publish = _on_publish
        return client

    def _connect(self, session: _Session) -> Any:
        """A connected client, or None (reason in ``_last_error``)."""
        try:
            client = self._new_client(session)
            client.connect(self.config.host, self.config.port, self.config.keepalive)
        except (OSError, ssl.SSLError, ValueError) as exc:
            self._last_error = f"connect failed: {exc}"
            return None
        deadline = time.monotonic() + self.config.connect_timeout
        while session.connack is None and not session.lost and time.monotonic() < deadline:
            self._io(client, session, 0.1)
        if not session.connected:
            what = session.connack if session.connack is not None else "no CONNACK"
            self._last_error = f"broker refused the connection: {what}"
            if session.connack is not None and session.connack.is_failure:
                log.error("MQTT broker %s:%d refused edgekit: %s; check username/password and ACLs",
                          self.config.host, self.config.port, session.connack)
            self._teardown(client, session)
            return None
        self._connects += 1
        self._connected = True
        client.publish(self.config.status_topic, "online", qos=1, retain=True)
        return client

    def _pump(self, client: Any, session: _Session) -> None:
        """Send the queue head in order and delete what the broker acknowledges, until the
        connection drops or the sink stops."""
        inflight: dict[int, int] = {}  # paho mid -> queue id
        last_sent = 0
        while not session.lost and not self._stop.is_set():
            if session.acks:
                done = [inflight.pop(m) for m in session.acks if m in inflight]
                session.acks.clear()
                if done:
                    self.queue.ack(done)
                    self._acked += len(done)
                    with self._idle:
                        self._idle.notify_all()
            room = self.config.max_inflight - len(inflight)
            for item in self.queue.peek(room, after=last_sent) if room > 0 else ():
                info = client.publish(self.config.events_topic, item.body, qos=1)
                if info.rc != self._mqtt.MQTT_ERR_SUCCESS:
                    session.lost = True
                    break
                inflight[info.mid] = item.id
                last_sent = item.id
                self._sent += 1
            if not session.lost:
                self._io(client, session, 1.0)

    def _io(self, client: Any, session: _Session, timeout: float) -> None:
        """One turn of paho's external event loop: wait on the socket and the wake pipe."""
        sock = client.socket()
        if sock is None:
            session.lost = True
            return
        pending = getattr(sock, "pending", None)
        readable_now = bool(pending and pending() > 0)  # TLS bytes already decrypted
        want_w = [sock] if client.want_write() else []
        r, w, _ = select.select([sock, self._wake_r], want_w, [], 0 if readable_now else timeout)
        if self._wake_r in r:
            try:
                os.read(self._wake_r, 4096)
            except BlockingIOError:
                pass
        ok = self._mqtt.MQTT_ERR_SUCCESS
        if (sock in r or readable_now) and client.loop_read() != ok:
            session.lost = True
        if not session.lost and sock in w and client.loop_write() != ok:
            session.lost = True
        if not session.lost and client.loop_misc() != ok:
            session.lost = True

    def _teardown(self, client: Any, session: _Session) -> None:
        if self._stop.is_set() and session.connected and not session.lost:
            # A clean goodbye: the broker drops the last will on DISCONNECT, so say it ourselves.
            info = client.publish(self.config.status_topic, "offline", qos=1, retain=True)
            deadline = time.monotonic() + 1.0
            while info.mid not in session.acks and not session.lost and time.monotonic() < deadline:
                self._io(client, session, 0.1)
            client.disconnect()
        try:
            sock = client.socket()
            if sock is not None:
                sock.close()
        except OSError:
            pass


# paho callbacks; `userdata` is the _Session of that connection. They run on the sender
# thread (inside loop_read/loop_misc), so they only record what happened.
def _on_connect(client: Any, session: _Session, flags: Any, reason_code: Any, properties: Any) -> None:
    session.connack = reason_code
    session.connected = not reason_code.is_failure


def _on_disconnect(client: Any, session: _Session, flags: Any, reason_code: Any, properties: Any) -> None:
    session.lost = True


def _on_publish(client: Any, session: _Session, mid: int, reason_code: Any, properties: Any) -> None:
    session.acks.append(mid)
