"""Is a version on trial different from the one before it, beyond the belt's own variation?

The trial's frames and the baseline's are different frames at different moments: what is on the
belt varies (a defective part stays in view for dozens of frames, so a FAIL verdict comes in
runs). Frame counts overstate what was seen: 300 frames of a belt where a part takes 60 frames to
cross hold about five independent looks. :func:`difference` therefore compares the two means
with a standard error that counts effective samples, ``n / tau``, where ``tau`` is the integrated
autocorrelation time of the sequences themselves (``1 + 2 * sum of the lag correlations``, summed
while they stay positive: Geyer's initial positive sequence). Identical frames one after the
other count once; independent part verdicts count each.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Difference", "difference", "autocorrelation_time", "critical", "Z"]

Z = 3.0  # standard errors a difference must exceed with many looks (one-sided, about 1 in 740)

# Student's t at the same one-sided level as Z (scipy.stats.t.isf(norm.sf(3), df)): with few
# independent looks the variance itself is a guess, and the bar rises.
_T = ((1, 235.8), (2, 19.21), (3, 9.22), (4, 6.62), (5, 5.51), (6, 4.9), (8, 4.28), (10, 3.96), (15, 3.59),
      (20, 3.42), (30, 3.27), (60, 3.13), (120, 3.06))


def critical(df: float) -> float:
    """Standard errors a difference must exceed with `df` degrees of freedom."""
    if df <= 1:
        return _T[0][1]
    for (d0, t0), (d1, t1) in zip(_T, _T[1:]):
        if df <= d1:
            w = (np.log(df) - np.log(d0)) / (np.log(d1) - np.log(d0))
            return float(np.exp(np.log(t0) + w * (np.log(t1) - np.log(t0))))
    return Z + (_T[-1][1] - Z) * _T[-1][0] / df


class Difference(NamedTuple):
    delta: float  # trial mean - baseline mean
    se: float  # standard error of delta, from the effective sample sizes
    tau: float  # the autocorrelation time used (frames per independent look)
    df: float  # degrees of freedom (Welch-Satterthwaite over the independent looks)

    @property
    def z(self) -> float:
        return self.delta / self.se if self.se > 0 else (float("inf") if self.delta else 0.0)

    @property
    def significant(self) -> bool:
        """Beyond the belt's own variation: |z| above the bar for this many looks."""
        return abs(self.z) > critical(self.df)


def autocorrelation_time(x: np.ndarray) -> float:
    """``1 + 2 * sum(rho_k)`` over the lags whose correlation is positive (at most n/3 lags); 1 for
    a constant or very short sequence."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n < 4:
        return 1.0
    c = x - x.mean()
    var = float(c @ c)
    if var <= 0:
        return 1.0
    tau = 1.0
    for k in range(1, n // 3):
        rho = float(c[:-k] @ c[k:]) / var
        if rho <= 0:
            break
        tau += 2 * rho
    return min(tau, float(n))


def difference(base: np.ndarray, trial: np.ndarray, *, binary: bool) -> Difference | None:
    """The trial's mean minus the baseline's, with its standard error; None when either is empty.

    ``binary``: 0/1 values (FAIL verdicts), whose variance is the pooled ``p (1 - p)`` of both (the
    two-proportion test: a trial that fails everything has no variance of its own); otherwise the
    two variances pooled by size.
    """
    b, t = np.asarray(base, dtype=np.float64), np.asarray(trial, dtype=np.float64)
    if not len(b) or not len(t):
        return None
    if binary:
        p = (b.sum() + t.sum()) / (len(b) + len(t))
        var = p * (1 - p)
    else:
        var = (b.var() * len(b) + t.var() * len(t)) / (len(b) + len(t))
    tau = max(autocorrelation_time(b), autocorrelation_time(t))
    mb, mt = len(b) / tau, len(t) / tau  # independent looks
    se = float(np.sqrt(var * (1 / mb + 1 / mt)))
    # Welch-Satterthwaite with equal variances: the smaller sample decides how well var is known
    df = (1 / mb + 1 / mt) ** 2 / ((1 / mb) ** 2 / max(mb - 1, 1e-9) + (1 / mt) ** 2 / max(mt - 1, 1e-9))
    return Difference(float(t.mean() - b.mean()), se, tau, df)
