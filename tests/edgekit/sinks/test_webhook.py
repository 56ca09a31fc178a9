"""The webhook sink against a local HTTP endpoint: backoff, Retry-After, keep-alive, dead letters, events
kept for the next run, and a stop that does not wait out a backoff."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from edgekit.errors import ConfigError
from edgekit.inspect.events import Event, EventEmitter, EventKind
from edgekit.sinks.webhook import WebhookConfig, WebhookSink


class _Receiver:
    """An HTTP endpoint that answers the first `fail` requests with `status`, then 200."""

    def __init__(self, fail: int = 0, status: int = 503, reject_seq: int | None = None,
                 retry_after: str | None = None, drop_every: int = 0) -> None:
        self.fail, self.status, self.reject_seq, self.retry_after = fail, status, reject_seq, retry_after
        self.got: list[dict[str, Any]] = []
        self.keys: list[str] = []
        self.times: list[float] = []
        self.clients: list[int] = []  # the client port of each request: one per connection
        rx = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real receivers do

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                rx.times.append(time.monotonic())
                rx.clients.append(self.client_address[1])
                if drop_every and len(rx.clients) % drop_every == 0:
                    self.close_connection = True  # hang up after answering, without saying so
                if rx.fail > 0:
                    rx.fail -= 1
                    self.send_response(rx.status)
                    if rx.retry_after:
                        self.send_header("Retry-After", rx.retry_after)
                elif body["seq"] == rx.reject_seq:
                    self.send_response(400)
                else:
                    rx.got.append(body)
                    rx.keys.append(self.headers["Idempotency-Key"])
                    self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/events"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_factory() -> Iterator[Any]:
    made: list[_Receiver] = []

    def make(**kw: Any) -> _Receiver:
        made.append(_Receiver(**kw))
        return made[-1]

    yield make
    for r in made:
        r.close()


def _webhook(tmp_path: Path, url: str, **kw: Any) -> WebhookSink:
    return WebhookSink(WebhookConfig(url=url, queue_path=str(tmp_path / "wh.db"), backoff_initial=0.05,
                                     backoff_max=0.4, timeout=2.0, **kw))


def test_webhook_retries_with_backoff_then_delivers_in_order(tmp_path: Path, receiver_factory: Any) -> None:
    rx = receiver_factory(fail=4, status=503)
    sink = _webhook(tmp_path, rx.url)
    with EventEmitter("cell-2", sinks=[sink]) as em:
        for i in range(5):
            em.emit(EventKind.INSPECTION, {"i": i})
        assert sink.flush(10)
    assert [e["seq"] for e in rx.got] == [1, 2, 3, 4, 5]
    assert rx.keys[0] == "cell-2:1"
    gaps = np.diff(rx.times[:5])  # waits after each of the four failures
    # jittered exponential backoff: 0.05 s doubling -> the 4th wait is 0.2..0.4 s, the 1st 0.025..0.05 s
    assert gaps[-1] > 2 * gaps[0] and gaps[-1] >= 0.19, f"waits should grow: {gaps}"
    assert sink.stats().attempts == 9


def test_webhook_keeps_the_connection_and_survives_a_server_hangup(tmp_path: Path, receiver_factory: Any) -> None:
    rx = receiver_factory(drop_every=3)
    with _webhook(tmp_path, rx.url) as sink:
        for seq in range(1, 10):
            sink.write(Event("c", seq, EventKind.STATUS, 1.0))
            assert sink.flush(5)  # one at a time, so each request may reuse the connection
        assert sink.stats().attempts == 9, "a hang-up costs a reconnect, not a failed attempt"
    assert [e["seq"] for e in rx.got] == list(range(1, 10))
    assert len(set(rx.clients)) == 3, "three requests per connection"


def test_webhook_honours_retry_after(tmp_path: Path, receiver_factory: Any) -> None:
    rx = receiver_factory(fail=1, status=429, retry_after="0.3")
    with _webhook(tmp_path, rx.url) as sink:
        sink.write(Event("c", 1, EventKind.STATUS, 1.0))
        assert sink.flush(5)
    assert rx.times[1] - rx.times[0] >= 0.28


def test_webhook_sets_aside_a_rejected_event(tmp_path: Path, receiver_factory: Any) -> None:
    rx = receiver_factory(reject_seq=2)
    sink = _webhook(tmp_path, rx.url)
    for seq in (1, 2, 3):
        sink.write(Event("c", seq, EventKind.STATUS, 1.0))
    assert sink.flush(5)
    assert [e["seq"] for e in rx.got] == [1, 3]
    [(item, reason)] = sink.queue.dead_letters()
    assert item.key == 2 and reason.startswith("HTTP 400")
    sink.close()


def test_webhook_unreachable_keeps_events_for_the_next_run(tmp_path: Path, receiver_factory: Any) -> None:
    sink = _webhook(tmp_path, "http://127.0.0.1:9/nothing-listens", drain_timeout=0.2)
    for seq in (1, 2):
        sink.write(Event("c", seq, EventKind.STATUS, 1.0))
    time.sleep(0.3)
    sink.close()
    assert sink.stats().queued == 2 and "Connection refused" in (sink.stats().last_error or "")
    rx = receiver_factory()
    with _webhook(tmp_path, rx.url) as again:
        again.write(Event("renamed", 3, EventKind.STATUS, 1.0))  # the device got a new id meanwhile
        assert again.flush(5)
    assert [e["seq"] for e in rx.got] == [1, 2, 3]
    assert rx.keys == ["c:1", "c:2", "renamed:3"]  # each event keeps the key of the device that made it


def test_webhook_close_retries_at_once_instead_of_waiting_out_a_backoff(tmp_path: Path,
                                                                        receiver_factory: Any) -> None:
    rx = receiver_factory(fail=1, status=503)  # the receiver is back right after the first failure
    sink = WebhookSink(WebhookConfig(url=rx.url, queue_path=str(tmp_path / "wh.db"), backoff_initial=20.0,
                                     backoff_max=40.0, drain_timeout=5.0))
    sink.write(Event("c", 1, EventKind.STATUS, 1.0))
    deadline = time.monotonic() + 5
    while not sink.delays and time.monotonic() < deadline:  # failed once, now in a 10-20 s backoff
        time.sleep(0.01)
    t0 = time.monotonic()
    sink.close()  # what a SIGTERM comes to
    assert [e["seq"] for e in rx.got] == [1] and sink.stats().queued == 0
    assert time.monotonic() - t0 < 4.0


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://host/x", "http://", "localhost:8080"])
def test_webhook_url_must_be_http(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError, match="http:// or https://"):
        WebhookConfig(url=url, queue_path=str(tmp_path / "q.db"))
