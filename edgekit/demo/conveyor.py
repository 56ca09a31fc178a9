"""A video of parts riding the conveyor left to right, drawn like the still images, with per-frame truth.

Each part is rendered once (same drawing as :func:`edgekit.demo.dataset.generate`) and slides at the
belt's speed together with the belt texture; lighting is fixed for the clip and sensor noise is fresh
each frame. The clip is written as Motion-JPEG in an .avi (OpenCV writes that everywhere). No
TensorFlow here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from edgekit.demo.dataset import check_size, paste
from edgekit.demo.scene import (CLASS_NAMES, PART, Sprite, apply_lighting, belt_rows, belt_texture, random_lighting,
                                render_part)
from edgekit.errors import EdgekitError, InputError

__all__ = ["FrameTruth", "PartTruth", "VideoTruth", "make_video"]


@dataclass(frozen=True)
class FrameTruth:
    """Objects in one frame: boxes float32 [K,4] xyxy pixels, class_ids int64 [K], part_ids int64 [K].

    ``part_ids`` says which part each object belongs to (a defect carries its part's id).
    """

    boxes: np.ndarray
    class_ids: np.ndarray
    part_ids: np.ndarray


@dataclass(frozen=True)
class PartTruth:
    """One part that rides through the clip: its id, kind of defects (empty: a good part), frames seen."""

    part_id: int
    defects: tuple[str, ...]
    first_frame: int
    last_frame: int

    @property
    def passed(self) -> bool:
        return not self.defects


@dataclass(frozen=True)
class VideoTruth:
    """What :func:`make_video` wrote: the file, its geometry and the truth per frame and per part."""

    path: str
    fps: float
    size: int
    frames: tuple[FrameTruth, ...]
    parts: tuple[PartTruth, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "fps": self.fps, "size": [self.size, self.size], "classes": list(CLASS_NAMES),
                "box_format": "xyxy", "normalized": False,
                "parts": [{"part_id": p.part_id, "defects": list(p.defects), "passed": p.passed,
                           "first_frame": p.first_frame, "last_frame": p.last_frame} for p in self.parts],
                "frames": [{"boxes": np.round(f.boxes, 2).tolist(), "class_ids": f.class_ids.tolist(),
                            "part_ids": f.part_ids.tolist()} for f in self.frames]}


def _schedule(rng: np.random.Generator, n_frames: int, speed: float, size: int, scale: float,
              gap: tuple[float, float] = (0.1, 0.45), defect_share: float = 0.5,
              abreast: float = 0.0) -> list[tuple[Sprite, float, int]]:
    """Parts with their belt position at frame 0 (x of the left edge) and row; spaced with gaps. With
    ``abreast`` > 0, that share of the places holds two parts side by side (one along each rail, their
    leading edges within a few pixels), when two that fit across the belt turn up in 6 draws."""
    top, bottom = belt_rows(size, scale)
    parts, x = [], size * 0.55  # the first part is already in view at frame 0
    travel = speed * n_frames
    while x > -travel - size:
        sprite = render_part(rng, scale, p_defect=defect_share)
        h, w = sprite.alpha.shape
        other = None
        if abreast and rng.random() < abreast:  # no draw at all when 0: the single-file clips stay as they were
            for _ in range(6):
                candidate = render_part(rng, scale, p_defect=defect_share)
                if h + candidate.alpha.shape[0] <= bottom - top + 4:
                    other = candidate
                    break
        if other is None:
            y = int(rng.integers(top - 2, max(top - 1, bottom - h + 3)))
            parts.append((sprite, x - w, y))
            x -= w
        else:
            w2 = other.alpha.shape[1]
            lead = x - rng.uniform(0.0, 0.03) * size  # the second one's leading edge, a little behind
            parts.append((sprite, x - w, top - 2))
            parts.append((other, lead - w2, bottom - other.alpha.shape[0] + 2))
            x = min(x - w, lead - w2)
        x -= rng.uniform(*gap) * size
    return parts


def _place_parts(canvas: np.ndarray, parts: list[tuple[Sprite, float, int]], travelled: float,
                 shadow: tuple[int, int]) -> FrameTruth:
    """Paste every part that is in view after the belt moved ``travelled`` pixels; their truth."""
    boxes, ids, owners = [], [], []
    for pid, (sprite, x0, y0) in enumerate(parts):
        x = int(round(x0 + travelled))
        if x >= canvas.shape[1] or x + sprite.alpha.shape[1] <= 0:
            continue
        for cls, box, _ in paste(canvas, sprite, x, y0, shadow):
            boxes.append(box)
            ids.append(cls)
            owners.append(pid)
    return FrameTruth(np.array(boxes, np.float32).reshape(-1, 4), np.array(ids, np.int64), np.array(owners, np.int64))


def make_video(path: str | os.PathLike[str], n_frames: int = 300, fps: float = 15.0, seed: int = 0,
               size: int = 320, speed: float | None = None,
               gap: tuple[float, float] = (0.1, 0.45), defect_share: float = 0.5, abreast: float = 0.0) -> VideoTruth:
    """Write an MJPG .avi of parts passing left to right on the belt; return the truth for every frame.

    ``size`` is the square frame side (the same scene as a ``size``-pixel still image); ``speed`` is in
    pixels per frame (default: a part crosses the frame in about 4 seconds); ``gap`` the range the
    space between two parts is drawn from, in frame widths (``(0, 0)``: parts touching); ``defect_share``
    the chance that a part has defects (1-3); ``abreast`` the share of places where two parts ride side
    by side and enter the frame together.

    Raises:
        InputError: bad arguments (path not .avi, too few frames, fps or size out of range).
        EdgekitError: OpenCV could not open the file for writing.
    """
    path = os.fspath(path)
    if not path.lower().endswith(".avi"):
        raise InputError(f"make_video writes Motion-JPEG in an .avi container; got {path!r}: use a .avi path")
    if n_frames < 1 or not fps > 0:
        raise InputError(f"need n_frames >= 1 and fps > 0, got n_frames={n_frames}, fps={fps}")
    if not (0.0 <= defect_share <= 1.0 and 0.0 <= abreast <= 1.0):
        raise InputError(f"defect_share and abreast are shares within 0..1, got {defect_share!r} and {abreast!r}")
    check_size(size)
    scale = size / 160
    speed = speed if speed is not None else size / (4.0 * fps)
    rng = np.random.default_rng((int(seed), 99))
    period = size * 2
    belt = belt_texture(rng, size, period, scale)
    light = random_lighting(rng, size, scale)
    parts = _schedule(rng, n_frames, speed, size, scale, gap, defect_share, abreast)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    writer = cv2.VideoWriter(path, cv2.VideoWriter.fourcc(*"MJPG"), float(fps), (size, size))
    if not writer.isOpened():
        raise EdgekitError(f"OpenCV could not open {path!r} for writing MJPG video: "
                           "check the folder is writable and OpenCV has video I/O (opencv-python)")
    frames: list[FrameTruth] = []
    seen: dict[int, tuple[int, int]] = {}
    try:
        for t in range(n_frames):
            canvas = np.ascontiguousarray(np.roll(belt, int(round(speed * t)) % period, axis=1)[:, :size])
            truth = _place_parts(canvas, parts, speed * t, light.shadow)
            for pid in truth.part_ids[truth.class_ids == PART].tolist():
                seen[pid] = (seen.get(pid, (t, t))[0], t)
            writer.write(cv2.cvtColor(apply_lighting(canvas, light, rng), cv2.COLOR_RGB2BGR))
            frames.append(truth)
    finally:
        writer.release()
    truth_parts = tuple(PartTruth(pid, tuple(CLASS_NAMES[c] for c in parts[pid][0].class_ids[1:]), *seen[pid])
                        for pid in sorted(seen))
    return VideoTruth(path=path, fps=float(fps), size=size, frames=tuple(frames), parts=truth_parts)
