"""What a following device remembers across restarts (``<state_dir>/fleet.json``, written atomically)."""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edgekit.sinks.durable import atomic_write

__all__ = ["Trial", "FollowerState", "Phase", "Outcome"]


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


@dataclass
class Trial:
    """A version this device installed and has not yet found healthy."""

    version: int
    previous: int | None
    # "selftest": loading it for the golden self-test; "held": tested, in staging while the serving version
    # collects its baseline; "installed": in the folder; "trial": serving
    phase: str


@dataclass
class FollowerState:
    serial: int = 0  # the highest channel serial accepted (an older signed channel is a replay)
    trial: Trial | None = None
    rejected: dict[int, str] = field(default_factory=dict)  # version -> why (never installed again)
    running: bool = False  # True while the process runs; found True at start: it ended without closing

    @classmethod
    def load(cls, path: Path) -> FollowerState:
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            trial = Trial(**d["trial"]) if isinstance(d.get("trial"), dict) else None
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
