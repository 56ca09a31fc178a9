"""``edgekit inspect --check``: the run's own opening path, stopped before the first frame is judged.

Not a second list of checks: :meth:`Cell.check` opens the cell exactly as the run does (state
folder, sinks, metrics port, model version and labels, trigger folder and port, PLC, dashboard
port), reads one frame from the source and checks the zones against its real size, then closes
everything again. Whatever the run refuses at start, the check refuses with the same sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from edgekit.inspect.config import InspectionConfig
from edgekit.inspect.triggers import TriggerMode

__all__ = ["ConfigCheck", "check_config"]


@dataclass(frozen=True)
class ConfigCheck:
    """What :func:`check_config` found. ``model`` is the file (or version) that would serve (None
    when a fleet cell's folder has no version yet: it fetches one at start; ``note`` says so)."""

    zones: int
    rules: int
    mode: TriggerMode
    model: str | None
    note: str | None = None
    frame: tuple[int, int] | None = None  # the source's first frame, (width, height)

    def line(self) -> str:
        if self.model is None:
            return f"config OK; note: {self.note}"
        size = f"; first frame {self.frame[0]}x{self.frame[1]}" if self.frame else ""
        return (f"config OK: {self.zones} zone(s), {self.rules} rule(s), {self.mode.value}; "
                f"model {self.model}{size}")


def check_config(config: InspectionConfig, model_dir: str | None = None, *,
                 isolate: bool | None = None) -> ConfigCheck:
    """Open the cell the config describes as the run would, read its first frame, close it.

    Raises:
        ConfigError, ModelError, SourceError: what the run would raise at start.
    """
    from edgekit.inspect.cell import Cell
    from edgekit.inspect.modelwatch import find_versions

    where = model_dir or config.model.dir
    zones, rules, mode = len(config.zones), len(config.rules), config.trigger.mode
    if where and config.fleet is not None and not find_versions(Path(where)):
        return ConfigCheck(zones, rules, mode, None, f"{where} has no model version yet; the cell fetches one "
                                                     f"from {config.fleet.channel} when it starts")
    cell = Cell.from_config(config, model_dir=model_dir, isolate=isolate)
    frame = cell.check()
    serving = config.model.path or ""
    if where:  # the version that would serve, as the run's events name it (NAME/1)
        version = Path(cell.detector.model.path).resolve().parent
        serving = f"{version.parent.name}/{version.name}"
    return ConfigCheck(zones, rules, mode, serving, frame=frame)
