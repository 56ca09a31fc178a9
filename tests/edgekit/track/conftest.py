"""Generated detection sequences of a belt: moving boxes with noise, missed frames, crossings."""

from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from edgekit.results import Detections


def belt_detections(seed: int, n_frames: int = 160, n_objects: int = 8, *, width: float = 640, height: float = 360,
                    miss: float = 0.08, noise: float = 1.5, crossing: bool = True,
                    false_positives: float = 0.03) -> tuple[list[Detections], list[np.ndarray]]:
    """Per frame: the Detections and, per row, the id of the object it came from (-1: a false positive).

    Objects ride left to right at their own speed (some right to left or diagonally when
    ``crossing``), enter at random frames, are missed now and then, score low now and then
    (ByteTrack's second association) and jitter by ``noise`` pixels.
    """
    rng = np.random.default_rng(seed)
    objs = []
    for k in range(n_objects):
        w, h = rng.uniform(40, 90), rng.uniform(40, 90)
        speed = rng.uniform(3, 9) * (-1 if crossing and k % 4 == 3 else 1)
        vy = rng.uniform(-1.5, 1.5) if crossing else 0.0
        start = int(rng.integers(0, n_frames // 2))
        x0 = -w if speed > 0 else width
        y0 = rng.uniform(10, height - h - 10)
        objs.append((w, h, speed, vy, start, x0, y0))
    frames, owners = [], []
    for t in range(n_frames):
        boxes, scores, who = [], [], []
        for k, (w, h, speed, vy, start, x0, y0) in enumerate(objs):
            if t < start:
                continue
            x, y = x0 + speed * (t - start), y0 + vy * (t - start)
            if x > width or x + w < 0 or rng.random() < miss:
                continue
            box = np.array([x, y, x + w, y + h]) + rng.normal(0, noise, 4)
            boxes.append(box)
            scores.append(rng.uniform(0.12, 0.3) if rng.random() < 0.12 else rng.uniform(0.45, 0.95))
            who.append(k)
        if rng.random() < false_positives:
            x, y = rng.uniform(0, width - 50), rng.uniform(0, height - 50)
            boxes.append(np.array([x, y, x + 50, y + 50]))
            scores.append(rng.uniform(0.4, 0.7))
            who.append(-1)
        order = rng.permutation(len(boxes))
        xyxy = np.array(boxes, np.float32).reshape(-1, 4)[order]
        frames.append(Detections(xyxy, np.array(scores, np.float32)[order], np.zeros(len(order), np.int32)))
        owners.append(np.array(who, np.int64)[order])
    return frames, owners


@pytest.fixture(scope="session")
def make_belt() -> Callable[..., tuple[list[Detections], list[np.ndarray]]]:
    return belt_detections
