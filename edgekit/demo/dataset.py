"""A deterministic synthetic industrial-inspection data set: parts on a conveyor, with labelled defects.

Classes (``CLASS_NAMES``): ``part`` (a flange disc, plate or L bracket), and its defects ``scratch``,
``dent`` and ``missing_hole`` (a centre-punch mark where a hole was never drilled). Boxes are xyxy in
pixels with pixel-edge coordinates (a box over columns 3..7 is x1=3, x2=8). An object is labelled when
at least half of it is in the frame; its box then covers the visible part only.

No TensorFlow here: this module runs on a device with numpy and OpenCV only.

    from edgekit.demo.dataset import generate
    samples = generate(1000, seed=0, size=160)   # about 1.5 s on one core
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import cv2
import numpy as np

from edgekit.demo.scene import (CLASS_NAMES, Sprite, apply_lighting, belt_rows, belt_texture,
                                random_lighting, render_part)
from edgekit.errors import InputError

__all__ = ["CLASS_NAMES", "Sample", "Splits", "generate", "make_splits", "load_split", "paste"]

MIN_VISIBLE = 0.5  # label an object only when at least this fraction of it is in the frame
ROW_SHARE = 0.3  # images with 2-4 parts side by side, touching or nearly (the rest: 0-3 parts apart)
LABELS_FILE = "labels.json"


@dataclass(frozen=True)
class Sample:
    """One image with its objects: image RGB uint8 [H,W,3], boxes float32 [K,4] xyxy pixels, class_ids int64 [K].

    ``masks`` (uint8 [K,H,W], 255 on the object) is filled only when asked for.
    """

    image: np.ndarray
    boxes: np.ndarray
    class_ids: np.ndarray
    masks: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.image.ndim != 3 or self.image.shape[2] != 3 or self.image.dtype != np.uint8:
            raise InputError(f"Sample.image must be uint8 [H,W,3], got {self.image.dtype} {self.image.shape}")
        if self.boxes.shape != (len(self.class_ids), 4):
            raise InputError(f"Sample.boxes must be [K,4] with K={len(self.class_ids)} class ids, "
                             f"got {self.boxes.shape}")


class Splits(NamedTuple):
    """Folders written by :func:`make_splits` (PNGs + labels.json each) and the labels file (one name a line)."""

    train: Path
    calibration: Path
    validation: Path
    labels: Path


def _check_count(name: str, n: int) -> None:
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise InputError(f"{name} must be a whole number >= 0, got {n!r}")


def check_size(size: int) -> None:
    if not isinstance(size, (int, np.integer)) or size < 96:
        raise InputError(f"size must be an int of at least 96 pixels (parts are ~50-90 px at 160), got {size!r}")


def paste(canvas: np.ndarray, sprite: Sprite, x0: int, y0: int, shadow: tuple[int, int],
          full_masks: list[np.ndarray] | None = None) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Paste ``sprite`` with its top-left corner at (x0, y0) onto float32 ``canvas``, casting a shadow first.

    Returns (class_id, box xyxy, visible mask in canvas coordinates or empty) for each object of the
    sprite that is at least ``MIN_VISIBLE`` in the frame. Masks are built only when ``full_masks`` is
    a list (they are appended to it too).
    """
    H, W = canvas.shape[:2]
    h, w = sprite.alpha.shape
    sx, sy = x0 + shadow[0], y0 + shadow[1]
    xs0, ys0, xs1, ys1 = max(sx, 0), max(sy, 0), min(sx + w, W), min(sy + h, H)
    if xs1 > xs0 and ys1 > ys0:
        soft = cv2.GaussianBlur(sprite.alpha, (0, 0), 2.0)[ys0 - sy:ys1 - sy, xs0 - sx:xs1 - sx]
        canvas[ys0:ys1, xs0:xs1] *= (1 - 0.5 * soft)[..., None]
    cx0, cy0, cx1, cy1 = max(x0, 0), max(y0, 0), min(x0 + w, W), min(y0 + h, H)
    if cx1 <= cx0 or cy1 <= cy0:
        return []
    crop = (slice(cy0 - y0, cy1 - y0), slice(cx0 - x0, cx1 - x0))
    a = sprite.alpha[crop][..., None]
    canvas[cy0:cy1, cx0:cx1] = canvas[cy0:cy1, cx0:cx1] * (1 - a) + sprite.rgb[crop] * a
    found = []
    for cls, mask in zip(sprite.class_ids, sprite.masks):
        seen = mask[crop]
        total, visible = np.count_nonzero(mask), np.count_nonzero(seen)
        if total == 0 or visible < MIN_VISIBLE * total:
            continue
        rows, cols = np.nonzero(seen.any(1))[0], np.nonzero(seen.any(0))[0]
        box = np.array([cols[0] + cx0, rows[0] + cy0, cols[-1] + 1 + cx0, rows[-1] + 1 + cy0], np.float32)
        full = np.zeros((0, 0), np.uint8)
        if full_masks is not None:
            full = np.zeros((H, W), np.uint8)
            full[cy0:cy1, cx0:cx1] = seen
            full_masks.append(full)
        found.append((cls, box, full))
    return found


def _layout(rng: np.random.Generator, sprites: list[Sprite], size: int, scale: float) -> list[tuple[int, int] | None]:
    """Top-left corners for sprites on the belt, not overlapping, at least ~60% inside left/right edges."""
    top, bottom = belt_rows(size, scale)
    placed: list[tuple[float, float, float]] = []
    corners: list[tuple[int, int] | None] = []
    for sp in sprites:
        h, w = sp.alpha.shape
        for _ in range(30):
            x = int(rng.integers(-int(0.3 * w), size - int(0.7 * w) + 1))
            y = int(rng.integers(top - 2, max(top - 1, bottom - h + 3)))
            cx, cy, r = x + w / 2, y + h / 2, w / 2
            if all((cx - px) ** 2 + (cy - py) ** 2 > (r + pr + 2) ** 2 for px, py, pr in placed):
                placed.append((cx, cy, r))
                corners.append((x, y))
                break
        else:
            corners.append(None)
    return corners


def _row(rng: np.random.Generator, sprites: list[Sprite], size: int, scale: float) -> list[tuple[int, int] | None]:
    """Top-left corners for sprites side by side as a belt carries them when parts bunch up: each box
    0-3% of the frame from the last (often touching), each at its own height, the first partly out of
    the frame at times and the last often cut by the other edge, as a belt's frame edges cut parts. A part
    less than half in the frame is not labelled (as everywhere); its defects in view still are."""
    top, bottom = belt_rows(size, scale)
    x = -rng.uniform(0.0, 0.5) * sprites[0].alpha.shape[1] if sprites else 0.0
    corners: list[tuple[int, int] | None] = []
    for sp in sprites:
        h, w = sp.alpha.shape
        corners.append((int(round(x)), int(rng.integers(top - 2, max(top - 1, bottom - h + 3)))))
        x += w + rng.uniform(0.0, 0.03) * size
    return corners


def render_sample(rng: np.random.Generator, size: int, with_masks: bool = False,
                  row: np.random.Generator | None = None) -> Sample:
    """One still image: belt, 0-3 parts (most with defects), lighting.

    ``row``: a second random stream; with it, a ``ROW_SHARE`` of the images show 2-4 parts in a row,
    touching or nearly (what a detector must tell apart on a bunched-up belt) instead of apart. The
    images it leaves apart are the same as without it."""
    scale = size / 160
    canvas = belt_texture(rng, size, size, scale)
    light = random_lighting(rng, size, scale)
    in_row = row is not None and row.random() < ROW_SHARE
    n_parts = int(row.choice([2, 3, 3, 4])) if in_row and row is not None else int(rng.choice([0, 1, 2, 2, 3, 3, 3]))
    sprites = [render_part(rng, scale) for _ in range(n_parts)]
    masks: list[np.ndarray] | None = [] if with_masks else None
    boxes, ids = [], []
    corners = _row(rng, sprites, size, scale) if in_row else _layout(rng, sprites, size, scale)
    for sp, corner in zip(sprites, corners):
        if corner is None:
            continue
        for cls, box, _ in paste(canvas, sp, corner[0], corner[1], light.shadow, masks):
            boxes.append(box)
            ids.append(cls)
    image = apply_lighting(canvas, light, rng)
    return Sample(image=image, boxes=np.array(boxes, np.float32).reshape(-1, 4),
                  class_ids=np.array(ids, np.int64),
                  masks=np.array(masks, np.uint8).reshape(-1, size, size) if with_masks else None)


def _generate(n: int, key: tuple[int, ...], size: int, with_masks: bool) -> list[Sample]:
    # One generator per image keyed by its index: image i is the same whatever n is.
    return [render_sample(np.random.default_rng((*key, i)), size, with_masks, np.random.default_rng((*key, i, 1)))
            for i in range(n)]


def generate(n: int, seed: int = 0, size: int = 160, with_masks: bool = False) -> list[Sample]:
    """``n`` synthetic inspection images (same seed and size: same bytes). Image i does not depend on n.

    Raises:
        InputError: ``n`` is negative or ``size`` is below 96 pixels.
    """
    _check_count("n", n)
    check_size(size)
    return _generate(int(n), (int(seed),), int(size), with_masks)


def _write_split(folder: Path, samples: Sequence[Sample]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, s in enumerate(samples):
        name = f"{i:06d}.png"
        if not cv2.imwrite(os.fspath(folder / name), cv2.cvtColor(s.image, cv2.COLOR_RGB2BGR)):
            raise InputError(f"could not write {folder / name}: check the folder is writable and has space")
        entries.append({"file": name, "boxes": np.round(s.boxes, 2).tolist(), "class_ids": s.class_ids.tolist()})
    h, w = samples[0].image.shape[:2] if samples else (0, 0)
    doc = {"classes": list(CLASS_NAMES), "image_size": [w, h], "box_format": "xyxy", "normalized": False,
           "images": entries}
    (folder / LABELS_FILE).write_text(json.dumps(doc))


def make_splits(out_dir: str | os.PathLike[str], n_train: int, n_cal: int, n_val: int, seed: int = 0,
                size: int = 160) -> Splits:
    """Write train/, calibration/ and validation/ (PNG images + labels.json) and labels.txt under ``out_dir``.

    The three splits come from independent random streams of ``seed``, so none repeats another.

    Raises:
        InputError: a count is negative, ``size`` is too small, or a file cannot be written.
    """
    for name, n in (("n_train", n_train), ("n_cal", n_cal), ("n_val", n_val)):
        _check_count(name, n)
    check_size(size)
    root = Path(out_dir)
    dirs = (root / "train", root / "calibration", root / "validation")
    for k, (folder, n) in enumerate(zip(dirs, (n_train, n_cal, n_val)), start=1):
        _write_split(folder, _generate(int(n), (int(seed), k), int(size), False))
    labels = root / "labels.txt"
    labels.write_text("\n".join(CLASS_NAMES) + "\n")
    return Splits(*dirs, labels)


def load_split(folder: str | os.PathLike[str]) -> list[Sample]:
    """Read a folder written by :func:`make_splits` back into samples.

    Raises:
        InputError: the folder has no labels.json, or an image it lists is missing or unreadable.
    """
    folder = Path(folder)
    path = folder / LABELS_FILE
    if not path.is_file():
        raise InputError(f"{folder} has no {LABELS_FILE}: expected a split written by make_splits() "
                         "(edgekit.demo.dataset)")
    doc = json.loads(path.read_text())
    samples = []
    for e in doc["images"]:
        bgr = cv2.imread(os.fspath(folder / e["file"]), cv2.IMREAD_COLOR)
        if bgr is None:
            raise InputError(f"cannot read image {folder / e['file']} listed in {path}")
        samples.append(Sample(image=cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB),
                              boxes=np.array(e["boxes"], np.float32).reshape(-1, 4),
                              class_ids=np.array(e["class_ids"], np.int64)))
    return samples
