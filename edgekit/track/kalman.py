"""The constant-velocity Kalman filter ByteTrack (and SORT/DeepSORT before it) runs on each box.

State: ``cx, cy, a, h`` (box centre, aspect ratio width/height, height) and their velocities; the
measurement is ``cx, cy, a, h``. Noise grows with the box height, so a near (large) object may jump
further than a far one. Numpy only; the arrays are float64 so the filter does not drift.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KalmanXYAH", "xyxy_to_xyah", "xyah_to_xyxy"]

_POS, _VEL = 1.0 / 20, 1.0 / 160  # noise per pixel of box height, for position and velocity
_MOTION = np.eye(8) + np.eye(8, k=4)  # x' = x + v (one frame)
_OBSERVE = np.eye(4, 8)


def xyxy_to_xyah(box: np.ndarray) -> np.ndarray:
    """(..., 4) x1, y1, x2, y2 -> cx, cy, w/h, h."""
    box = np.asarray(box, dtype=np.float64)
    w, h = box[..., 2] - box[..., 0], box[..., 3] - box[..., 1]
    return np.stack([box[..., 0] + w / 2, box[..., 1] + h / 2, w / np.maximum(h, 1e-9), h], axis=-1)


def xyah_to_xyxy(xyah: np.ndarray) -> np.ndarray:
    """(..., 4) cx, cy, w/h, h -> x1, y1, x2, y2."""
    xyah = np.asarray(xyah, dtype=np.float64)
    h = xyah[..., 3]
    w = xyah[..., 2] * h
    return np.stack([xyah[..., 0] - w / 2, xyah[..., 1] - h / 2, xyah[..., 0] + w / 2, xyah[..., 1] + h / 2],
                    axis=-1)


class KalmanXYAH:
    """Predict and correct (mean, covariance) pairs; stateless, one instance serves every track."""

    @staticmethod
    def initiate(measurement: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A new track's state from its first box (cx, cy, a, h): velocities 0, wide uncertainty."""
        m = np.asarray(measurement, dtype=np.float64)
        h = m[3]
        std = [2 * _POS * h, 2 * _POS * h, 1e-2, 2 * _POS * h, 10 * _VEL * h, 10 * _VEL * h, 1e-5, 10 * _VEL * h]
        return np.r_[m, np.zeros(4)], np.diag(np.square(std))

    @staticmethod
    def predict(means: np.ndarray, covs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One frame ahead for (N, 8) means and (N, 8, 8) covariances."""
        h = means[:, 3]
        one = np.ones_like(h)
        std = np.stack([_POS * h, _POS * h, 1e-2 * one, _POS * h, _VEL * h, _VEL * h, 1e-5 * one, _VEL * h], axis=1)
        noise = np.zeros_like(covs)
        idx = np.arange(8)
        noise[:, idx, idx] = np.square(std)
        return means @ _MOTION.T, _MOTION @ covs @ _MOTION.T + noise

    @staticmethod
    def update(mean: np.ndarray, cov: np.ndarray, measurement: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Correct one (8,) mean and (8, 8) covariance with a measured box (cx, cy, a, h)."""
        h = mean[3]
        innovation_cov = _OBSERVE @ cov @ _OBSERVE.T + np.diag(np.square([_POS * h, _POS * h, 1e-1, _POS * h]))
        gain = np.linalg.solve(innovation_cov, (cov @ _OBSERVE.T).T).T  # innovation_cov is symmetric
        new_mean = mean + (np.asarray(measurement, dtype=np.float64) - mean[:4]) @ gain.T
        return new_mean, cov - gain @ innovation_cov @ gain.T
