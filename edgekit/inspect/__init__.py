"""The inspection wing: a cell that detects, judges and reports, as a library.

Run a whole cell (detector, zones and rules, events to files/MQTT/webhook, metrics, hot model
updates, systemd watchdog) from its TOML config, without the CLI::

    from edgekit.inspect import Cell, load_config

    with Cell.from_config(load_config("inspection.toml")) as cell:
        for decision in cell.run(max_frames=300):        # Decision: verdict, frame, trigger
            print(decision.frame, decision.verdict.label if decision.verdict else decision.error)
        print(cell.summary.line())

Or only the rules, on boxes from any detector::

    config = load_config("inspection.toml")
    with Inspector.from_config(config) as inspector:
        verdict = inspector.check(boxes_xyxy, labels, scores)
        print(verdict.label, [r.to_dict() for r in verdict.failed])

What lives here: ``cell`` (the service), ``stage``/``stages`` (the pipeline each frame runs
through, and which stages a config asks for), ``live`` (what an open cell publishes),
``engine`` (what the cell needs of a detector), ``schema`` (the file's one schema and reader),
``config``/``sinkconfig``/``tomlpos`` (the TOML file), ``rules``/``inspector``/``triggers`` (zones,
rules, PASS/FAIL per frame or trigger), ``parts/`` (one verdict per part), ``events``/``sequence``
(numbered events), ``metrics`` (Prometheus), ``versions``/``modelwatch``/``selftest``/``hotswap``
(the versioned model folder and hot model updates), ``systemd`` (sd_notify and the watchdog),
``check`` (``edgekit inspect --check``).

Names are loaded on first use, so ``import edgekit.inspect.events`` (as the sinks' users do)
does not load the config parser or the cell.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgekit.inspect.cell import Cell
    from edgekit.inspect.check import ConfigCheck, check_config
    from edgekit.inspect.config import InspectionConfig, load_config, parse_config
    from edgekit.inspect.engine import CellDetector
    from edgekit.inspect.events import Event, EventEmitter, EventKind
    from edgekit.inspect.inspector import Decision, Inspector
    from edgekit.inspect.rules import Anchor, Rule, RuleResult, RulesVerdict, Zone, evaluate
    from edgekit.inspect.triggers import PublishMode, TriggerMode, TriggerRequest, Triggers, TriggerTimeout
    from edgekit.inspect.verdict import Verdict

_WHERE = {
    "Cell": "cell",
    "CellDetector": "engine",
    "ConfigCheck": "check",
    "check_config": "check",
    "InspectionConfig": "config",
    "load_config": "config",
    "parse_config": "config",
    "Event": "events",
    "EventEmitter": "events",
    "EventKind": "events",
    "Decision": "inspector",
    "Inspector": "inspector",
    "Anchor": "rules",
    "Rule": "rules",
    "RuleResult": "rules",
    "RulesVerdict": "rules",
    "Zone": "rules",
    "evaluate": "rules",
    "PublishMode": "triggers",
    "TriggerMode": "triggers",
    "TriggerRequest": "triggers",
    "TriggerTimeout": "triggers",
    "Triggers": "triggers",
    "Verdict": "verdict",
}

# Written out (not sorted(_WHERE)) so that tools see what the package hands on; the two agree (tests).
__all__ = ["Anchor", "Cell", "CellDetector", "ConfigCheck", "Decision", "Event", "EventEmitter", "EventKind",
           "InspectionConfig", "Inspector", "PublishMode", "Rule", "RuleResult", "RulesVerdict", "TriggerMode",
           "TriggerRequest", "TriggerTimeout", "Triggers", "Verdict", "Zone", "check_config", "evaluate",
           "load_config", "parse_config"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'edgekit.inspect' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"edgekit.inspect.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
