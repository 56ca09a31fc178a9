"""What the dashboard knows: the newest frame, the loop's figures, the last parts and events, counters.

The loop hands each result to :meth:`ViewState.observe` and each frame's verdicts to
:meth:`ViewState.count` (a few attribute writes under a lock held for microseconds: it never waits
for the server). Events, for the page's lists, arrive through :class:`EventFeed`, an event sink on
the cell's emitter, on the emitter's writer thread. The server reads copies.
"""

from __future__ import annotations

import collections
import datetime as dt
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple

import numpy as np

from edgekit.inspect.events import EventKind
from edgekit.inspect.verdict import Verdict

if TYPE_CHECKING:
    from edgekit.inspect.events import Event
    from edgekit.inspect.inspector import Decision
    from edgekit.inspect.parts.options import PartVerdict
    from edgekit.results import FrameResult

__all__ = ["Counters", "EventFeed", "Latest", "Tally", "ViewState", "shift_start"]

ERROR = "ERROR"  # the counters' key of a decision without a verdict (a trigger that timed out)


class Latest(NamedTuple):
    """The newest frame's result and what else to draw on it (the tracked parts and their defects)."""

    version: int  # grows by one per observed frame
    result: FrameResult
    extra: Any = None


def shift_start(now: dt.datetime, shifts: Iterable[int]) -> dt.datetime:
    """The start of the shift ``now`` falls in; ``shifts`` are start times in minutes after midnight."""
    starts = sorted(shifts)
    minute = now.hour * 60 + now.minute
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    earlier = [s for s in starts if s <= minute]
    if earlier:
        return day + dt.timedelta(minutes=earlier[-1])
    return day - dt.timedelta(days=1) + dt.timedelta(minutes=starts[-1])


@dataclass
class Tally:
    """Verdicts counted by outcome and by reason ("none" for a PASS; several defects joined by "+")."""

    by_verdict: dict[Verdict | None, int] = field(default_factory=lambda: {v: 0 for v in Verdict})
    by_reason: dict[str, int] = field(default_factory=dict)

    def add(self, verdict: Verdict | None, reason: str) -> None:
        """``verdict`` None: a decision without one (counted as ERROR)."""
        self.by_verdict[verdict] = self.by_verdict.get(verdict, 0) + 1
        if verdict is not Verdict.PASS:
            self.by_reason[reason] = self.by_reason.get(reason, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {"total": sum(self.by_verdict.values()),
                **{ERROR if v is None else v.value: n for v, n in self.by_verdict.items()},
                "reasons": dict(sorted(self.by_reason.items(), key=lambda kv: (-kv[1], kv[0])))}


class Counters:
    """Verdict counts since start and in the current shift (reset when a new shift begins)."""

    def __init__(self, shifts: tuple[int, ...], clock: Callable[[], float] = time.time) -> None:
        self.shifts, self._clock = shifts, clock
        self.since_start = Tally()
        self._shift_key = self._key(clock())
        self.shift = Tally()

    def _key(self, timestamp: float) -> dt.datetime:
        return shift_start(dt.datetime.fromtimestamp(timestamp), self.shifts)

    def _roll(self, timestamp: float) -> None:
        key = self._key(timestamp)
        if key > self._shift_key:
            self._shift_key, self.shift = key, Tally()

    def add(self, verdict: Verdict | None, reason: str, timestamp: float) -> None:
        self._roll(timestamp)
        self.since_start.add(verdict, reason)
        if self._key(timestamp) == self._shift_key:
            self.shift.add(verdict, reason)

    def to_dict(self) -> dict[str, Any]:
        self._roll(self._clock())
        start = self._shift_key
        ends = sorted(self.shifts)
        nxt = next((s for s in ends if s > start.hour * 60 + start.minute), ends[0])
        label = f"{start:%H:%M}-{nxt // 60:02d}:{nxt % 60:02d}" if len(ends) > 1 else "today"
        return {"shift": {"start": start.isoformat(timespec="minutes"), "label": label, **self.shift.to_dict()},
                "since_start": self.since_start.to_dict()}


def _reason_of(decision: Decision) -> str:
    """The counter label of a per-frame decision: its failed rules, or "error"."""
    if decision.error or decision.verdict is None:
        return "error"
    return "+".join(sorted({r.rule.label for r in decision.verdict.failed})) or "none"


class ViewState:
    """The shared state between the loop, the event writer and the server threads.

    Args:
        recent: parts and events kept.
        shifts: shift start times (minutes after midnight) for the shift counters.
        started: wall-clock start (default: now).
    """

    def __init__(self, *, recent: int = 200, shifts: tuple[int, ...] = (0,),
                 clock: Callable[[], float] = time.time) -> None:
        self.started = clock()
        self._lock = threading.Lock()  # the frame figures: shared with the loop, held for microseconds
        self._events_lock = threading.Lock()  # parts and events: the event writer and the server only
        self._count_lock = threading.Lock()  # the counters: the loop adds, the server reads
        self._latest: Latest | None = None
        self._version = 0
        self._times: collections.deque[float] = collections.deque(maxlen=120)
        self._latency: collections.deque[float] = collections.deque(maxlen=600)
        self.processed = 0
        self.last_index = -1
        self.parts: collections.deque[dict[str, Any]] = collections.deque(maxlen=recent)
        self.events: collections.deque[dict[str, Any]] = collections.deque(maxlen=recent)
        self.crops: dict[int, str] = {}  # part number -> JPEG file, for the parts still listed
        self.counters = Counters(shifts, clock)
        self.frame_counters = Counters(shifts, clock)  # per-frame verdicts (rules without [parts])
        self.last_event_seq = 0
        self.last_part = 0
        self.viewers = 0  # open /stream.mjpg connections
        self._page_viewers: dict[str, float] = {}  # client -> last /api/frame.jpg request (monotonic)

    # --- the loop's side ----------------------------------------------------------------
    def observe(self, result: FrameResult, extra: Any = None) -> None:
        """Take the newest frame's result (in the loop's thread; never waits on the server)."""
        now = time.perf_counter()
        with self._lock:
            self._version += 1
            self._latest = Latest(self._version, result, extra)
            self._times.append(now)
            self._latency.append(result.latency_ms)
            self.processed += 1
            self.last_index = result.index

    def latest(self) -> Latest | None:
        return self._latest

    def figures(self) -> dict[str, Any]:
        """fps over the last frames, capture-to-result latency p50/p99, frames processed and dropped."""
        with self._lock:
            times, latency = list(self._times), list(self._latency)
            processed, last = self.processed, self.last_index
        lat = np.array(latency, dtype=np.float64)
        now = time.perf_counter()
        fps = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0
        idle = now - times[-1] if times else None
        return {"fps": round(fps, 2), "latency_ms": {
                    "p50": round(float(np.percentile(lat, 50)), 2) if lat.size else None,
                    "p99": round(float(np.percentile(lat, 99)), 2) if lat.size else None},
                "processed": processed, "frame": last, "dropped": max(0, last + 1 - processed),
                "idle_s": None if idle is None else round(idle, 2),
                "running": idle is not None and idle < max(2.0, 5.0 / max(fps, 1e-3))}

    # --- viewers ------------------------------------------------------------------------
    def page_viewer(self, client: str) -> None:
        self._page_viewers[client] = time.monotonic()

    def viewer_count(self) -> int:
        cutoff = time.monotonic() - 3.0
        pages = sum(t >= cutoff for t in list(self._page_viewers.values()))
        return self.viewers + pages

    def count(self, parts: Iterable[PartVerdict], decisions: Iterable[Decision], timestamp: float) -> None:
        """Count a frame's part verdicts and its published per-frame decisions (the loop's thread)."""
        with self._count_lock:
            for part in parts:
                self.counters.add(part.outcome, part.reason, timestamp)
            for decision in decisions:
                verdict = decision.verdict.verdict if decision.verdict is not None else None
                self.frame_counters.add(verdict, _reason_of(decision), timestamp)

    def counter_docs(self) -> dict[str, Any]:
        """The parts' and the frames' counters, per shift and since start (for /api/status)."""
        with self._count_lock:
            return {"counters": self.counters.to_dict(), "frame_counters": self.frame_counters.to_dict()}

    # --- events (the emitter's writer thread) ------------------------------------------
    def on_event(self, event: Event) -> None:
        d = event.to_dict()
        payload = dict(d["payload"])
        if event.kind is EventKind.PART:
            number = int(payload.get("part", 0))
            crop = payload.pop("crop", None)
            if crop:
                payload["crop_url"] = f"/api/crops/{number}.jpg"
            item = {"seq": d["seq"], "timestamp": d["timestamp"], "model_version": d["model_version"], **payload}
            with self._events_lock:
                if len(self.parts) == self.parts.maxlen:
                    self.crops.pop(int(self.parts[0].get("part", 0)), None)
                self.parts.append(item)
                if crop:
                    self.crops[number] = str(crop)
                self.last_part = max(self.last_part, number)
        d["payload"] = payload
        with self._events_lock:
            self.events.append(d)
            self.last_event_seq = max(self.last_event_seq, int(d["seq"]))

    def parts_since(self, since: int) -> list[dict[str, Any]]:
        with self._events_lock:
            return [p for p in self.parts if int(p.get("part", 0)) > since]

    def events_since(self, since: int) -> list[dict[str, Any]]:
        with self._events_lock:
            return [e for e in self.events if e["seq"] > since]

    def crop_path(self, part: int) -> str | None:
        with self._events_lock:
            return self.crops.get(part)


class EventFeed:
    """An event sink for the cell's emitter that feeds a :class:`ViewState` (nothing to close)."""

    def __init__(self, state: ViewState) -> None:
        self.state = state

    def write(self, event: Event) -> None:
        self.state.on_event(event)

    def write_many(self, events: list[Event]) -> None:
        for event in events:
            self.state.on_event(event)

    def close(self) -> None:
        pass
