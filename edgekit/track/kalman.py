"""The constant-velocity Kalman filter ByteTrack (and SORT/DeepSORT before it) runs on each box.

State: ``cx, cy, a, h`` (box centre, aspect ratio width/height, height) and their velocities; the
measurement is ``cx, cy, a, h``. Noise grows with the box height, so a near (large) object may jump
further than a far one.

Each of the four coordinates moves on its own (the motion and the noise never mix them), so the
8x8 covariance of the textbook filter is four independent 2x2 blocks. They are kept as a (3, 4)
array: per coordinate its position variance, position-velocity covariance and velocity variance.
The figures are those of the full filter (the other entries stay exactly zero there); the work is
a few numpy operations on 4-vectors instead of 8x8 products and a solve. Numpy only, float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KalmanXYAH", "xyxy_to_xyah", "xyah_to_xyxy"]

_POS, _VEL = 1.0 / 20, 1.0 / 160  # noise per pixel of box height, for position and velocity
_A_POS, _A_VEL, _A_MEASURE = 1e-2, 1e-5, 1e-1  # the aspect ratio's own noise (not scaled by height)


def xyxy_to_xyah(box: np.ndarray) -> np.ndarray:
    """(..., 4) x1, y1, x2, y2 -> cx, cy, w/h, h."""
    box = np.asarray(box, dtype=np.float64)
    out = np.empty(box.shape)
    w, h = box[..., 2] - box[..., 0], box[..., 3] - box[..., 1]
    out[..., 0], out[..., 1] = box[..., 0] + w / 2, box[..., 1] + h / 2
    out[..., 2], out[..., 3] = w / np.maximum(h, 1e-9), h
    return out


def xyah_to_xyxy(xyah: np.ndarray) -> np.ndarray:
    """(..., 4) cx, cy, w/h, h -> x1, y1, x2, y2."""
    xyah = np.asarray(xyah, dtype=np.float64)
    out = np.empty(xyah.shape)
    h = xyah[..., 3]
    w = xyah[..., 2] * h
    out[..., 0], out[..., 1] = xyah[..., 0] - w / 2, xyah[..., 1] - h / 2
    out[..., 2], out[..., 3] = out[..., 0] + w, out[..., 1] + h
    return out


def _scaled(h: np.ndarray, weight: float, aspect: float) -> np.ndarray:
    """(..., 4) standard deviations: ``weight * h`` for cx, cy, h and ``aspect`` for a."""
    h = np.asarray(h, dtype=np.float64)
    std = np.empty(h.shape + (4,))
    std[...] = (weight * h)[..., None]
    std[..., 2] = aspect
    return std


class KalmanXYAH:
    """Predict and correct (mean, covariance) pairs; stateless, one instance serves every track.

    A mean is (8,): cx, cy, a, h and their velocities. A covariance is (3, 4): per coordinate the
    position variance, the position-velocity covariance and the velocity variance.
    """

    @staticmethod
    def initiate(measurement: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A new track's state from its first box (cx, cy, a, h): velocities 0, wide uncertainty."""
        m = np.asarray(measurement, dtype=np.float64)
        cov = np.zeros((3, 4))
        cov[0] = np.square(2 * _scaled(m[3], _POS, _A_POS / 2))
        cov[2] = np.square(10 * _scaled(m[3], _VEL, _A_VEL / 10))
        return np.r_[m, np.zeros(4)], cov

    @staticmethod
    def predict(means: np.ndarray, covs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One frame ahead for (N, 8) means and (N, 3, 4) covariances."""
        h = means[:, 3]
        pp, pv, vv = covs[:, 0], covs[:, 1], covs[:, 2]
        new = np.empty_like(covs)
        new[:, 0] = pp + 2 * pv + vv + np.square(_scaled(h, _POS, _A_POS))
        new[:, 1] = pv + vv
        new[:, 2] = vv + np.square(_scaled(h, _VEL, _A_VEL))
        out = means.copy()
        out[:, :4] += means[:, 4:]
        return out, new

    @staticmethod
    def update(mean: np.ndarray, cov: np.ndarray, measurement: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Correct one (8,) mean and (3, 4) covariance with a measured box (cx, cy, a, h)."""
        pp, pv, vv = cov
        s = pp + np.square(_scaled(mean[3], _POS, _A_MEASURE))
        gain_p, gain_v = pp / s, pv / s
        innovation = np.asarray(measurement, dtype=np.float64) - mean[:4]
        new_mean = mean.copy()
        new_mean[:4] += gain_p * innovation
        new_mean[4:] += gain_v * innovation
        new_cov = np.empty_like(cov)
        new_cov[0], new_cov[1], new_cov[2] = pp - gain_p * pp, pv - gain_p * pv, vv - gain_v * pv
        return new_mean, new_cov
