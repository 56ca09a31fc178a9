"""What an inspection cell publishes to the stages that watch it.

The cell judges each frame itself (rules, parts), then hands every watching stage one
:class:`JudgedFrame`; a stage reads that and the :class:`CellView` (what an open cell publishes),
never the cell's private attributes. The dashboard is one stage; a release channel's follower
(:class:`ModelFollower`, from ``edgekit.fleet``) is another, which the cell finds through
:mod:`edgekit.inspect.plugins` without importing it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence, cast

from edgekit.inspect.plugins import FOLLOWERS, callable_plugin

if TYPE_CHECKING:
    from edgekit.inspect.config import InspectionConfig
    from edgekit.inspect.engine import CellDetector
    from edgekit.inspect.events import EventEmitter, EventKind
    from edgekit.inspect.inspector import Decision, Inspector
    from edgekit.inspect.parts import PartVerdict
    from edgekit.inspect.parts.stage import PartsStage
    from edgekit.results import FrameResult

__all__ = ["JudgedFrame", "Stage", "CellView", "ModelFollower", "FollowerOpener", "follower_opener"]


@dataclass(frozen=True)
class JudgedFrame:
    """One frame as the cell judged it: its result, the frame's per-frame decisions and the part
    verdicts it gave (parts that crossed the line in it)."""

    result: FrameResult
    decisions: Sequence[Decision] = ()
    parts: Sequence[PartVerdict] = ()


class Stage(Protocol):
    """A part of the cell that watches each judged frame (the dashboard, a fleet follower's health
    check). Called on the loop's thread: it must not wait."""

    def on_frame(self, frame: JudgedFrame) -> None: ...


class CellView(Protocol):
    """What an open cell publishes for the stages that read it."""

    @property
    def config(self) -> InspectionConfig: ...

    @property
    def events(self) -> EventEmitter: ...

    @property
    def detector(self) -> CellDetector: ...

    @property
    def inspector(self) -> Inspector: ...

    @property
    def parts(self) -> PartsStage | None: ...


class ModelFollower(Stage, Protocol):
    """A stage that also decides which model versions the cell may switch to (a release channel's
    follower): it vets a version's folder before the cell reads it, and hears the cell's switches."""

    def vet(self, folder: Path) -> str | None: ...

    def on_model_event(self, kind: EventKind, payload: Mapping[str, Any]) -> None: ...


# (config, model folder, the cell's events, the cell's exit stack, isolate) -> the started follower
FollowerOpener = Callable[["InspectionConfig", str, "EventEmitter", contextlib.ExitStack, "bool | None"],
                          ModelFollower]


def follower_opener(name: str, asked_by: str) -> FollowerOpener:
    """What opens the follower of wing ``name`` (an ``edgekit.cell_followers`` entry point).

    Raises:
        ConfigError: none is installed, or what is installed is no function.
    """
    return cast(FollowerOpener, callable_plugin(FOLLOWERS, name, asked_by, "function"))
