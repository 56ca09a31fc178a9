"""Checks on the calibration set before anyone trusts an int8 model calibrated on it.

Int8 activations are scaled to the ranges seen during calibration. Too few samples, a
set whose statistics differ from real inputs (other lighting, another camera, a wrong
normalization), or classes that never appear, give ranges that clip or waste the 256
levels. These checks say so before the accuracy numbers do.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from edgekit.converters.data import Samples

__all__ = ["AuditFinding", "ChannelStats", "AuditReport", "audit_calibration",
           "MIN_SAMPLES", "RECOMMENDED_SAMPLES"]

MIN_SAMPLES = 100
RECOMMENDED_SAMPLES = 300
_MEAN_SHIFT = 0.25  # in pooled standard deviations
_STD_RATIO = 1.5
_OUTSIDE_FRACTION = 0.005  # of validation values outside the calibrated range


@dataclass(frozen=True)
class AuditFinding:
    code: str  # few-samples | constant | mean-shift | spread-shift | out-of-range | missing-class
    message: str


@dataclass(frozen=True)
class ChannelStats:
    """Per-channel statistics of model inputs (the last axis of image inputs, else one channel)."""

    mean: tuple[float, ...]
    std: tuple[float, ...]
    min: tuple[float, ...]
    max: tuple[float, ...]

    @classmethod
    def of(cls, x: np.ndarray) -> ChannelStats:
        flat = _channels(x)
        return cls(*(tuple(float(v) for v in f(flat, axis=0)) for f in (np.mean, np.std, np.min, np.max)))


def _channels(x: np.ndarray) -> np.ndarray:
    if x.ndim == 4 and x.shape[-1] in (1, 3, 4):
        return x.reshape(-1, x.shape[-1]).astype(np.float64)
    return x.reshape(-1, 1).astype(np.float64)


@dataclass(frozen=True)
class AuditReport:
    findings: tuple[AuditFinding, ...]
    calibration: ChannelStats | None
    validation: ChannelStats | None
    calibration_samples: int

    @property
    def warnings(self) -> list[str]:
        return [f.message for f in self.findings]

    def to_dict(self) -> dict[str, Any]:
        return {"calibration_samples": self.calibration_samples,
                "findings": [asdict(f) for f in self.findings],
                "calibration_stats": asdict(self.calibration) if self.calibration else None,
                "validation_stats": asdict(self.validation) if self.validation else None}


def audit_calibration(cal: Samples | None, val: Samples | None,
                      class_names: Sequence[str] | None = None) -> AuditReport:
    """Audit the calibration samples, against the validation samples when there are some."""
    if cal is None:
        return AuditReport((), None, ChannelStats.of(val.x) if val is not None else None, 0)
    findings: list[AuditFinding] = []
    n = len(cal)
    if n < MIN_SAMPLES:
        findings.append(AuditFinding("few-samples", f"only {n} calibration samples: use at least {MIN_SAMPLES} "
                                     f"({RECOMMENDED_SAMPLES} recommended) that look like the real inputs"))
    cs = ChannelStats.of(cal.x)
    if max(cs.std) < 1e-6:
        findings.append(AuditFinding("constant", "the calibration inputs are constant (every value "
                                     f"{cs.mean[0]:.4g}); int8 ranges calibrated on them clip every real input"))
    vs = ChannelStats.of(val.x) if val is not None else None
    if vs is not None and val is not None:
        findings.extend(_shift(cs, vs))
        findings.extend(_out_of_range(cal.x, val.x))
    if cal.y is not None:
        findings.extend(_missing_classes(cal.y, val.y if val is not None else None, class_names))
    return AuditReport(tuple(findings), cs, vs, n)


def _fmt(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:.3g}" for v in values) + "]"


def _shift(cs: ChannelStats, vs: ChannelStats) -> list[AuditFinding]:
    out = []
    pooled = np.sqrt((np.square(cs.std) + np.square(vs.std)) / 2)
    shift = np.abs(np.subtract(cs.mean, vs.mean)) / np.where(pooled > 0, pooled, 1.0)
    if np.any(shift > _MEAN_SHIFT):
        out.append(AuditFinding("mean-shift", f"calibration and validation inputs differ: per-channel mean "
                                f"{_fmt(cs.mean)} vs {_fmt(vs.mean)} (a shift of up to {shift.max():.2f} "
                                "standard deviations). Calibrate on data like the real inputs"))
    ratio = np.divide(vs.std, np.where(np.asarray(cs.std) > 0, cs.std, np.nan))
    if np.any(~np.isfinite(ratio)) or np.any((ratio > _STD_RATIO) | (ratio < 1 / _STD_RATIO)):
        out.append(AuditFinding("spread-shift", f"calibration and validation inputs differ in spread: per-channel "
                                f"std {_fmt(cs.std)} vs {_fmt(vs.std)}"))
    return out


def _out_of_range(cal: np.ndarray, val: np.ndarray) -> list[AuditFinding]:
    c, v = _channels(cal), _channels(val)
    lo, hi = c.min(axis=0), c.max(axis=0)
    outside = float(np.mean((v < lo) | (v > hi)))
    if outside <= _OUTSIDE_FRACTION:
        return []
    return [AuditFinding("out-of-range", f"{100 * outside:.1f}% of validation input values fall outside the "
                         f"calibrated range {_fmt(lo)}..{_fmt(hi)} (validation {_fmt(v.min(axis=0))}.."
                         f"{_fmt(v.max(axis=0))}); int8 clips them")]


def _missing_classes(cal_y: np.ndarray, val_y: np.ndarray | None,
                     class_names: Sequence[str] | None) -> list[AuditFinding]:
    # Classes of the data (not of a labels file: 1000 ImageNet names are not all expected here).
    if val_y is None:
        return []
    seen = set(int(c) for c in np.unique(cal_y))
    expected = set(int(c) for c in np.unique(val_y))
    missing = sorted(expected - seen)
    if not missing:
        return []
    names = [class_names[i] if class_names and i < len(class_names) else str(i) for i in missing]
    shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
    return [AuditFinding("missing-class", f"{len(missing)} class(es) never appear in the calibration set: {shown}. "
                         "Calibrate on samples of every class")]
