"""Checking a cell's config before it runs (``edgekit inspect --check``): the config parses, and
the model, when present, loads and knows every label the rules name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgekit.inspect.config import InspectionConfig
from edgekit.inspect.triggers import TriggerMode

__all__ = ["ConfigCheck", "check_config"]


@dataclass(frozen=True)
class ConfigCheck:
    """What :func:`check_config` found. ``model`` is the file that would serve (None when the
    model folder has no version yet; ``note`` then says where to put one)."""

    zones: int
    rules: int
    mode: TriggerMode
    model: str | None
    note: str | None = None

    def line(self) -> str:
        if self.model is None:
            return f"config OK; note: {self.note}"
        return (f"config OK: {self.zones} zone(s), {self.rules} rule(s), {self.mode.value}; "
                f"model {self.model}")


def check_config(config: InspectionConfig, model_dir: str | None = None) -> ConfigCheck:
    """Load the model the cell would serve and check the rules' labels against it.

    Raises:
        ConfigError: a rule names a label the model lacks.
        ModelError: the model file (or every version in the folder) cannot serve.
    """
    from edgekit.inspect.modelwatch import ModelWatcher, find_versions
    from edgekit.runtimes import load_model

    where = model_dir or config.model.dir
    zones, rules, mode = len(config.zones), len(config.rules), config.trigger.mode
    if where and not find_versions(Path(where)):
        first = Path(where) / "1" / "model.tflite"
        if config.fleet is not None:
            return ConfigCheck(zones, rules, mode, None, f"{where} has no model version yet; the cell fetches one "
                                                         f"from {config.fleet.channel} when it starts")
        return ConfigCheck(zones, rules, mode, None, f"{where} has no model version yet (put one at {first})")
    if where:
        with ModelWatcher(where, delegate=config.model.delegate).start(background=False) as w:
            labels = (w.model.metadata or {}).get("labels")
            serving = str(w.current)
    else:
        serving = config.model.path or ""
        with load_model(serving, config.model.delegate, config.model.threads) as m:
            labels = (m.metadata or {}).get("labels")
    if config.model.labels:
        from edgekit.labels import load_labels
        labels = load_labels(config.model.labels)
    config.check_labels([str(x) for x in labels] if labels else None)  # no labels: rules cannot count
    if config.parts is not None:  # per-part mode: its part and defect classes too
        config.parts.check_labels([str(x) for x in labels] if labels else None)
    return ConfigCheck(zones, rules, mode, serving)
