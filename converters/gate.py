"""The accuracy gate: how many points the converted model lost, how far its boxes and scores moved,
and whether that is allowed.

The drop is measured on the best basis the data allows: a detector's mAP@0.5 against labelled
objects (float model against quantized model), accuracy against labels, else
top-1 agreement with the float model, else mAP@0.5 against the float model's detections.
A detector can also be gated on its fidelity to the float model (:mod:`.fidelity`): the
matched boxes' mean IoU, the mean score error, the extra boxes at the threshold.
The targets are :mod:`.targets`' (:class:`GateTargets`); no target given, no gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgekit.converters.evaluate import Metrics
from edgekit.converters.targets import GateMeasure, GateTargets

__all__ = ["GateMeasure", "GateTargets", "GateCheck", "GateResult", "drop_points", "check_gate"]


@dataclass(frozen=True)
class GateCheck:
    """One measure against its limit (value None: it could not be measured, and the check fails)."""

    measure: GateMeasure
    value: float | None
    limit: float
    passed: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"measure": self.measure.value, "value": self.value, "limit": self.limit, "passed": self.passed,
                "reason": self.reason}


@dataclass(frozen=True)
class GateResult:
    """The accuracy gate: passed when every check passed (the drop, points 0..100, at most max_drop,
    and the fidelity limits). ``checks`` names each measure gated on."""

    max_drop: float | None
    drop: float | None
    basis: str  # "map50-truth" | "accuracy" | "agreement" | "map50" | "none"
    passed: bool
    reason: str
    checks: tuple[GateCheck, ...] = ()

    @property
    def status(self) -> str:
        return "NOT SET" if not self.checks else ("PASS" if self.passed else "FAIL")

    @property
    def gated_on(self) -> tuple[GateMeasure, ...]:
        return tuple(c.measure for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "status": self.status, "max_drop": self.max_drop, "drop": self.drop,
                "basis": self.basis, "reason": self.reason, "gated_on": [m.value for m in self.gated_on],
                "checks": [c.to_dict() for c in self.checks]}


def drop_points(metrics: Metrics | None) -> tuple[float | None, str]:
    """The loss in points and what it is measured on: labels, else agreement, else mAP."""
    if metrics is None:
        return None, "none"
    if metrics.map50_truth is not None and metrics.float_map50_truth is not None:
        return round(100 * (metrics.float_map50_truth - metrics.map50_truth), 4), "map50-truth"
    if metrics.accuracy is not None and metrics.float_accuracy is not None:
        return round(100 * (metrics.float_accuracy - metrics.accuracy), 4), "accuracy"
    if metrics.top1_agreement is not None:
        return round(100 * (1 - metrics.top1_agreement), 4), "agreement"
    if metrics.map50 is not None:
        return round(100 * (1 - metrics.map50), 4), "map50"
    return None, "none"


def check_gate(metrics: Metrics | None, targets: GateTargets | float | None) -> GateResult:
    """Compare the measures with the targets (a number: --max-drop alone). No target: passed, 'NOT SET'."""
    t = targets if isinstance(targets, GateTargets) else GateTargets(max_drop=targets)
    drop, basis = drop_points(metrics)
    checks: list[GateCheck] = []
    if t.max_drop is not None:
        checks.append(_drop_check(metrics, t.max_drop, drop, basis))
    fid = metrics.detection if metrics is not None else None
    values: tuple[float | None, float | None, float | None] = (None, None, None) if fid is None else \
        (fid.box_iou_mean, fid.score_error_mean, float(fid.extra))
    for (measure, limit, upper), value in zip((
            (GateMeasure.BOX_IOU, t.min_box_iou, False), (GateMeasure.SCORE_ERROR, t.max_score_error, True),
            (GateMeasure.EXTRA_BOXES, t.max_extra_boxes, True)), values):
        if limit is not None:
            checks.append(_fidelity_check(metrics, measure, float(limit), value, upper))
    if not checks:
        return GateResult(None, drop, basis, True, "no --max-drop given")
    failed = [c for c in checks if not c.passed]
    reason = "; ".join(c.reason for c in (failed or checks))
    return GateResult(t.max_drop, drop, basis, not failed, reason, tuple(checks))


def _drop_check(metrics: Metrics | None, max_drop: float, drop: float | None, basis: str) -> GateCheck:
    m = GateMeasure.DROP
    if drop is None:
        why = "no validation data" if metrics is None else "no top-1, label or detection measure for this model"
        return GateCheck(m, None, max_drop, False, f"the drop could not be measured ({why})")
    if basis == "map50" and metrics is not None and metrics.float_objects == 0:
        return GateCheck(m, drop, max_drop, False,
                         f"the float model found no objects in the {metrics.samples} validation image(s), so the "
                         "mAP@0.5 against it measures nothing; give --validation images that show the objects")
    name = {"accuracy": "accuracy against labels", "agreement": "top-1 agreement with the float model",
            "map50": "mAP@0.5 against the float model's detections",
            "map50-truth": "mAP@0.5 against the labelled objects"}[basis]
    passed = drop <= max_drop
    return GateCheck(m, drop, max_drop, passed,
                     f"{name} dropped {drop:.2f} points, {'within' if passed else 'over'} the {max_drop:g} allowed")


_NAMES = {GateMeasure.BOX_IOU: "the matched boxes' mean IoU with the float model's",
          GateMeasure.SCORE_ERROR: "the mean score error against the float model",
          GateMeasure.EXTRA_BOXES: "the boxes the float model does not show"}


def _fidelity_check(metrics: Metrics | None, measure: GateMeasure, limit: float, value: float | None,
                    upper: bool) -> GateCheck:
    """`value` at most `limit` (`upper`) or at least it; None: not measurable here."""
    name = _NAMES[measure]
    if value is None:
        fid = metrics.detection if metrics is not None else None
        why = ("no validation data" if metrics is None else "the model is not a detector" if fid is None
               else f"no float detection was matched in the {metrics.samples} validation image(s)")
        return GateCheck(measure, None, limit, False, f"{name} could not be measured ({why}; {measure.flag})")
    passed = value <= limit if upper else value >= limit
    verb = ("within" if passed else "over") if upper else ("at least" if passed else "under")
    shown = f"{value:g}" if measure is GateMeasure.EXTRA_BOXES else f"{value:.3f}"
    return GateCheck(measure, float(value), limit, passed,
                     f"{name} is {shown}, {verb} the {limit:g} {'allowed' if upper else 'wanted'} ({measure.flag})")
