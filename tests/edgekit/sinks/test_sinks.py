"""Events, the sequence counter, the disk queue and rotating JSON-lines files (the webhook: test_webhook.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgekit.errors import ConfigError, InputError
from edgekit.inspect.events import Event, EventEmitter, EventKind, SequenceCounter
from edgekit.sinks.diskqueue import DiskQueue, QueueError, QueueFullError
from edgekit.sinks.rotating import RotatingConfig, RotatingJsonlSink


# --- events --------------------------------------------------------------------------------

def test_event_json_round_trip_with_numpy_payload() -> None:
    e = EventEmitter("cell-1", clock=lambda: 1700000000.25).make(
        EventKind.INSPECTION, {"boxes": np.array([[1.5, 2, 3, 4]], dtype=np.float32), "n": np.int64(3),
                               "ok": np.bool_(True), "nan": float("nan")})
    back = Event.from_json(e.to_json())
    assert back == Event("cell-1", 1, EventKind.INSPECTION, 1700000000.25, None,
                         {"boxes": [[1.5, 2.0, 3.0, 4.0]], "n": 3, "ok": True, "nan": None})
    assert "\n" not in e.to_json()


def test_payload_values_become_plain_json_types() -> None:
    import enum
    from types import MappingProxyType

    from edgekit.inspect.events import to_jsonable

    class Verdict(str, enum.Enum):
        FAIL = "FAIL"

    class Level(enum.IntEnum):
        HIGH = 2

    payload = {"verdict": Verdict.FAIL, "level": Level.HIGH, "inf": float("-inf"), "path": Path("/data/crop.jpg"),
               "row": (1, "a", True, None, np.float32(0.5)), 3: MappingProxyType({"k": np.uint8(7)}),
               "flags": [np.bool_(False), False]}
    out = to_jsonable(payload)
    assert out == {"verdict": "FAIL", "level": 2, "inf": None, "path": "/data/crop.jpg", "row": [1, "a", True, None, 0.5],
                   "3": {"k": 7}, "flags": [False, False]}
    assert [type(v) for v in out["row"]] == [int, str, bool, type(None), float] and type(out["level"]) is int


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
