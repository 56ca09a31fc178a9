"""Events: what an edgekit device tells the rest of the plant, one JSON object each.

Every event carries the device id, a sequence number that only grows (across restarts
too: it is persisted in a small state file), the model version that produced it, a wall
clock timestamp, a kind and a payload. A receiver detects a gap from the sequence numbers::

    from edgekit.inspect.events import EventEmitter, EventKind, SequenceCounter

    with EventEmitter("cell-4", SequenceCounter("state/seq.json"), sinks=[jsonl, mqtt]) as events:
        events.model_version = "inspection/2"
        events.emit(EventKind.INSPECTION, {"verdict": "PASS", "frame": 118})
"""

from __future__ import annotations

import enum
import functools
import json
import logging
import math
import os
import queue
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol

import numpy as np

from edgekit.errors import InputError
from edgekit.inspect.sequence import SequenceCounter

__all__ = ["Event", "EventKind", "EventSink", "EventEmitter", "SequenceCounter", "to_jsonable",
           "SCHEMA_VERSION"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1


class EventKind(str, enum.Enum):
    """What an event reports."""

    INSPECTION = "inspection"  # a PASS/FAIL verdict for a frame or a trigger
    DETECTION = "detection"  # the detections of one frame (no rules)
    MODEL_SWITCH = "model_switch"  # a new model version took over
    MODEL_REFUSED = "model_refused"  # a new version failed to load or its self-test; the old one runs on
    STATUS = "status"  # started, stopping, errors worth a dashboard's attention
    PART = "part"  # one part's verdict where its track crossed the line (per-part mode)
    REJECT = "reject"  # a reject signal to the PLC: written, retried, failed or dropped
    ROLLOUT = "rollout"  # a fleet rollout step: installed, trial, healthy, rollback, refused (edgekit.fleet)


@dataclass(frozen=True)
class Event:
    """One event. ``timestamp`` is seconds since the Unix epoch (wall clock)."""

    device: str
    seq: int
    kind: EventKind
    timestamp: float
    model_version: str | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"v": SCHEMA_VERSION, "device": self.device, "seq": self.seq, "kind": self.kind.value,
                "timestamp": self.timestamp, "model_version": self.model_version,
                "payload": to_jsonable(self.payload)}

    def to_json(self) -> str:
        """Compact JSON on one line (no NaN: non-finite floats become null)."""
        return self._json

    @functools.cached_property
    def _json(self) -> str:
        # Made once per event however many sinks write it (the event is immutable).
        return json.dumps(self.to_dict(), separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Event:
        """Rebuild an event from :meth:`to_dict` output.

        Raises:
            InputError: a field is missing or has the wrong type.
        """
        try:
            kind = EventKind(d["kind"])
            seq = d["seq"]
            if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
                raise InputError(f"event 'seq' must be a positive integer, got {seq!r}")
            payload = d.get("payload") or {}
            if not isinstance(payload, Mapping):
                raise InputError(f"event 'payload' must be an object, got {type(payload).__name__}")
            return cls(device=str(d["device"]), seq=seq, kind=kind, timestamp=float(d["timestamp"]),
                       model_version=d.get("model_version"), payload=dict(payload))
        except KeyError as exc:
            raise InputError(f"event JSON lacks the field {exc.args[0]!r}; expected device, seq, kind, "
                             f"timestamp (got keys {sorted(d)})") from None
        except (TypeError, ValueError) as exc:
            if isinstance(exc, InputError):
                raise
            raise InputError(f"event JSON has a field of the wrong type: {exc}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> Event:
        """Parse one event written by :meth:`to_json`.

        Raises:
            InputError: not JSON, or not an edgekit event.
        """
        try:
            d = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InputError(f"not an event: invalid JSON ({exc})") from None
        if not isinstance(d, dict):
            raise InputError(f"not an event: expected a JSON object, got {type(d).__name__}")
        return cls.from_dict(d)


def to_jsonable(value: Any) -> Any:
    """Plain JSON types from numpy scalars and arrays, tuples, enums and paths."""
    # Plain scalars first, by exact type: most of a payload is these, and the ABC checks below
    # (Mapping, PathLike) cost a microsecond each (a frame's event has a few dozen values).
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if value is None or isinstance(value, str):
        return value
    raise InputError(f"event payload values must be JSON data (numbers, strings, lists, dicts, numpy "
                     f"arrays), got {type(value).__name__}")


MAX_BATCH = 256  # events handed to a sink's write_many at once


class EventSink(Protocol):
    """Where events go: rotating files, MQTT, a webhook. ``close()`` is safe twice. A sink may
    also have ``write_many(events)``, writing a batch in order (the background writer uses it)."""

    def write(self, event: Event) -> None: ...

    def close(self) -> None: ...


class EventEmitter:
    """Numbers events and hands each to every sink; one failing sink never stops the others.

    Args:
        device: the device id (default: the host name).
        counter: where sequence numbers come from (default: in memory, from 1).
        sinks: event sinks; more can be added with :meth:`add_sink` before the first event.
        background: write to the sinks from a writer thread, so the caller (the loop's output
            stage) never waits for a disk or a network; events are numbered at once and
            written in that order. :meth:`flush` waits for the writer; :meth:`close` drains it.
        linger: (background) seconds the writer gathers events after the first before handing
            them over together: sinks with a ``write_many`` (files, the MQTT and webhook disk
            queues) then commit a batch with one fsync instead of one per event. At an event
            per frame that is most of what the sinks cost the loop's CPU; the price is that an
            event reaches the disk up to ``linger`` later. 0: each event as soon as it comes.
        clock: wall clock for timestamps (tests pass a fake).
    """

    def __init__(self, device: str | None = None, counter: SequenceCounter | None = None,
                 sinks: Iterable[EventSink] = (), *, background: bool = False, linger: float = 0.05,
                 clock: Any = time.time) -> None:
        self.device = device or socket.gethostname()
        self.counter = counter or SequenceCounter()
        self.sinks: list[EventSink] = list(sinks)
        self.model_version: str | None = None
        self.sink_errors = 0
        self.last_error: str | None = None
        self._clock = clock
        if linger < 0:
            raise InputError(f"linger must be 0 or more seconds, got {linger}")
        self._linger = linger
        self._lock = threading.Lock()
        self._closed = False
        self._pending: queue.Queue[Event | None] | None = None
        self._writer: threading.Thread | None = None
        if background:
            # Bounded: a disk that stalls for long slows the caller down instead of filling memory.
            self._pending = queue.Queue(maxsize=10_000)
            self._writer = threading.Thread(target=self._write_loop, args=(self._pending,), name="edgekit-events",
                                            daemon=True)
            self._writer.start()

    def add_sink(self, sink: EventSink) -> None:
        self.sinks.append(sink)

    def make(self, kind: EventKind, payload: Mapping[str, Any] | None = None) -> Event:
        """A numbered event, not yet sent anywhere."""
        return Event(device=self.device, seq=self.counter.next(), kind=EventKind(kind),
                     timestamp=self._clock(), model_version=self.model_version,
                     payload=to_jsonable(dict(payload or {})))

    def emit(self, kind: EventKind, payload: Mapping[str, Any] | None = None) -> Event:
        """Make an event and write it to every sink (or queue it for the writer), in sequence order."""
        with self._lock:
            # One lock around numbering and handing over keeps every sink in sequence order
            # when several threads emit (the loop, the model watcher, a trigger server).
            event = self.make(kind, payload)
            if self._pending is not None:
                self._pending.put(event)
            else:
                self._write(event)
            return event

    def _write(self, event: Event) -> None:
        self._write_batch([event])

    def _write_batch(self, events: list[Event]) -> None:
        for sink in self.sinks:
            many = getattr(sink, "write_many", None)
            try:
                if many is not None and len(events) > 1:
                    many(events)
                else:
                    for event in events:
                        sink.write(event)
            except Exception as exc:  # noqa: BLE001 - a broken sink must not stop the line
                self.sink_errors += 1
                self.last_error = f"{type(sink).__name__}: {exc}"
                seqs = f"{events[0].seq}" if len(events) == 1 else f"{events[0].seq}-{events[-1].seq}"
                log.error("event sink %s failed on event(s) %s: %s", type(sink).__name__, seqs, exc)

    def _write_loop(self, pending: queue.Queue[Event | None]) -> None:
        while True:
            batch = [pending.get()]
            deadline = time.monotonic() + self._linger
            while batch[-1] is not None and len(batch) < MAX_BATCH:
                left = deadline - time.monotonic()
                try:
                    batch.append(pending.get(timeout=left) if left > 0 else pending.get_nowait())
                except queue.Empty:
                    break
            events = [e for e in batch if e is not None]
            if events:
                self._write_batch(events)
            for _ in batch:
                pending.task_done()
            if batch[-1] is None:
                return

    def flush(self) -> None:
        """Wait until every event emitted so far has been handed to the sinks."""
        if self._pending is not None:
            self._pending.join()

    def close(self) -> None:
        """Write what is queued, close every sink, then record the last sequence number.
        Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._pending is not None and self._writer is not None:
            self._pending.put(None)
            self._writer.join()
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as exc:  # noqa: BLE001 - close the others regardless
                log.error("closing event sink %s failed: %s", type(sink).__name__, exc)
        self.counter.close()

    def __enter__(self) -> EventEmitter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
