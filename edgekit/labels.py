"""Label files: one label per line, or "id label" / "id: label" pairs (as pycoral reads them)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Sequence

from edgekit.errors import InputError

__all__ = ["load_labels", "label_for", "align_labels", "detector_labels_note", "NO_LABELS_NOTE", "MAX_LABEL_ID"]

# What the commands say when a model has no labels and none were given.
NO_LABELS_NOTE = "the model carries no labels, so classes are shown as ids; pass --labels FILE"

# Far above any real label set; stops "4000000000 cat" from allocating a list that size.
MAX_LABEL_ID = 1_000_000
_PAIR = re.compile(r"^\s*(\d+)\s*(?::\s*|\s+)(.*\S)\s*$")


def load_labels(path: str | os.PathLike[str]) -> list[str]:
    """Read a label file into a list indexed by class id.

    Two formats, decided for the whole file: every non-blank line "id label" or "id: label"
    (ids may skip numbers; the gaps become ""), else one label per line (line number = id,
    a blank line keeps its id with an empty label). Trailing blank lines are ignored.

    Raises:
        InputError: the file is missing, unreadable, not UTF-8, empty, or repeats an id.
    """
    p = Path(path)
    if not p.is_file():
        what = "is a directory" if p.is_dir() else "does not exist"
        raise InputError(f"labels file {str(p)!r} {what}; pass a text file with one label per line.")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"labels file {str(p)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
                         "save it as UTF-8.") from None
    except OSError as exc:
        raise InputError(f"cannot read labels file {str(p)!r}: {exc.strerror or exc}") from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise InputError(f"labels file {str(p)!r} holds no labels; it should have one label per line.")
    pairs = [_PAIR.match(line) for line in lines if line.strip()]
    if all(pairs):
        return _from_pairs(p, [(int(m.group(1)), m.group(2)) for m in pairs if m])
    return [line.strip() for line in lines]


def _from_pairs(p: Path, pairs: list[tuple[int, str]]) -> list[str]:
    top = max(i for i, _ in pairs)
    if top > MAX_LABEL_ID:
        raise InputError(f"labels file {str(p)!r} uses id {top}; ids above {MAX_LABEL_ID} are not plausible. "
                         "Check the file's format (\"id label\" per line).")
    labels = [""] * (top + 1)
    for i, name in pairs:
        if labels[i]:
            raise InputError(f"labels file {str(p)!r} gives id {i} twice ({labels[i]!r} and {name!r}).")
        labels[i] = name
    return labels


def label_for(labels: Sequence[str] | None, i: int) -> str:
    """The label of class id ``i``, or the id as a string when there is none."""
    if labels is not None and 0 <= i < len(labels) and labels[i]:
        return labels[i]
    return str(i)


def align_labels(labels: Sequence[str], num_classes: int) -> tuple[list[str], str | None]:
    """Match a label list to a classifier with ``num_classes`` outputs.

    Models trained on ImageNet with TF-Slim output 1001 classes, id 0 being "background";
    their label files have 1001 lines (then nothing changes) or 1000 (then "background" is
    put first so ids line up). Returns the labels to index by output id, and a note for
    the user when the counts do not match any other way.
    """
    n = len(labels)
    if n == num_classes:
        return list(labels), None
    if n == num_classes - 1:
        return ["background", *labels], None
    return list(labels), (f"the labels have {n} entries but the model outputs {num_classes} classes; "
                          "ids without a label are shown as numbers. Check that the labels belong to this model.")


def detector_labels_note(labels: Sequence[str], num_classes: int | None, *, background: bool = True) -> str | None:
    """A warning when a detector's label list cannot belong to a model with ``num_classes`` classes.

    A label file fits with one label per class, or, with ``background`` (an SSD), one more (a
    "background" or "???" line first, as some COCO label files have); a YOLO head's class i is
    label i, so it takes exactly one per class. Anything else (1001 ImageNet labels on a 90-class
    COCO SSD, 1000 on an 80-class YOLO) would name boxes wrongly, so the note names both counts.
    """
    n = len(labels)
    if num_classes is None or n == num_classes or (background and n == num_classes + 1):
        return None
    return (f"the labels have {n} entries but the model detects {num_classes} classes; the labels do not "
            "belong to this model (boxes would be named wrongly): pass its own labels file with --labels")
