"""The cell as a pipeline of stages: what a stage is, and what the cell hands it.

A :class:`Stage` is opened once with a :class:`StageContext` (the cell's config, events, metrics,
state folder, and :class:`~edgekit.inspect.live.LiveState` on demand), then processes every frame
and is closed when the cell closes (newest first). The cell runs its stages in order on each frame's
:class:`JudgedFrame`: the judging stages (parts, rules) add their verdicts to it, the watching
ones (metrics, a release channel's health check, the dashboard) read them. A stage reads what the
cell publishes, never the cell's attributes nor another stage's. Which stages a config asks for is
decided in :mod:`edgekit.inspect.stages`; a library user adds more with ``Cell(..., stages=[...])``::

    class Counter:
        def open(self, context: StageContext) -> None: self.n = 0
        def process(self, frame: JudgedFrame) -> None: self.n += len(frame.parts)
        def close(self) -> None: print(self.n, "parts")

A release channel's follower (:class:`ModelFollower`, from ``edgekit.fleet``) is a stage that also
vets model versions; the cell finds its opener through :mod:`edgekit.inspect.plugins` without
importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, cast

from edgekit.inspect.plugins import FOLLOWERS, callable_plugin

if TYPE_CHECKING:
    from edgekit.inspect.config import InspectionConfig
    from edgekit.inspect.events import EventEmitter, EventKind
    from edgekit.inspect.inspector import Decision
    from edgekit.inspect.live import LiveState, RejectState
    from edgekit.inspect.metrics import CellMetrics
    from edgekit.inspect.parts.inspector import PartsFrame
    from edgekit.inspect.parts.options import PartVerdict
    from edgekit.results import FrameResult

__all__ = ["JudgedFrame", "Stage", "StageContext", "ModelFollower", "FollowerOpener", "follower_opener"]


@dataclass
class JudgedFrame:
    """One frame on its way through the stages: its result, the per-frame decisions and part
    verdicts the judging stages gave it (parts that crossed the line in it), and the tracked parts
    to draw (``tracked``, per-part mode)."""

    result: FrameResult
    decisions: list[Decision] = field(default_factory=list)
    parts: list[PartVerdict] = field(default_factory=list)
    tracked: PartsFrame | None = None

    @property
    def published(self) -> list[Decision]:
        """The decisions published as events (an unchanged verdict with ``publish = "change"`` is not)."""
        return [d for d in self.decisions if d.publish]


def _no_trigger(source: str) -> str:
    raise RuntimeError(f"this cell takes no trigger ({source})")


@dataclass(frozen=True)
class StageContext:
    """What the cell hands each stage when it opens.

    Attributes:
        config: the cell's config.
        events: the cell's event emitter (a stage may emit events and add a sink).
        live: the cell's :class:`~edgekit.inspect.live.LiveState` now (any thread).
        metrics: the cell's Prometheus metrics, or None.
        labels: the model's class names (None: it has none).
        checking: opened by ``--check``: open what the run opens, publish nothing.
        trigger: fire the cell's on-demand trigger; returns the trigger's id.
        report_rejects: a stage that signals rejects hands the cell what reports on them (part of
            :class:`~edgekit.inspect.live.LiveState`).
    """

    config: InspectionConfig
    events: EventEmitter
    live: Callable[[], LiveState]
    metrics: CellMetrics | None = None
    labels: list[str] | None = None
    checking: bool = False
    trigger: Callable[[str], str] = _no_trigger
    report_rejects: Callable[[Callable[[], RejectState | None]], None] = lambda source: None

    @property
    def state_dir(self) -> Path:
        return Path(self.config.state_dir)


class Stage(Protocol):
    """One step of the cell's pipeline. ``process`` runs on the loop's thread: it must not wait
    (hand slow work to a thread of its own). ``close`` is safe twice."""

    def open(self, context: StageContext) -> None: ...

    def process(self, frame: JudgedFrame) -> None: ...

    def close(self) -> None: ...


class ModelFollower(Stage, Protocol):
    """A stage that also decides which model versions the cell may switch to (a release channel's
    follower): it vets a version's folder before the cell reads it, and hears the cell's switches.
    It is opened by its :data:`FollowerOpener` before the model folder (``open`` is then a no-op)."""

    def vet(self, folder: Path) -> str | None: ...

    def on_model_event(self, kind: EventKind, payload: Mapping[str, Any]) -> None: ...


# (the cell's context, its model folder, isolate) -> the started follower; it closes itself if opening fails
FollowerOpener = Callable[[StageContext, str, "bool | None"], ModelFollower]


def follower_opener(name: str, asked_by: str) -> FollowerOpener:
    """What opens the follower of wing ``name`` (an ``edgekit.cell_followers`` entry point).

    Raises:
        ConfigError: none is installed, or what is installed is no function.
    """
    return cast(FollowerOpener, callable_plugin(FOLLOWERS, name, asked_by, "function"))
