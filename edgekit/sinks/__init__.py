"""Where the detection loop's results go: one :class:`Sink` per output.

A sink takes one :class:`~edgekit.results.FrameResult` at a time in the loop's output
stage (the iterating thread) and releases what it holds on :meth:`Sink.close`, which is
safe to call twice. The built-in ones::

    from edgekit.sinks.jsonl import JsonlSink              # one JSON line per frame
    from edgekit.sinks.video_writer import VideoWriterSink  # annotated video (MJPG .avi)

Event sinks (MQTT, webhook, rotating files) take events instead: any :class:`EventRecord`, such as
:class:`edgekit.inspect.events.Event` (see :mod:`edgekit.inspect.events`). They depend on this small
protocol only, so the inspection wing builds on the sinks and never the other way round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # importing the package (e.g. for the MQTT sink) should not pull in OpenCV
    from edgekit.results import FrameResult

__all__ = ["EventRecord", "Sink"]


@runtime_checkable
class Sink(Protocol):
    """An output of the loop."""

    def write(self, result: FrameResult) -> None: ...

    def close(self) -> None: ...


class EventRecord(Protocol):
    """What an event sink needs of an event: who sent it, its sequence number, its JSON line."""

    @property
    def device(self) -> str: ...

    @property
    def seq(self) -> int: ...

    def to_json(self) -> str: ...
