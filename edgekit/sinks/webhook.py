"""HTTP webhook event sink: POST each event as JSON, retrying with exponential backoff.

Events go through a :class:`DiskQueue` and are sent one at a time in sequence order; one
is deleted only after a 2xx answer. Timeouts, connection errors, 408, 425, 429 and 5xx
are retried (honouring ``Retry-After``) for as long as it takes; any other answer (a 400
for a payload the receiver will never accept) sets that event aside in the queue's
dead-letter table, logged, so one bad event cannot block the line. Each request carries
``Idempotency-Key: <device>:<seq>`` so a receiver can drop the resend of a request whose
answer was lost. Standard library only (http.client), over one kept-alive connection.
"""

from __future__ import annotations

import http.client
import json
import logging
import random
import ssl
import threading
import urllib.parse
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Mapping, NamedTuple, Sequence

from edgekit.errors import ConfigError
from edgekit.sinks import EventRecord
from edgekit.sinks.diskqueue import DiskQueue, QueueItem
from edgekit.ranges import NONNEG_NUM, POS_INT, POS_NUM, check_ranges, ranged

__all__ = ["WebhookConfig", "WebhookSink", "WebhookStats", "RETRY_STATUSES"]

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
SEND_BATCH = 16  # queued events POSTed (one per request) before their deletion is committed


@dataclass(frozen=True)
class WebhookConfig:
    """Where to POST, and how patiently."""

    url: str
    queue_path: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = ranged(5.0, POS_NUM)
    backoff_initial: float = ranged(0.5, POS_NUM)
    backoff_max: float = ranged(60.0, POS_NUM)
    drain_timeout: float = ranged(2.0, NONNEG_NUM)
    max_queued: int | None = ranged(None, POS_INT)

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"webhook url must be http:// or https:// with a host, got {self.url!r}")
        check_ranges(self, "webhook")
        if not self.backoff_initial <= self.backoff_max:
            raise ConfigError(f"need backoff_initial <= backoff_max, got {self.backoff_initial} "
                              f"and {self.backoff_max}")


class WebhookStats(NamedTuple):
    queued: int
    delivered: int
    attempts: int
    rejected: int
    last_error: str | None


class _Outcome(NamedTuple):
    kind: str  # "ok", "retry" or "reject"
    detail: str
    retry_after: float | None = None


class WebhookSink:
    """POSTs events to a URL from a background thread, in order, nothing lost.

    Raises:
        QueueError: the queue file cannot be opened.
    """

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self.queue = DiskQueue(config.queue_path, max_items=config.max_queued)
        self._url = urllib.parse.urlsplit(config.url)
        # The device of the events this sink queued (ids from _own_from on); older ones are read from their body.
        self._device: str | None = None
        self._own_from: int | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._hurry = threading.Event()  # set by close(): a sender waiting out a backoff tries at once
        self._idle = threading.Condition()
        self._delivered = self._attempts = self._rejected = 0
        self._last_error: str | None = None
        self._closed = False
        self._conn: http.client.HTTPConnection | None = None
        self.delays: list[float] = []  # the backoff waits of the current outage, for logs and tests
        self._thread = threading.Thread(target=self._run, name="edgekit-webhook", daemon=True)
        self._thread.start()

    def write(self, event: EventRecord) -> None:
        """Queue one event on disk (durable on return); the sender thread POSTs it."""
        self._own(event.device, self.queue.put(event.to_json(), key=event.seq))
        self._wake.set()

    def write_many(self, events: Sequence[EventRecord]) -> None:
        """Queue several events in one disk commit (durable on return), in order."""
        ids = self.queue.put_many([(e.to_json(), e.seq) for e in events])
        if ids:
            self._own(events[0].device, ids[0])
        self._wake.set()

    def _own(self, device: str, first_id: int) -> None:
        if self._own_from is None or device != self._device:
            self._device, self._own_from = device, first_id

    def queued(self) -> int:
        """Events waiting on disk for delivery (what a cell's live state and metrics show)."""
        return len(self.queue)

    def stats(self) -> WebhookStats:
        return WebhookStats(len(self.queue), self._delivered, self._attempts, self._rejected,
                            self._last_error)

    def flush(self, timeout: float) -> bool:
        """Wait until the queue is empty. True if it emptied within `timeout` seconds."""
        with self._idle:
            return self._idle.wait_for(lambda: len(self.queue) == 0, timeout)

    def close(self) -> None:
        """Try to deliver for ``drain_timeout`` seconds (a sender waiting out a backoff tries again at
        once), then stop; the rest stays queued."""
        if self._closed:
            return
        self._closed = True
        if len(self.queue) > 0:
            self._hurry.set()
            self.flush(self.config.drain_timeout)
        self._stop.set()
        self._hurry.set()
        self._wake.set()
        self._thread.join(timeout=self.config.timeout + 5)
        self._drop_connection()
        self.queue.close()

    def __enter__(self) -> WebhookSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        delay = self.config.backoff_initial
        while not self._stop.is_set():
            items = self.queue.peek(SEND_BATCH)
            if not items:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            # POST them one by one, in order; delete the delivered ones in one commit (a crash
            # before it resends at most SEND_BATCH events, which receivers drop by sequence number).
            delivered: list[int] = []
            outcome: _Outcome | None = None
            for item in items:
                outcome = self._post(item)
                self._attempts += 1
                if outcome.kind == "ok":
                    delivered.append(item.id)
                elif outcome.kind == "reject":
                    log.error("webhook %s rejected event %s for good (%s); set aside in %s (dead letters)",
                              self.config.url, item.key, outcome.detail, self.config.queue_path)
                    self._last_error = outcome.detail
                    self.queue.dead_letter(item.id, outcome.detail)
                    self._rejected += 1
                if outcome.kind == "retry" or self._stop.is_set():
                    break
            if delivered:
                self.queue.ack(delivered)
                self._delivered += len(delivered)
            if outcome is not None and outcome.kind == "retry":
                if not self.delays:
                    log.warning("webhook %s failed (%s); retrying with backoff, events kept in %s",
                                self.config.url, outcome.detail, self.config.queue_path)
                self._last_error = outcome.detail
                wait = outcome.retry_after if outcome.retry_after is not None else random.uniform(0.5, 1.0) * delay
                self.delays.append(wait)
                if self._hurry.wait(min(wait, self.config.backoff_max)):  # closing: try now, then back off anew
                    self._hurry.clear()
                    delay = self.config.backoff_initial
                else:
                    delay = min(delay * 2, self.config.backoff_max)
                continue
            if self.delays:
                log.info("webhook %s reachable again after %d retries", self.config.url, len(self.delays))
            self.delays = []
            delay = self.config.backoff_initial
            with self._idle:
                self._idle.notify_all()

    def _post(self, item: QueueItem) -> _Outcome:
        url = self._url
        target = (url.path or "/") + (f"?{url.query}" if url.query else "")
        own = self._own_from is not None and item.id >= self._own_from
        key = f"{self._device}:{item.key}" if own else _idempotency_key(item)
        headers = {"Content-Type": "application/json", "User-Agent": "edgekit", "Idempotency-Key": key,
                   **self.config.headers}
        reused = self._conn is not None
        try:
            conn = self._connection(url)
            conn.request("POST", target, body=item.body, headers=headers)
            resp = conn.getresponse()
            resp.read()
        except (OSError, http.client.HTTPException) as exc:
            self._drop_connection()
            if reused:
                return self._post(item)  # the server closed the idle kept-alive connection: one fresh try
            return _Outcome("retry", f"{type(exc).__name__}: {exc}")
        if resp.will_close:
            self._drop_connection()
        return _classify(resp.status, resp.reason, resp.getheader("Retry-After"))

    def _connection(self, url: urllib.parse.SplitResult) -> http.client.HTTPConnection:
        if self._conn is None:
            if url.scheme == "https":
                self._conn = http.client.HTTPSConnection(url.hostname or "", url.port, timeout=self.config.timeout,
                                                         context=ssl.create_default_context())
            else:
                self._conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=self.config.timeout)
        return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _classify(status: int, reason: str, retry_after: str | None) -> _Outcome:
    detail = f"HTTP {status} {reason}"
    if 200 <= status < 300:
        return _Outcome("ok", detail)
    if status in RETRY_STATUSES:
        return _Outcome("retry", detail, _retry_after(retry_after))
    if 300 <= status < 400:
        return _Outcome("reject", f"{detail}: the webhook URL redirects; configure the final URL")
    return _Outcome("reject", detail)


def _idempotency_key(item: QueueItem) -> str:
    try:
        device = json.loads(item.body).get("device", "")
    except ValueError:
        device = ""
    return f"{device}:{item.key}"


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from datetime import datetime, timezone

        return max(0.0, (parsedate_to_datetime(value) - datetime.now(timezone.utc)).total_seconds())
    except (TypeError, ValueError):
        return None
