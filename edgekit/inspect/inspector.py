"""The Inspector: zones and rules applied per frame (continuous) or per trigger (on demand).

Independent of the detection loop: it takes plain boxes, labels and scores with the
frame's capture time, so any detector can feed it::

    inspector = Inspector.from_config(load_config("inspection.toml"))
    with inspector:
        for r in detector.stream(source):
            d = r.detections
            for decision in inspector.process(d.boxes, d.labels, d.scores, frame=r.index,
                                              captured_at=r.capture_ts):
                print(decision.to_payload())
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from edgekit.errors import ConfigError
from edgekit.inspect.config import InspectionConfig
from edgekit.inspect.rules import Rule, RulesVerdict, Zone, evaluate
from edgekit.inspect.triggers import PublishMode, TriggerMode, TriggerRequest, Triggers, TriggerTimeout

__all__ = ["Decision", "Inspector"]


@dataclass(frozen=True)
class Decision:
    """A verdict for one frame or trigger, or the error that kept a trigger from one."""

    verdict: RulesVerdict | None
    frame: int | None = None
    trigger_id: str | None = None
    trigger_source: str | None = None
    error: str | None = None
    publish: bool = True  # False: an unchanged continuous verdict with publish = "change"

    @property
    def passed(self) -> bool | None:
        return None if self.verdict is None else self.verdict.passed

    def to_payload(self) -> dict[str, Any]:
        out: dict[str, Any] = self.verdict.to_dict() if self.verdict else {"verdict": None}
        out["frame"] = self.frame
        if self.trigger_id is not None:
            out["trigger"] = {"id": self.trigger_id, "source": self.trigger_source}
        if self.error:
            out["error"] = self.error
        return out


class Inspector:
    """Zones + rules + trigger mode. A context manager (starts and stops the trigger sources).

    Args:
        zones, rules: see :mod:`edgekit.inspect.rules`.
        threshold: detections scoring below it are not counted.
        mode: continuous (a verdict per frame) or on-demand (a verdict per trigger).
        triggers: where on-demand triggers come from (default: Python calls only).
        publish: continuous mode: publish every verdict, or only when it changes.

    Raises:
        ConfigError: a rule names an undefined zone.
    """

    def __init__(self, zones: Iterable[Zone], rules: Iterable[Rule], *, threshold: float = 0.5,
                 mode: TriggerMode = TriggerMode.CONTINUOUS, triggers: Triggers | None = None,
                 publish: PublishMode = PublishMode.EVERY) -> None:
        self.zones = tuple(zones)
        self.rules = tuple(rules)
        names = {z.name for z in self.zones}
        for rule in self.rules:
            if rule.zone is not None and rule.zone not in names:
                raise ConfigError(f"rule {rule.describe()!r} names zone {rule.zone!r}, which is not defined")
        self.threshold = threshold
        self.mode = TriggerMode(mode)
        self.triggers = triggers if triggers is not None else Triggers()
        self.publish = PublishMode(publish)
        self._last_passed: bool | None = None

    @classmethod
    def from_config(cls, config: InspectionConfig) -> Inspector:
        t = config.trigger
        triggers = Triggers(file=t.file, http_port=t.http_port, http_host=t.http_host, timeout=t.timeout) \
            if t.mode is TriggerMode.ON_DEMAND else Triggers(timeout=t.timeout)
        return cls(config.zones, config.rules, threshold=config.model.threshold, mode=t.mode,
                   triggers=triggers, publish=t.publish)

    def check(self, boxes: Any, labels: Sequence[str], scores: Any = None, areas: Any = None) -> RulesVerdict:
        """The verdict for one frame's detections (or a segmentation's regions, with their pixel
        ``areas``), whatever the mode (pure)."""
        return evaluate(boxes, labels, self.zones, self.rules, scores=scores, threshold=self.threshold,
                        areas=areas)

    def trigger(self, trigger_id: str | None = None) -> TriggerRequest:
        """Ask for the verdict of the next frame captured from now (on-demand mode).

        Raises:
            ConfigError: the inspector runs in continuous mode.
        """
        if self.mode is not TriggerMode.ON_DEMAND:
            raise ConfigError("triggers need trigger.mode = \"on-demand\"; in continuous mode every frame "
                              "gets a verdict")
        return self.triggers.fire(trigger_id)

    def process(self, boxes: Any, labels: Sequence[str], scores: Any = None, *, frame: int | None = None,
                captured_at: float, areas: Any = None) -> list[Decision]:
        """The decisions one processed frame makes: one (continuous), or one per waiting
        trigger it answers plus one per trigger that timed out (on-demand)."""
        if self.mode is TriggerMode.CONTINUOUS:
            verdict = self.check(boxes, labels, scores, areas)
            changed = verdict.passed != self._last_passed
            self._last_passed = verdict.passed
            return [Decision(verdict, frame, publish=self.publish is PublishMode.EVERY or changed)]
        answered, expired = self.triggers.due(captured_at)
        out = self._expired(expired)
        if answered:
            verdict = self.check(boxes, labels, scores, areas)
            for req in answered:
                req.future.set_result(verdict)
                out.append(Decision(verdict, frame, req.id, req.source))
        return out

    def idle(self) -> list[Decision]:
        """Call when no frame arrived for a while: triggers past their deadline fail."""
        return self._expired(self.triggers.expire()) if self.mode is TriggerMode.ON_DEMAND else []

    @staticmethod
    def _expired(requests: list[TriggerRequest]) -> list[Decision]:
        out = []
        for req in requests:
            error = f"no frame captured within {req.deadline - req.created:g} s after the trigger"
            req.future.set_exception(TriggerTimeout(f"trigger {req.id!r}: {error}"))
            out.append(Decision(None, None, req.id, req.source, error=error))
        return out

    def start(self) -> Inspector:
        if self.mode is TriggerMode.ON_DEMAND:
            self.triggers.start()
        return self

    def close(self) -> None:
        self.triggers.close()

    def __enter__(self) -> Inspector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
