"""Drawing for the synthetic inspection data: parts with defects as sprites, a conveyor belt, lighting.

Everything is numpy + OpenCV and driven by one ``numpy.random.Generator``, so a seed fixes every byte.
Lengths are given for a 160-pixel image and multiplied by ``scale`` (image size / 160), so a larger
image shows the same scene in more detail. A part is rendered once as a :class:`Sprite` (colour, alpha
and one mask per labelled object) and then pasted: still images paste it anywhere, the video slides it
along the belt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

__all__ = ["CLASS_NAMES", "PART", "SCRATCH", "DENT", "MISSING_HOLE", "Sprite", "Lighting",
           "render_part", "belt_texture", "random_lighting", "belt_rows", "apply_lighting"]

CLASS_NAMES: tuple[str, ...] = ("part", "scratch", "dent", "missing_hole")
PART, SCRATCH, DENT, MISSING_HOLE = range(4)

_METALS = ((170, 172, 178), (150, 150, 150), (186, 176, 160), (135, 140, 150))
_PLASTICS = ((40, 90, 200), (30, 150, 70), (230, 140, 30), (225, 215, 180), (200, 50, 50))


@dataclass(frozen=True)
class Sprite:
    """One rendered part: RGB float32 [h,w,3], alpha float32 [h,w] and a uint8 mask per object.

    ``masks[0]`` is the part itself; the rest are its defects, with ``class_ids`` alongside.
    """

    rgb: np.ndarray
    alpha: np.ndarray
    masks: tuple[np.ndarray, ...]
    class_ids: tuple[int, ...]

    @property
    def defective(self) -> bool:
        return len(self.class_ids) > 1


@dataclass(frozen=True)
class Lighting:
    """Per-scene lighting: gain field [H,W,1], colour tint [3], shadow offset, blur sigma, noise std."""

    gain: np.ndarray
    tint: np.ndarray
    shadow: tuple[int, int]
    blur: float
    noise: float


def _outline(kind: int, rng: np.random.Generator, s: float) -> tuple[np.ndarray, list[tuple[float, float, float]]]:
    """Polygon (local coords, centred at 0) and holes (x, y, r) for one part kind."""
    hole_r = rng.uniform(4.5, 6.0) * s
    if kind == 0:  # flange disc with bolt holes
        r = rng.uniform(24, 38) * s
        t = np.linspace(0, 2 * math.pi, 48, endpoint=False)
        poly = np.stack([r * np.cos(t), r * np.sin(t)], 1)
        n, phase = int(rng.choice([3, 4, 6])), rng.uniform(0, 2 * math.pi)
        ring = r - hole_r - rng.uniform(3, 5) * s
        holes = [(ring * math.cos(phase + 2 * math.pi * i / n), ring * math.sin(phase + 2 * math.pi * i / n), hole_r)
                 for i in range(n)]
        return poly, holes
    if kind == 1:  # rectangular plate, a hole near each corner
        w, h = rng.uniform(26, 40) * s, rng.uniform(18, 30) * s
        poly = np.array([[-w, -h], [w, -h], [w, h], [-w, h]], np.float64)
        inset = hole_r + rng.uniform(3, 5) * s
        holes = [(sx * (w - inset), sy * (h - inset), hole_r) for sx, sy in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        return poly, holes
    a, b, bar = rng.uniform(30, 40) * s, rng.uniform(26, 36) * s, rng.uniform(15, 19) * s  # L bracket
    poly = np.array([[0, 0], [a, 0], [a, bar], [bar, bar], [bar, b], [0, b]], np.float64)
    holes = [(a - bar / 2 - 2 * s, bar / 2, hole_r), (bar / 2, b - bar / 2 - 2 * s, hole_r)]
    poly, holes_arr = poly - [a / 2, b / 2], np.array(holes)[:, :2] - [a / 2, b / 2]
    return poly, [(x, y, hole_r) for x, y in holes_arr]


def _surface(rng: np.random.Generator, h: int, w: int, s: float) -> tuple[np.ndarray, bool]:
    """Part colour field: brushed metal or moulded plastic, with a soft light gradient."""
    metal = rng.random() < 0.55
    base = np.array((_METALS if metal else _PLASTICS)[rng.integers(0, 5 if not metal else 4)], np.float32)
    base *= rng.uniform(0.85, 1.1)
    ang = rng.uniform(0, 2 * math.pi)
    ramp = np.arange(h, dtype=np.float32)[:, None] * math.sin(ang) + np.arange(w, dtype=np.float32) * math.cos(ang)
    grad = 1 + 0.18 * (ramp / max(h, w) - 0.5)
    rgb = base * grad[..., None]
    if metal:  # brushed: noise stretched along one direction
        streak = 9 * rng.standard_normal((h, max(2, w // 8)), np.float32)
        rgb += cv2.resize(streak, (w, h), interpolation=cv2.INTER_LINEAR)[..., None]
    rgb += np.float32(2.5 * s) * rng.standard_normal((h, w, 1), np.float32)
    return rgb, metal


def _place_defect(rng: np.random.Generator, inside: np.ndarray, radius: float) -> tuple[int, int] | None:
    """A point whose disc of ``radius`` lies wholly on solid part surface (None if there is none)."""
    k = max(3, int(2 * radius + 1) | 1)
    safe = cv2.erode(inside, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    ys, xs = np.nonzero(safe)
    if len(xs) == 0:
        return None
    i = int(rng.integers(0, len(xs)))
    return int(xs[i]), int(ys[i])


def _draw_scratch(rng: np.random.Generator, rgb: np.ndarray, free: np.ndarray, s: float,
                  metal: bool) -> np.ndarray | None:
    """A thin bright (or, on plastic, sometimes dark) diagonal line; its mask, or None if it does not fit."""
    safe = cv2.erode(free, np.ones((5, 5), np.uint8))
    ys, xs = np.nonzero(safe)
    if len(xs) == 0:
        return None
    for _ in range(12):  # a centre and a direction along which the whole line stays on solid surface
        i = int(rng.integers(0, len(xs)))
        at = (int(xs[i]), int(ys[i]))
        ang = rng.uniform(math.radians(28), math.radians(62)) * rng.choice([-1, 1]) + rng.choice([0, math.pi])
        length = rng.uniform(18, 30) * s
        t = np.linspace(-length / 2, length / 2, 9)
        px = np.round(at[0] + t * math.cos(ang)).astype(int)
        py = np.round(at[1] + t * math.sin(ang)).astype(int)
        inside = (px >= 0) & (py >= 0) & (px < safe.shape[1]) & (py < safe.shape[0])
        if inside.all() and safe[py, px].all():
            break
    else:
        return None
    mid = (at[0] + rng.uniform(-1.5, 1.5) * s, at[1] + rng.uniform(-1.5, 1.5) * s)
    pts = np.array([(px[0], py[0]), mid, (px[-1], py[-1])], np.float64)
    mask = np.zeros(free.shape, np.uint8)
    thick = max(1, round(rng.uniform(1.6, 2.8) * s))
    cv2.polylines(mask, [np.round(pts).astype(np.int32)], False, 255, thick, cv2.LINE_8)
    shade = rng.uniform(60, 90) * (1 if metal or rng.random() < 0.5 else -1)
    rgb += (mask[..., None] > 0) * np.float32(shade)
    return mask


def _draw_dent(rng: np.random.Generator, rgb: np.ndarray, free: np.ndarray, s: float,
               metal: bool) -> np.ndarray | None:
    """A shaded elliptical crater; its mask, or None if the part has no room for it."""
    rx, ry = rng.uniform(5.5, 8.5) * s, rng.uniform(5.0, 7.5) * s
    at = _place_defect(rng, free, max(rx, ry) + 1)
    if at is None:
        return None
    mask = np.zeros(free.shape, np.uint8)
    ang = float(rng.uniform(0, 180))
    cv2.ellipse(mask, (at, (2 * rx, 2 * ry), ang), 255, -1)
    h, w = free.shape  # the mask's shape (numpy's stubs type np.zeros(shape) of an unknown shape as 0-d)
    # A dent is a shallow crater: the side facing the light is dark, the far side bright.
    t = (np.arange(w, dtype=np.float32) - at[0] + np.arange(h, dtype=np.float32)[:, None] - at[1]) / (max(rx, ry) * 1.2)
    shade = np.clip(t, -1, 1) * rng.uniform(45, 70) - rng.uniform(10, 25)
    rgb += (cv2.GaussianBlur(mask, (0, 0), 0.8 * s).astype(np.float32) / 255 * shade)[..., None]
    return mask


def _draw_missing_hole(rgb: np.ndarray, hole: tuple[float, float, float], shape: tuple[int, int],
                       s: float) -> np.ndarray:
    """Where a hole should be: a centre-punch mark (ring + dot) on solid surface."""
    x, y, r = hole
    centre = (round(x), round(y))
    mask = np.zeros(shape, np.uint8)
    cv2.circle(mask, centre, round(r), 255, -1)
    mark = np.zeros(shape, np.float32)
    cv2.circle(mark, centre, round(r), 1.0, max(1, round(s)))
    cv2.circle(mark, centre, max(1, round(1.6 * s)), 1.0, -1)
    rgb -= (cv2.GaussianBlur(mark, (0, 0), 0.6 * s) * 55)[..., None]
    return mask


def _holes_and_marks(rgb: np.ndarray, solid: np.ndarray, holes: list[tuple[float, float, float]],
                     missing: int | None, s: float) -> list[tuple[int, np.ndarray]]:
    """Punch the holes through ``solid``; where one is missing draw its mark instead and return it."""
    found = []
    for i, hole in enumerate(holes):
        if i == missing:
            found.append((MISSING_HOLE, _draw_missing_hole(rgb, hole, solid.shape, s)))
        else:
            cv2.circle(solid, (round(hole[0]), round(hole[1])), round(hole[2]), 0, -1)
    return found


def render_part(rng: np.random.Generator, scale: float, p_defect: float = 0.8) -> Sprite:
    """Draw one part (flange disc, plate or L bracket) and, with probability ``p_defect``, 1-3 defects."""
    s = scale
    poly, holes = _outline(int(rng.integers(0, 3)), rng, s)
    ang = rng.uniform(0, 2 * math.pi)
    rot = np.array([[math.cos(ang), -math.sin(ang)], [math.sin(ang), math.cos(ang)]])
    half = int(math.ceil(np.abs(poly @ rot.T).max())) + 2
    poly = np.round(poly @ rot.T + half).astype(np.int32)
    holes = [(*(np.array([x, y]) @ rot.T + half), r) for x, y, r in holes]
    solid = np.zeros((2 * half + 1, 2 * half + 1), np.uint8)
    cv2.fillPoly(solid, [poly], 255, cv2.LINE_8)
    rgb, metal = _surface(rng, *solid.shape, s)
    cv2.polylines(rgb, [poly], True, tuple(float(c) for c in rgb[half, half] * 0.6), max(1, round(s)))
    wanted = [int(c) for c in rng.choice([SCRATCH, DENT, MISSING_HOLE], size=int(rng.integers(1, 4)),
                                         replace=False)] if rng.random() < p_defect else []
    missing = int(rng.integers(0, len(holes))) if MISSING_HOLE in wanted and holes else None
    defects = _holes_and_marks(rgb, solid, holes, missing, s)
    free = solid.copy()  # solid surface not yet used by a defect
    for _, m in defects:
        free[m > 0] = 0
    for cls in (c for c in wanted if c != MISSING_HOLE):
        mark = (_draw_scratch if cls == SCRATCH else _draw_dent)(rng, rgb, free, s, metal)
        if mark is not None:
            free[cv2.dilate(mark, np.ones((3, 3), np.uint8)) > 0] = 0
            defects.append((cls, mark))
    return Sprite(rgb=rgb, alpha=solid.astype(np.float32) / 255, masks=(solid, *(m for _, m in defects)),
                  class_ids=(PART, *(c for c, _ in defects)))


def belt_rows(size: int, scale: float) -> tuple[int, int]:
    """First and last row (exclusive) of the belt between the two guide rails."""
    rail = round(12 * scale)
    return rail, size - rail


def belt_texture(rng: np.random.Generator, height: int, width: int, scale: float) -> np.ndarray:
    """Conveyor: a textured rubber/PVC belt with seams between two metal guide rails (float32 RGB)."""
    s = scale
    colours = ((58, 60, 62), (44, 46, 50), (40, 82, 56), (70, 78, 92), (96, 86, 70))
    base = np.array(colours[rng.integers(0, len(colours))], np.float32) * rng.uniform(0.8, 1.2)
    img = np.empty((height, width, 3), np.float32)
    img[:] = base
    # Streaks along the direction of travel, then fine grain.
    streak = 6 * rng.standard_normal((height, max(2, width // 12)), np.float32)
    img += cv2.resize(streak, (width, height), interpolation=cv2.INTER_LINEAR)[..., None]
    img += 4 * rng.standard_normal((height, width, 1), np.float32)
    pitch = round(rng.uniform(50, 90) * s)
    for x in range(int(rng.integers(0, pitch)), width, pitch):
        img[:, x:x + max(1, round(s))] *= 0.7
    top, bottom = belt_rows(height, s)
    rail = np.cos(np.linspace(-1.2, 1.2, top, dtype=np.float32)) * 120 + 60
    tone = np.array([1.0, 1.0, 1.05], np.float32) * rng.uniform(0.8, 1.1)
    img[:top] = rail[:, None, None] * tone
    img[bottom:] = rail[:, None, None][: height - bottom] * tone
    return img


def random_lighting(rng: np.random.Generator, size: int, scale: float) -> Lighting:
    """Brightness, a linear gradient plus vignette, colour tint, shadow direction, blur and sensor noise."""
    xx = np.arange(size, dtype=np.float32) / size - 0.5
    yy = xx[:, None]
    ang = rng.uniform(0, 2 * math.pi)
    gain = rng.uniform(0.65, 1.3) * (1 + rng.uniform(0, 0.5) * (xx * math.cos(ang) + yy * math.sin(ang)))
    gain *= 1 - rng.uniform(0, 0.35) * (xx ** 2 + yy ** 2)
    tint = np.array([1, 1, 1], np.float32) + rng.uniform(-0.08, 0.08, 3).astype(np.float32)
    shadow = (round(rng.uniform(-5, 5) * scale), round(rng.uniform(1, 5) * scale))
    blur = float(rng.choice([0.0, 0.0, rng.uniform(0.4, 1.0) * scale]))
    return Lighting(gain=gain[..., None].astype(np.float32), tint=tint, shadow=shadow, blur=blur,
                    noise=float(rng.uniform(1.5, 6.0)))


def apply_lighting(img: np.ndarray, light: Lighting, rng: np.random.Generator) -> np.ndarray:
    """Scene radiance (float32) -> camera image (uint8 RGB): gain, tint, optics blur, sensor noise."""
    out = img * light.gain
    out *= light.tint
    if light.blur > 0:
        out = cv2.GaussianBlur(out, (0, 0), light.blur)
    noise = rng.standard_normal(out.shape[:2] + (1,), np.float32)
    noise *= np.float32(light.noise)
    out += noise + np.float32(0.5)
    return np.clip(out, 0, 255, out=out).astype(np.uint8)
