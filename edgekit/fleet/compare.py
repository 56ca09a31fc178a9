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

__all__ = ["Difference", "difference", "autocorrelation_time", "Z"]

Z = 3.0  # standard errors a difference must exceed (one-sided, about 1 in 700 if the estimate holds)


class Difference(NamedTuple):
    delta: float  # trial mean - baseline mean
    se: float  # standard error of delta, from the effective sample sizes
    tau: float  # the autocorrelation time used (frames per independent look)

    @property
    def z(self) -> float:
        return self.delta / self.se if self.se > 0 else (float("inf") if self.delta else 0.0)


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
    se = float(np.sqrt(var * tau * (1 / len(b) + 1 / len(t))))
    return Difference(float(t.mean() - b.mean()), se, tau)
