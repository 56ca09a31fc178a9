"""The accuracy gate: how many points the converted model lost, and whether that is allowed.

The drop is measured on the best basis the data allows: a detector's mAP@0.5 against labelled
objects (float model against quantized model), accuracy against labels, else
top-1 agreement with the float model, else mAP@0.5 against the float model's detections.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgekit.converters.evaluate import Metrics

__all__ = ["GateResult", "drop_points", "check_gate"]


@dataclass(frozen=True)
class GateResult:
    """The accuracy gate: passed when the drop (points, 0..100) is at most max_drop."""

    max_drop: float | None
    drop: float | None
    basis: str  # "map50-truth" | "accuracy" | "agreement" | "map50" | "none"
    passed: bool
    reason: str

    @property
    def status(self) -> str:
        return "NOT SET" if self.max_drop is None else ("PASS" if self.passed else "FAIL")

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "status": self.status, "max_drop": self.max_drop, "drop": self.drop,
                "basis": self.basis, "reason": self.reason}


def drop_points(metrics: Metrics | None) -> tuple[float | None, str]:
    """The loss in points and what it is measured on: labels, else agreement, else mAP."""
    if metrics is None:
        return None, "none"
    if getattr(metrics, "map50_truth", None) is not None and getattr(metrics, "float_map50_truth", None) is not None:
        return round(100 * (metrics.float_map50_truth - metrics.map50_truth), 4), "map50-truth"
    if metrics.accuracy is not None and metrics.float_accuracy is not None:
        return round(100 * (metrics.float_accuracy - metrics.accuracy), 4), "accuracy"
    if metrics.top1_agreement is not None:
        return round(100 * (1 - metrics.top1_agreement), 4), "agreement"
    if metrics.map50 is not None:
        return round(100 * (1 - metrics.map50), 4), "map50"
    return None, "none"


def check_gate(metrics: Metrics | None, max_drop: float | None) -> GateResult:
    """Compare the measured drop with the allowed one. No gate set: passed, status 'NOT SET'."""
    drop, basis = drop_points(metrics)
    if max_drop is None:
        return GateResult(None, drop, basis, True, "no --max-drop given")
    if drop is None:
        why = "no validation data" if metrics is None else "no top-1, label or detection measure for this model"
        return GateResult(max_drop, None, basis, False, f"the drop could not be measured ({why})")
    if basis == "map50" and metrics is not None and metrics.float_objects == 0:
        return GateResult(max_drop, drop, basis, False,
                          f"the float model found no objects in the {metrics.samples} validation image(s), so the "
                          "mAP@0.5 against it measures nothing; give --validation images that show the objects")
    name = {"accuracy": "accuracy against labels", "agreement": "top-1 agreement with the float model",
            "map50": "mAP@0.5 against the float model's detections",
            "map50-truth": "mAP@0.5 against the labelled objects"}[basis]
    passed = drop <= max_drop
    verb = "within" if passed else "over"
    reason = f"{name} dropped {drop:.2f} points, {verb} the {max_drop:g} allowed"
    return GateResult(max_drop, drop, basis, passed, reason)
