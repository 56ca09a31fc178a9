"""Which stages a cell's config asks for, in the order they run, and the two small ones that belong
to no wing: the rules (:class:`RulesStage`) and the Prometheus figures (:class:`MetricsStage`).

Judging stages come first (the parts, then the rules), watching ones after them (the metrics, a
release channel's follower, the dashboard), then the stages a library user passed. This table is
the one place that wires one stage to another (the dashboard's trigger button fires the rules'
trigger); :class:`~edgekit.inspect.cell.Cell` only opens, runs and closes the list.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from edgekit.inspect.events import EventKind
from edgekit.inspect.inspector import Decision, Inspector
from edgekit.inspect.stage import JudgedFrame, Stage, StageContext
from edgekit.inspect.triggers import TriggerMode
from edgekit.results import Detections, Segmentation

if TYPE_CHECKING:
    from edgekit.inspect.config import InspectionConfig
    from edgekit.results import FrameResult

__all__ = ["MetricsStage", "RulesStage", "config_stages"]


def _judged(result: FrameResult) -> tuple[Detections, list[int] | None]:
    """What the rules judge in a frame: a detector's boxes (areas: their own), or a segmenter's
    regions as boxes with the pixels they cover as areas (rules' min_area)."""
    if isinstance(result.result, Segmentation):
        return result.result.as_detections(), [r.area for r in result.result.regions]
    return result.detections, None


class RulesStage:
    """Zones, rules and triggers: a PASS/FAIL per frame or per trigger, each published as an
    ``inspection`` event. ``per_frame`` False (per-part mode without rules or triggers): the
    triggers still open, no frame is judged.

    Raises (when opened):
        ConfigError: a rule names a label the model lacks, or a trigger source cannot be set up.
    """

    def __init__(self, per_frame: bool = True) -> None:
        self.per_frame = per_frame
        self.inspector: Inspector | None = None

    def open(self, context: StageContext) -> None:
        context.config.check_labels(context.labels)  # no labels: the rules would count nothing
        self.events = context.events
        self.inspector = Inspector.from_config(context.config).start()

    def trigger(self, source: str) -> str:
        """Fire an on-demand trigger (answered by the next frame captured); returns its id.

        Raises:
            ConfigError: the cell runs in continuous mode. RuntimeError: the stage is not open.
        """
        if self.inspector is None:
            raise RuntimeError("the rules stage is not open")
        return self.inspector.trigger(source).id

    def process(self, frame: JudgedFrame) -> None:
        if not self.per_frame or self.inspector is None:
            return
        d, areas = _judged(frame.result)
        decisions: list[Decision] = self.inspector.process(d.xyxy, d.labels, d.scores, areas=areas,
                                                            frame=frame.result.index,
                                                            captured_at=frame.result.capture_ts)
        for decision in decisions:
            if decision.publish:
                self.events.emit(EventKind.INSPECTION, decision.to_payload())
        frame.decisions.extend(decisions)

    def close(self) -> None:
        if self.inspector is not None:
            self.inspector.close()
            self.inspector = None


class MetricsStage:
    """The per-frame series of the cell's Prometheus metrics: frames, inference and capture-to-result
    times, verdicts; the sinks' queues (from the cell's live state) once a second."""

    def __init__(self, queue_every: float = 1.0) -> None:
        self.queue_every = queue_every
        self.processed = 0
        self._last_queue = 0.0

    def open(self, context: StageContext) -> None:
        if context.metrics is None:
            raise ValueError("MetricsStage needs a cell with [metrics] enabled")
        self.metrics, self.events, self.live = context.metrics, context.events, context.live

    def process(self, frame: JudgedFrame) -> None:
        m, result = self.metrics, frame.result
        for decision in frame.decisions:
            if decision.verdict is not None:
                m.observe_verdict(decision.verdict.passed)
        self.processed += 1
        captured = result.index + 1  # frame indices count every frame the source produced
        m.frame_counts(captured=captured, processed=self.processed, dropped=max(0, captured - self.processed))
        m.observe_inference(result.stages.inference / 1e3)
        m.observe_capture_to_result(result.latency_ms / 1e3)
        if time.monotonic() - self._last_queue > self.queue_every:
            self._last_queue = time.monotonic()
            for sink in self.live().sinks:
                if sink.queued is not None:
                    m.set_queued(sink.name, sink.queued)
            if self.events.last_error:
                m.record_error("sinks", self.events.last_error)
                self.events.last_error = None

    def close(self) -> None:
        pass


def config_stages(config: InspectionConfig, *, metrics: bool, follower: Stage | None = None) -> list[Stage]:
    """The stages ``config`` asks for, in the order they run; ``metrics``: the cell serves metrics;
    ``follower``: a release channel's follower (opened apart, before the model folder)."""
    stages: list[Stage] = []
    if config.parts is not None:
        from edgekit.inspect.parts.stage import PartsStage  # tracking loads only for per-part mode

        stages.append(PartsStage(config.parts))
    per_frame = config.parts is None or bool(config.rules) or config.trigger.mode is not TriggerMode.CONTINUOUS
    rules = RulesStage(per_frame)
    stages.append(rules)
    if metrics:
        stages.append(MetricsStage())
    if follower is not None:  # its health check reads the frame's verdicts
        stages.append(follower)
    if config.dashboard is not None:
        from edgekit.inspect.dashboard.cellview import DashboardStage

        stages.append(DashboardStage(config.dashboard, trigger=rules.trigger))
    return stages

