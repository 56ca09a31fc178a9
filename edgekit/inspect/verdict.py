"""PASS or FAIL, spelled once: a frame's rules (:attr:`RulesVerdict.verdict`), a part's
(:attr:`PartVerdict.outcome`), the ``verdict`` of event payloads, the counters' keys."""

from __future__ import annotations

import enum

__all__ = ["Verdict"]


class Verdict(str, enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"

    @classmethod
    def of(cls, passed: bool) -> Verdict:
        return cls.PASS if passed else cls.FAIL
