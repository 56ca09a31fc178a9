"""Inspection: zones (polygons in frame pixels), count rules per zone, PASS/FAIL per frame or
per trigger, and the TOML config that describes a cell::

    from edgekit.inspect import Inspector, load_config

    config = load_config("inspection.toml")
    with Inspector.from_config(config) as inspector:
        verdict = inspector.check(boxes_xyxy, labels, scores)
        print(verdict.label, [r.to_dict() for r in verdict.failed])

``edgekit inspect --config inspection.toml`` runs it on a camera with event sinks, metrics and
hot model updates.
"""

from __future__ import annotations

from edgekit.inspect.config import InspectionConfig, load_config, parse_config
from edgekit.inspect.inspector import Decision, Inspector
from edgekit.inspect.rules import Anchor, Rule, RuleResult, Verdict, Zone, evaluate
from edgekit.inspect.triggers import PublishMode, TriggerMode, TriggerRequest, Triggers, TriggerTimeout

__all__ = [
    "Anchor",
    "Decision",
    "InspectionConfig",
    "Inspector",
    "PublishMode",
    "Rule",
    "RuleResult",
    "TriggerMode",
    "TriggerRequest",
    "TriggerTimeout",
    "Triggers",
    "Verdict",
    "Zone",
    "evaluate",
    "load_config",
    "parse_config",
]
