"""What an open inspection cell publishes about itself: one typed snapshot, :class:`LiveState`.

The dashboard's status, the metrics' queue gauges and anything else that watches a cell read
this (``cell.live()``, or the ``live`` of a stage's :class:`~edgekit.inspect.stage.StageContext`)
instead of the cell's attributes or the dicts of its events. Each field comes from a public
method of what the cell runs: a sink's :meth:`~QueuedSink.queued`, the rejector's
:meth:`~edgekit.inspect.plc.Rejector.state`, the emitter's counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Protocol, runtime_checkable

from edgekit.inspect.verdict import Verdict

if TYPE_CHECKING:
    from edgekit.inspect.events import EventSink
    from edgekit.inspect.plc import RejectReport, ReportKind

__all__ = ["LiveState", "ModelState", "QueuedSink", "RejectState", "SinkState", "Tallies", "sink_state"]


@runtime_checkable
class QueuedSink(Protocol):
    """An event sink that keeps what it has not delivered yet (MQTT, the webhook: a disk queue)."""

    def queued(self) -> int: ...


@dataclass(frozen=True)
class SinkState:
    """One event sink: its short name ("mqtt", "webhook", "rotatingjsonl") and how many events wait
    in it (None: it keeps no queue, or its queue is being closed)."""

    name: str
    queued: int | None = None


def sink_state(sink: EventSink) -> SinkState:
    """What a sink reports of itself (its queue through :class:`QueuedSink`)."""
    name = type(sink).__name__.replace("Sink", "").lower()
    if not isinstance(sink, QueuedSink):
        return SinkState(name)
    try:
        return SinkState(name, sink.queued())
    except Exception:  # noqa: BLE001 - a queue being closed reports nothing rather than break the reader
        return SinkState(name)


@dataclass(frozen=True)
class RejectState:
    """The PLC reject signals: where they go, their outcomes so far, how many wait, the last one."""

    outputs: tuple[str, ...]
    counts: Mapping[ReportKind, int]
    queued: int
    delay_s: float
    latency_ms_p50: float | None
    last: RejectReport | None


@dataclass(frozen=True)
class ModelState:
    """The serving model: the version events carry ("name/3", or "stem@sha256" for a fixed file),
    its file's name and the backend running it."""

    version: str | None
    file: str
    backend: str


@dataclass(frozen=True)
class Tallies:
    """Verdicts published since the cell opened: per-frame decisions (``errors``: decisions without
    a verdict, a trigger that timed out) and per-part verdicts."""

    frames: Mapping[Verdict, int] = field(default_factory=lambda: {v: 0 for v in Verdict})
    errors: int = 0
    parts: Mapping[Verdict, int] = field(default_factory=lambda: {v: 0 for v in Verdict})

    @property
    def published(self) -> int:
        """Per-frame decisions published as events."""
        return sum(self.frames.values()) + self.errors


@dataclass(frozen=True)
class LiveState:
    """A snapshot of an open cell (cheap to make: a few counters and one look at each queue)."""

    device: str
    model: ModelState | None  # None: no model opened yet
    captured: int  # frames the source produced (the last frame's index + 1)
    processed: int  # of them, judged
    tallies: Tallies
    sinks: tuple[SinkState, ...]
    sink_errors: int  # writes a sink refused, since the cell opened
    rejects: RejectState | None  # None: no PLC outputs

    @property
    def dropped(self) -> int:
        """Frames the loop skipped to stay current."""
        return max(0, self.captured - self.processed)
