"""Detection data sets with their boxes: Ultralytics/YOLO, COCO JSON and edgekit's own labels.json.

Each is read into a :class:`DetectionSet` (image files, boxes x1, y1, x2, y2 in the image's own
pixels, class ids, class names) so that the accuracy check can measure mAP@0.5 of the float and
the quantized model against real objects, not only against each other.

Recognized, in this order, for a path given as --calibration or --validation:

- ``data.yaml`` (or a folder holding one): Ultralytics' data set file; its ``val:`` split for
  validation and its ``train:`` split for calibration (each falling back on the other), class
  names from ``names:``.
- a folder with ``images/`` and ``labels/`` (optionally one split level below, e.g.
  ``images/val``), or an ``images`` folder whose sibling is ``labels``: one ``class cx cy w h``
  line per object, normalized to 0..1, in ``labels/NAME.txt`` for ``images/NAME.jpg``.
- a COCO ``.json`` file (``images``, ``annotations``, ``categories``) beside its images, or a
  folder holding exactly one such file; ``bbox`` is x, y, w, h in pixels; category ids are
  numbered 0.. in sorted id order.
- a folder with edgekit's ``labels.json`` (what ``edgekit demo`` writes).

The YAML reader handles the flat subset data set files use (``key: value``, ``names:`` as a
list or an ``id: name`` block); it is not a general YAML parser.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from edgekit.contract.decode import to_xyxy
from edgekit.contract.enums import BoxFormat
from edgekit.converters.images import IMAGE_SUFFIXES
from edgekit.errors import InputError

__all__ = ["DetectionSet", "Truth", "find_detection_set", "read_data_yaml"]

LABELS_JSON = "labels.json"


class Truth(NamedTuple):
    """One image's objects: boxes (K, 4) x1, y1, x2, y2 in its pixels, scores (all 1), class ids (K,)."""

    boxes: np.ndarray
    scores: np.ndarray
    class_ids: np.ndarray


@dataclass(frozen=True)
class DetectionSet:
    """Images and their objects: boxes[i] (K, 4) x1, y1, x2, y2 in image pixels, classes[i] (K,)."""

    files: tuple[Path, ...]
    boxes: tuple[np.ndarray, ...]
    classes: tuple[np.ndarray, ...]
    names: tuple[str, ...] | None
    origin: str

    def __len__(self) -> int:
        return len(self.files)


def find_detection_set(path: Path, split: str = "val") -> DetectionSet | None:
    """The detection data set at `path`, or None when `path` is none of the known formats.

    Args:
        split: "val" (validation) or "train" (calibration): the split of a data.yaml or of an
            images/ folder with split sub-folders to read.

    Raises:
        InputError: the path is one of the formats but broken (a missing split, an unreadable
            label line, a COCO file without images).
    """
    if path.is_file():
        if path.suffix.lower() in (".yaml", ".yml"):
            return _from_data_yaml(path, split)
        if path.suffix.lower() == ".json":
            return _from_coco(path) if path.name != LABELS_JSON else _from_edgekit(path.parent)
        return None
    if not path.is_dir():
        return None
    for name in ("data.yaml", "data.yml"):
        if (path / name).is_file():
            return _from_data_yaml(path / name, split)
    if (path / LABELS_JSON).is_file():
        return _from_edgekit(path)
    if (path / "images").is_dir() and (path / "labels").is_dir():
        return _from_yolo_folder(path / "images", f"YOLO data set {str(path)!r}", split)
    if path.name == "images" and (path.parent / "labels").is_dir():
        return _from_yolo_folder(path, f"YOLO data set {str(path.parent)!r}", split)
    jsons = [p for p in path.glob("*.json") if _looks_coco(p)]
    if len(jsons) == 1:
        return _from_coco(jsons[0])
    return None


# --- Ultralytics / YOLO ------------------------------------------------------------------------------
def read_data_yaml(path: Path) -> dict[str, Any]:
    """The keys of an Ultralytics data.yaml: strings, and ``names`` as a list of class names.

    Raises:
        InputError: the file cannot be read or a line is not ``key: value``.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}") from None
    doc: dict[str, Any] = {}
    key: str | None = None
    block: list[str] | dict[int, str] | None = None
    for number, raw in enumerate(lines, start=1):
        line = _strip_comment(raw).rstrip()
        if not line.strip():
            continue
        if line[0] in " \t-" and key is not None:
            item = line.strip()
            if item.startswith("- "):
                block = block if isinstance(block, list) else []
                block.append(_scalar(item[2:]))
            elif ":" in item:
                k, v = item.split(":", 1)
                block = block if isinstance(block, dict) else {}
                block[int(_scalar(k))] = _scalar(v)
            else:
                raise InputError(f"{str(path)!r} line {number}: expected '- name' or 'id: name', got {item!r}")
            doc[key] = block
            continue
        if ":" not in line:
            raise InputError(f"{str(path)!r} line {number}: expected 'key: value', got {line.strip()!r}")
        k, v = line.split(":", 1)
        key, block = k.strip(), None
        v = v.strip()
        if v.startswith("[") or v.startswith("{"):
            try:
                doc[key] = ast.literal_eval(v)  # a literal only: lists and dicts of strings and numbers
            except (ValueError, SyntaxError):
                doc[key] = [_scalar(t) for t in v.strip("[]").split(",") if t.strip()]
        elif v:
            doc[key] = _scalar(v)
    names = doc.get("names")
    if isinstance(names, dict):
        doc["names"] = [str(names[i]) for i in sorted(names)]
    elif isinstance(names, (list, tuple)):
        doc["names"] = [str(n) for n in names]
    return doc


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if ch in "'\"":
            quote = None if quote == ch else (ch if quote is None else quote)
        elif ch == "#" and quote is None and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _scalar(text: str) -> str:
    t = text.strip()
    return t[1:-1] if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"" else t


def _from_data_yaml(path: Path, split: str) -> DetectionSet:
    doc = read_data_yaml(path)
    order = ("train", "val") if split == "train" else ("val", "train")
    keys = [k for k in order if doc.get(k)]
    if not keys:
        raise InputError(f"{str(path)!r} names no 'val:' (or 'train:') split; add 'val: images/val'")
    root = Path(str(doc.get("path") or "."))
    root = root if root.is_absolute() else (path.parent / root)
    names = doc.get("names")
    missing = ""
    for key in keys:  # the split asked for, else the other one (a data set may ship only one)
        try:
            files = _split_files(doc[key], root)
        except FileNotFoundError as exc:
            missing = missing or f"{str(path)!r}: the {key} split {exc} does not exist"
            continue
        return _read_yolo_labels(files, tuple(names) if names else None, f"{str(path)!r} ({key} split)")
    raise InputError(missing)


def _split_files(split: Any, root: Path) -> list[Path]:
    """Image files of a data.yaml split: folders, or .txt files listing images (relative to `root`).

    Raises:
        FileNotFoundError: an entry does not exist (its path is the message).
    """
    files: list[Path] = []
    for entry in split if isinstance(split, list) else [split]:
        where = Path(str(entry))
        where = where if where.is_absolute() else root / where
        if where.is_file() and where.suffix == ".txt":
            files += [(p if p.is_absolute() else root / p) for p in
                      (Path(s.strip()) for s in where.read_text().splitlines() if s.strip())]
        elif where.is_dir():
            files += _images_in(where)
        else:
            raise FileNotFoundError(repr(str(where)))
    return files


def _images_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


def _label_path(image: Path) -> Path:
    parts = list(image.parts)
    for i in range(len(parts) - 1, -1, -1):  # the last 'images' folder in the path becomes 'labels'
        if parts[i] == "images":
            parts[i] = "labels"
            return Path(*parts).with_suffix(".txt")
    return image.with_suffix(".txt")


def _from_yolo_folder(images: Path, origin: str, split: str) -> DetectionSet:
    files = _images_in(images)
    names = ("train", "val", "valid", "validation") if split == "train" else ("val", "valid", "validation", "test",
                                                                                 "train")
    for sub in names:
        if (images / sub).is_dir():
            files = _images_in(images / sub)
            origin = f"{origin} ({sub} split)"
            break
    return _read_yolo_labels(files, _names_beside(images.parent), origin)


def _names_beside(root: Path) -> tuple[str, ...] | None:
    for name in ("classes.txt", "labels.txt"):
        if (root / name).is_file():
            return tuple(s.strip() for s in (root / name).read_text().splitlines() if s.strip())
    return None


def _read_yolo_labels(files: list[Path], names: tuple[str, ...] | None, origin: str) -> DetectionSet:
    import cv2

    if not files:
        raise InputError(f"no images in {origin}")
    boxes, classes = [], []
    for image in files:
        rows = _yolo_rows(_label_path(image))
        if len(rows):
            size = cv2.imread(str(image), cv2.IMREAD_UNCHANGED)
            if size is None:
                raise InputError(f"cannot read image {str(image)!r} of {origin}")
            h, w = size.shape[:2]
            boxes.append(to_xyxy(rows[:, 1:5] * np.array([w, h, w, h], np.float32), BoxFormat.CXCYWH))
        else:
            boxes.append(np.zeros((0, 4), np.float32))
        classes.append(rows[:, 0].astype(np.int64))
    return DetectionSet(tuple(files), tuple(boxes), tuple(classes), names, origin)


def _yolo_rows(path: Path) -> np.ndarray:
    """(K, 5) class, cx, cy, w, h; a missing file is an image without objects (as Ultralytics reads it)."""
    if not path.is_file():
        return np.zeros((0, 5), np.float32)
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            values = [float(v) for v in line.split()[:5]]
        except ValueError:
            values = []
        if len(values) != 5:
            raise InputError(f"{str(path)!r} line {number}: expected 'class cx cy w h' (normalized), got {line!r}")
        rows.append(values)
    return np.array(rows, np.float32).reshape(-1, 5)


# --- COCO ------------------------------------------------------------------------------------------
def _looks_coco(path: Path) -> bool:
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:100000]
    except OSError:
        return False
    return '"annotations"' in head and '"images"' in head


def _from_coco(path: Path) -> DetectionSet:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {str(path)!r} as COCO JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("images"), list):
        raise InputError(f"{str(path)!r} is not a COCO file: expected 'images', 'annotations' and 'categories'")
    cats = sorted(doc.get("categories") or [], key=lambda c: int(c["id"]))
    index = {int(c["id"]): i for i, c in enumerate(cats)}
    per_image: dict[int, list[tuple[int, list[float]]]] = {}
    for a in doc.get("annotations") or []:
        if a.get("iscrowd"):
            continue
        cid = int(a["category_id"])
        if cid not in index:
            raise InputError(f"{str(path)!r}: annotation {a.get('id')} has category {cid}, not in 'categories'")
        per_image.setdefault(int(a["image_id"]), []).append((index[cid], [float(v) for v in a["bbox"]]))
    files, boxes, classes = [], [], []
    for img in doc["images"]:
        file = _coco_image(path.parent, str(img["file_name"]))
        objs = per_image.get(int(img["id"]), [])
        xywh = np.array([b for _, b in objs], np.float32).reshape(-1, 4)
        files.append(file)
        boxes.append(np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1))
        classes.append(np.array([c for c, _ in objs], np.int64))
    if not files:
        raise InputError(f"{str(path)!r} lists no images")
    return DetectionSet(tuple(files), tuple(boxes), tuple(classes), tuple(str(c["name"]) for c in cats) or None,
                        f"COCO file {str(path)!r}")


def _coco_image(root: Path, name: str) -> Path:
    for where in (root / name, root / "images" / name, root / "images" / Path(name).name):
        if where.is_file():
            return where
    raise InputError(f"image {name!r} of the COCO file is not beside it in {str(root)!r} (nor in images/)")


# --- edgekit's labels.json -------------------------------------------------------------------------
def _from_edgekit(folder: Path) -> DetectionSet:
    path = folder / LABELS_JSON
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        entries = doc["images"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot read {str(path)!r} as edgekit labels (images, boxes, class_ids): {exc}") from None
    fmt = str(doc.get("box_format", "xyxy")).lower()
    normalized = bool(doc.get("normalized", False))
    files, boxes, classes = [], [], []
    for e in entries:
        file = folder / str(e["file"])
        b = np.array(e.get("boxes", []), np.float32).reshape(-1, 4)
        if fmt == "cxcywh":
            b = to_xyxy(b, BoxFormat.CXCYWH)
        if normalized and len(b):
            import cv2

            img = cv2.imread(str(file), cv2.IMREAD_UNCHANGED)
            if img is None:
                raise InputError(f"cannot read image {str(file)!r} listed in {str(path)!r}")
            b = b * np.array([img.shape[1], img.shape[0]] * 2, np.float32)
        files.append(file)
        boxes.append(b)
        classes.append(np.array(e.get("class_ids", []), np.int64))
    names = doc.get("classes")
    return DetectionSet(tuple(files), tuple(boxes), tuple(classes), tuple(map(str, names)) if names else None,
                        f"edgekit labels {str(path)!r}")
