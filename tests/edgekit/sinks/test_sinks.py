"""Events, the sequence counter, the disk queue, rotating JSON-lines files and the webhook sink."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from edgekit.errors import ConfigError, InputError
from edgekit.inspect.events import Event, EventEmitter, EventKind, SequenceCounter
from edgekit.sinks.diskqueue import DiskQueue, QueueError, QueueFullError
from edgekit.sinks.rotating import RotatingConfig, RotatingJsonlSink
from edgekit.sinks.webhook import WebhookConfig, WebhookSink


# --- events --------------------------------------------------------------------------------

def test_event_json_round_trip_with_numpy_payload() -> None:
    e = EventEmitter("cell-1", clock=lambda: 1700000000.25).make(
        EventKind.INSPECTION, {"boxes": np.array([[1.5, 2, 3, 4]], dtype=np.float32), "n": np.int64(3),
                               "ok": np.bool_(True), "nan": float("nan")})
    back = Event.from_json(e.to_json())
    assert back == Event("cell-1", 1, EventKind.INSPECTION, 1700000000.25, None,
                         {"boxes": [[1.5, 2.0, 3.0, 4.0]], "n": 3, "ok": True, "nan": None})
    assert "\n" not in e.to_json()


@pytest.mark.parametrize("text, message", [
    ("not json", "invalid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"device": "a", "kind": "inspection", "timestamp": 1}', "lacks the field 'seq'"),
    ('{"device": "a", "seq": 0, "kind": "inspection", "timestamp": 1}', "positive integer"),
    ('{"device": "a", "seq": 1, "kind": "party", "timestamp": 1}', "wrong type"),
])
def test_event_from_json_rejects(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        Event.from_json(text)


def test_payload_must_be_data() -> None:
    with pytest.raises(InputError, match="must be JSON data"):
        EventEmitter("d").make(EventKind.STATUS, {"x": object()})


def test_sequence_continues_after_clean_restart(tmp_path: Path) -> None:
    state = tmp_path / "seq.json"
    c = SequenceCounter(state, reserve=10)
    assert [c.next() for _ in range(25)] == list(range(1, 26))
    c.close()
    c.close()
    c2 = SequenceCounter(state, reserve=10)
    assert (c2.next(), c2.may_have_skipped) == (26, None)


def test_sequence_skips_reservation_after_crash(tmp_path: Path) -> None:
    state = tmp_path / "seq.json"
    c = SequenceCounter(state, reserve=10)
    for _ in range(25):
        c.next()
    # no close(): the process died. Numbers must never repeat; the gap is announced.
    c2 = SequenceCounter(state, reserve=10)
    assert c2.next() == 31 and c2.may_have_skipped == (21, 30)  # 26..30 really were never issued


def test_sequence_state_file_damaged(tmp_path: Path) -> None:
    state = tmp_path / "seq.json"
    state.write_text("{garbage")
    with pytest.raises(ConfigError, match="unreadable"):
        SequenceCounter(state)


class _Broken:
    def write(self, event: Event) -> None:
        raise OSError("disk full")

    def close(self) -> None:
        pass


class _Keep:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def write(self, event: Event) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass


def test_one_broken_sink_does_not_stop_the_others() -> None:
    keep = _Keep()
    with EventEmitter("d", sinks=[_Broken(), keep]) as em:
        em.emit(EventKind.STATUS, {"a": 1})
        em.emit(EventKind.STATUS, {"a": 2})
    assert [e.seq for e in keep.events] == [1, 2]
    assert em.sink_errors == 2 and "disk full" in (em.last_error or "")


class _Slow(_Keep):
    def write(self, event: Event) -> None:
        time.sleep(0.01)
        super().write(event)


def test_background_emitter_does_not_wait_for_a_slow_sink() -> None:
    slow = _Slow()
    em = EventEmitter("d", sinks=[slow], background=True)
    t0 = time.perf_counter()
    for i in range(20):
        em.emit(EventKind.INSPECTION, {"i": i})
    assert time.perf_counter() - t0 < 0.1, "emit only numbers and queues"
    em.flush()
    assert [e.seq for e in slow.events] == list(range(1, 21))
    em.emit(EventKind.STATUS)
    em.close()  # drains what is queued before closing the sinks
    assert len(slow.events) == 21


@pytest.mark.parametrize("background", [False, True])
def test_emitter_keeps_order_across_threads(background: bool) -> None:
    keep = _Keep()
    em = EventEmitter("d", sinks=[keep], background=background)
    threads = [threading.Thread(target=lambda: [em.emit(EventKind.STATUS) for _ in range(200)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    em.close()
    assert [e.seq for e in keep.events] == list(range(1, 801))


# --- disk queue ------------------------------------------------------------------------------

def test_queue_order_ack_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "q" / "queue.db"
    with DiskQueue(path) as q:
        ids = [q.put(f"event {i}", key=i) for i in range(10)]
        assert [i.body for i in q.peek(3)] == [b"event 0", b"event 1", b"event 2"]
        assert [i.key for i in q.peek(2, after=ids[4])] == [5, 6]
        assert q.ack(ids[:4]) == 4 and len(q) == 6
    with DiskQueue(path) as q:  # the next run finds what was not acknowledged, in order
        assert [i.key for i in q.peek(100)] == [4, 5, 6, 7, 8, 9]
        assert q.put("more") > ids[-1]


def test_queue_limits_and_dead_letters(tmp_path: Path) -> None:
    with DiskQueue(tmp_path / "q.db", max_items=2) as q:
        a = q.put("a", 1)
        q.put("b", 2)
        with pytest.raises(QueueFullError, match="max_items=2"):
            q.put("c", 3)
        q.dead_letter(a, "HTTP 400 Bad Request")
        assert [i.key for i in q.peek(5)] == [2]
        [(item, reason)] = q.dead_letters()
        assert (item.body, reason) == (b"a", "HTTP 400 Bad Request")
    q.close()
    with pytest.raises(QueueError, match="closed"):
        q.put("x")


def test_queue_damaged_file(tmp_path: Path) -> None:
    bad = tmp_path / "q.db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(QueueError, match="move it aside"):
        DiskQueue(bad)


# --- rotating JSON lines -------------------------------------------------------------------------

def _events(n: int, start: int = 1) -> list[Event]:
    return [Event("cell", i, EventKind.INSPECTION, 1.0, "m/1", {"pad": "x" * 200}) for i in range(start, start + n)]


def _read_all(sink: RotatingJsonlSink) -> list[int]:
    return [json.loads(line)["seq"] for f in sink.files() for line in f.read_text().splitlines()]


def test_rotation_keeps_every_line_in_order(tmp_path: Path) -> None:
    sink = RotatingJsonlSink(RotatingConfig(str(tmp_path / "ev"), max_bytes=2048, keep=None))
    for e in _events(50):
        sink.write(e)
        # flushed per event: a reader sees it before close
        assert json.loads(sink.current_path.read_text().splitlines()[-1])["seq"] == e.seq
    sink.close()
    sink.close()
    assert len(sink.files()) > 3
    assert all(f.stat().st_size <= 2048 for f in sink.files())
    assert _read_all(sink) == list(range(1, 51))


def test_rotation_deletes_oldest_beyond_keep(tmp_path: Path) -> None:
    with RotatingJsonlSink(RotatingConfig(str(tmp_path), max_bytes=1024, keep=3)) as sink:
        for e in _events(40):
            sink.write(e)
    names = [f.name for f in sink.files()]
    assert len(names) == 3 and names[-1] == sink.current_path.name
    assert _read_all(sink)[-1] == 40


def test_restart_trims_a_torn_line_and_appends(tmp_path: Path) -> None:
    cfg = RotatingConfig(str(tmp_path), max_bytes=1 << 20)
    with RotatingJsonlSink(cfg) as sink:
        for e in _events(3):
            sink.write(e)
    with open(sink.current_path, "ab") as f:
        f.write(b'{"v":1,"device":"cell","seq":4,"ki')  # the process died mid-write
    with RotatingJsonlSink(cfg) as sink2:
        for e in _events(2, start=5):
            sink2.write(e)
    assert _read_all(sink2) == [1, 2, 3, 5, 6]


@pytest.mark.parametrize("kwargs, message", [
    ({"max_bytes": 10}, "max_bytes"), ({"keep": 0}, "keep"), ({"prefix": "../x"}, "prefix")])
def test_rotating_config_errors(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RotatingConfig(str(tmp_path), **kwargs)


# --- webhook -----------------------------------------------------------------------------------

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


# --- batches: one commit for the events the background writer gathered -----------------------------
class _Batches(_Keep):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def write_many(self, events: list[Event]) -> None:
        self.batches.append(len(events))
        self.events.extend(events)


class _BrokenMany(_Batches):
    def write_many(self, events: list[Event]) -> None:
        raise OSError("disk full")


def test_background_writer_hands_over_batches_in_order() -> None:
    batched, single, broken = _Batches(), _Keep(), _BrokenMany()
    em = EventEmitter("d", sinks=[broken, batched, single], background=True, linger=0.2)
    for i in range(30):
        em.emit(EventKind.INSPECTION, {"i": i})
    em.flush()  # waits for the batch still lingering
    assert [e.seq for e in batched.events] == [e.seq for e in single.events] == list(range(1, 31))
    assert len(batched.batches) < 30 and sum(batched.batches) == 30
    assert em.sink_errors >= 1 and "disk full" in (em.last_error or "")
    em.close()


def test_linger_zero_and_a_negative_linger() -> None:
    keep = _Batches()
    with EventEmitter("d", sinks=[keep], background=True, linger=0) as em:
        em.emit(EventKind.STATUS)
        em.flush()
        assert [e.seq for e in keep.events] == [1]
    with pytest.raises(InputError, match="linger"):
        EventEmitter("d", linger=-1)


def test_queue_put_many_is_one_commit_in_order_and_stops_at_the_limit(tmp_path: Path) -> None:
    q = DiskQueue(tmp_path / "q.db", max_items=5)
    ids = q.put_many([(b"a", 1), ("b", 2), (b"c", None)])
    assert ids == sorted(ids) and len(q) == 3
    with pytest.raises(QueueFullError, match="1 new event"):
        q.put_many([(b"d", 4), (b"e", 5), (b"f", 6)])
    assert [(i.key, i.body) for i in q.peek(10)] == [(1, b"a"), (2, b"b"), (None, b"c"), (4, b"d"), (5, b"e")]
    q.close()
    q = DiskQueue(tmp_path / "q.db")  # durable: all five are there after reopening
    assert len(q) == 5 and q.put_many([]) == []
    q.close()


def test_rotating_write_many_rotates_inside_a_batch(tmp_path: Path) -> None:
    sink = RotatingJsonlSink(RotatingConfig(str(tmp_path / "ev"), max_bytes=2048, keep=None))
    events = list(_events(60))
    sink.write_many(events[:45])
    sink.write_many(events[45:])
    assert json.loads(sink.current_path.read_text().splitlines()[-1])["seq"] == 60  # flushed
    sink.close()
    assert len(sink.files()) > 3 and all(f.stat().st_size <= 2048 for f in sink.files())
    assert _read_all(sink) == list(range(1, 61))
