"""What a following device remembers across restarts (``<state_dir>/fleet.json``, written atomically)."""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgekit.sinks.durable import atomic_write

__all__ = ["VersionTrial", "TrialPhase", "FollowerState", "Phase", "Outcome"]


class Phase(str, enum.Enum):
    STARTING = "starting"
    SERVING = "serving"
    DOWNLOADING = "downloading"
    TESTING = "testing"
    BASELINE = "baseline"  # verified and self-tested, held until the serving version has a full baseline
    INSTALLED = "installed"  # in the folder, waiting for the serving loop to switch
    TRIAL = "trial"
    ROLLED_BACK = "rolled_back"
    FAILED = "failed"
    STOPPED = "stopped"


class Outcome(str, enum.Enum):
    UNCHANGED = "unchanged"
    UP_TO_DATE = "up_to_date"
    NOT_SELECTED = "not_selected"
    INSTALLED = "installed"
    HELD = "held"  # verified and self-tested; placed once the serving version has a full baseline
    HALTED = "halted"
    REJECTED = "rejected"  # this version was rolled back or refused here before
    FAILED = "failed"


class TrialPhase(str, enum.Enum):
    """Where a version on trial stands (saved in fleet.json as its value)."""

    SELFTEST = "selftest"  # being loaded for the golden self-test
    HELD = "held"  # tested, in staging while the serving version collects its baseline; never served
    INSTALLED = "installed"  # in the folder, not yet served
    TRIAL = "trial"  # served, its health watched


@dataclass
class VersionTrial:
    """A version this device installed and has not yet found healthy."""

    version: int
    previous: int | None
    phase: TrialPhase

    def __post_init__(self) -> None:
        self.phase = TrialPhase(self.phase)  # from fleet.json: the value


@dataclass
class FollowerState:
    serial: int = 0  # the highest channel serial accepted (an older signed channel is a replay)
    trial: VersionTrial | None = None
    rejected: dict[int, str] = field(default_factory=dict)  # version -> why (never installed again)
    running: bool = False  # True while the process runs; found True at start: it ended without closing

    @classmethod
    def load(cls, path: Path) -> FollowerState:
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            trial = VersionTrial(**d["trial"]) if isinstance(d.get("trial"), dict) else None
            return cls(serial=int(d.get("serial", 0)), trial=trial,
                       rejected={int(k): str(v) for k, v in (d.get("rejected") or {}).items()},
                       running=bool(d.get("running")))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError, TypeError, KeyError):
            return cls()  # an unreadable state starts clean; the channel and the folder are the truth

    def save(self, path: Path) -> None:
        d: dict[str, Any] = asdict(self)
        d["rejected"] = {str(k): v for k, v in self.rejected.items()}
        atomic_write(path, json.dumps(d).encode("utf-8"))
