"""The constant-velocity Kalman filter ByteTrack (and SORT/DeepSORT before it) runs on each box.

State: ``cx, cy, a, h`` (box centre, aspect ratio width/height, height) and their velocities; the
measurement is ``cx, cy, a, h``. Noise grows with the box height, so a near (large) object may jump
further than a far one.

Each of the four coordinates moves on its own (the motion and the noise never mix them), so the
8x8 covariance of the textbook filter is four independent 2x2 blocks; they are kept as 12 numbers:
per coordinate the position variance, then the position-velocity covariances, then the velocity
variances. The figures are those of the full filter (its other entries stay exactly zero), and a
track costs a few dozen float operations per frame: plain Python floats, faster than numpy calls
on arrays this small (a tracker follows tens of objects, not thousands).
"""

from __future__ import annotations

from typing import Sequence

__all__ = ["KalmanXYAH", "xyah_of", "box_of"]

_POS, _VEL = 1.0 / 20, 1.0 / 160  # noise per pixel of box height, for position and velocity
_A_POS, _A_VEL, _A_MEASURE = 1e-2, 1e-5, 1e-1  # the aspect ratio's own noise (not scaled by height)


def xyah_of(x1: float, y1: float, x2: float, y2: float) -> list[float]:
    """A box's cx, cy, w/h, h."""
    w, h = x2 - x1, y2 - y1
    return [x1 + w / 2, y1 + h / 2, w / max(h, 1e-9), h]


def box_of(mean: Sequence[float]) -> tuple[float, float, float, float]:
    """x1, y1, x2, y2 of a state or measurement (cx, cy, a, h, ...)."""
    h = mean[3]
    w = mean[2] * h
    x1, y1 = mean[0] - w / 2, mean[1] - h / 2
    return x1, y1, x1 + w, y1 + h


class KalmanXYAH:
    """Predict and correct one track's state in place; stateless.

    A mean is 8 floats (cx, cy, a, h and their velocities); a covariance is 12 floats (see the module).
    """

    @staticmethod
    def initiate(measurement: Sequence[float]) -> tuple[list[float], list[float]]:
        """A new track's state from its first box (cx, cy, a, h): velocities 0, wide uncertainty."""
        h = measurement[3]
        p, v = 2 * _POS * h, 10 * _VEL * h
        a_p, a_v = 2 * (_A_POS / 2), 10 * (_A_VEL / 10)
        cov = [p * p, p * p, a_p * a_p, p * p, 0.0, 0.0, 0.0, 0.0, v * v, v * v, a_v * a_v, v * v]
        return [*measurement[:4], 0.0, 0.0, 0.0, 0.0], cov

    @staticmethod
    def predict(mean: list[float], cov: list[float]) -> None:
        """One frame ahead."""
        h = mean[3]
        qp, qv = (_POS * h) ** 2, (_VEL * h) ** 2
        for i, (q_pos, q_vel) in enumerate(((qp, qv), (qp, qv), (_A_POS ** 2, _A_VEL ** 2), (qp, qv))):
            pp, pv, vv = cov[i], cov[4 + i], cov[8 + i]
            cov[i] = pp + 2 * pv + vv + q_pos
            cov[4 + i] = pv + vv
            cov[8 + i] = vv + q_vel
            mean[i] += mean[4 + i]

    @staticmethod
    def update(mean: list[float], cov: list[float], measurement: Sequence[float]) -> None:
        """Correct with a measured box (cx, cy, a, h)."""
        r = (_POS * mean[3]) ** 2
        for i, noise in enumerate((r, r, _A_MEASURE ** 2, r)):
            pp, pv, vv = cov[i], cov[4 + i], cov[8 + i]
            s = pp + noise
            gain_p, gain_v = pp / s, pv / s
            innovation = measurement[i] - mean[i]
            mean[i] += gain_p * innovation
            mean[4 + i] += gain_v * innovation
            cov[i] = pp - gain_p * pp
            cov[4 + i] = pv - gain_p * pv
            cov[8 + i] = vv - gain_v * pv
