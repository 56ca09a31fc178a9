"""Self-tests for a model version before it may serve: golden inputs, expected outputs, fit.

A model folder holds golden inputs (``golden/<case>.npy``: RGB uint8 images, preprocessed for
each version's own input as the device would, or arrays of exactly the model's input) that
every version must run cleanly, and a version may bring what it must output for them
(``<version>/golden/<case>.npz``, written by :func:`write_expected_outputs` where the model
was checked). :mod:`edgekit.inspect.modelwatch` runs these before switching to a new version.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import ModelError
from edgekit.inspect.golden import compare_case, expected_arrays
from edgekit.runtimes import Model, load_model

__all__ = ["ModelRefused", "compatible", "golden_inputs", "golden_tensor", "run_golden", "self_test",
           "write_expected_outputs"]


class ModelRefused(ModelError):
    """A model version failed to load, did not fit the serving model, or failed its self-test."""


def golden_inputs(root: Path) -> dict[str, np.ndarray]:
    return {p.stem: np.load(p, allow_pickle=False) for p in sorted((root / "golden").glob("*.npy"))}


def run_golden(model: Model, x: np.ndarray) -> list[np.ndarray]:
    """Run one golden input: as it is when it matches the model's input, else, when it is an
    RGB uint8 image, resized and normalized the way the device would, by the model's reading (a
    version may take another input size or type than the one the golden files were made for).

    Raises:
        ModelError: the image needs preprocessing and the model's outputs read as no format.
    """
    return model.run(golden_tensor(model, x), dequantize=True)


def golden_tensor(model: Model, x: np.ndarray) -> np.ndarray:
    """`x` as `model`'s input: untouched when its shape and type match (with or without the batch of 1),
    else an RGB uint8 image (H, W, 3) or (1, H, W, 3) preprocessed for the model."""
    spec = model.inputs[0] if len(model.inputs) == 1 else None
    if spec is None or (x.shape in (tuple(spec.shape), tuple(spec.shape)[1:]) and x.dtype == spec.dtype):
        return x  # (a uint8 photo of the input's size for an int8 or float model is preprocessed below)
    image = x[0] if x.ndim == 4 and x.shape[0] == 1 else x
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3 or len(spec.shape) != 4:
        return x  # not an image: let the model's own check say what does not fit
    from edgekit.preprocess import fit, to_input

    reading = model.reading()  # the device's preprocessing, decided when the model loaded
    pre, image_in = reading.preprocessing, reading.input
    if pre is None or image_in is None:
        return x  # not one RGB image input: let the model's own check say what does not fit
    resized, _ = fit(image, image_in.size, pre.resize, pad_value=pre.pad_value, interpolation=pre.interpolation,
                     boxes=pre.box_mapping)  # (1, H, W, 3) or channels first
    return to_input(resized, spec, pre.normalization)


def self_test(model: Model, version_dir: Path, golden: dict[str, np.ndarray]) -> tuple[int, float | None]:
    """Run every golden input; compare with ``<version>/golden/<case>.npz`` where present.

    The comparison is :func:`edgekit.inspect.golden.compare_case`: raw tensors where the same
    interpreter build made them on the same kind of machine, the task's results elsewhere.

    Returns (cases compared, max raw difference). Raises ModelRefused on a failure.
    """
    compared, worst = 0, None
    for case, x in golden.items():
        try:
            outputs = run_golden(model, x)
        except ModelError as exc:  # InputError is not a ModelError: keep it apart
            raise ModelRefused(f"golden input {case!r} does not run: {exc}") from None
        except ValueError as exc:
            raise ModelRefused(f"golden input {case!r} does not fit the model's input: {exc}") from None
        for i, out in enumerate(outputs):
            if not np.isfinite(np.asarray(out, dtype=np.float64)).all():
                raise ModelRefused(f"golden input {case!r}: output {i} holds NaN or infinity")
        expected_file = version_dir / "golden" / f"{case}.npz"
        if not expected_file.is_file():
            continue
        with np.load(expected_file, allow_pickle=False) as expected:
            try:
                err = compare_case(model, case, outputs, expected, expected_file.name)
            except ModelError as exc:
                raise ModelRefused(str(exc)) from None
        worst = err if worst is None else max(worst, err)
        compared += 1
    return compared, worst


def write_expected_outputs(model_path: str | os.PathLike[str], root: str | os.PathLike[str],
                           version: int, **load_kw: Any) -> list[Path]:
    """Save what `model_path` outputs for ``root/golden/*.npy`` as ``root/<version>/golden/*.npz``.

    They record the interpreter and machine they were made with: the device compares raw tensors
    where it runs the same build, the task's results elsewhere (see :mod:`edgekit.inspect.golden`).
    """
    root = Path(root)
    out_dir = root / str(version) / "golden"
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with load_model(model_path, **load_kw) as model:
        for case, x in golden_inputs(root).items():
            outs = run_golden(model, x)
            path = out_dir / f"{case}.npz"
            np.savez(path, allow_pickle=False, **expected_arrays(model, outs))  # numbers; np.load reads no pickles
            written.append(path)
    return written


def compatible(new: Model, serving: Model) -> str | None:
    """Why `new` cannot replace `serving` in a running pipeline, or None if it can.

    Only what the rules and the receivers of the events depend on must stay: the task, the
    output format and the label set. The input may change (an int8 model replaced by its
    float32 build, a larger input size): the new version gets its own preprocessing.
    """
    (old_task, old_fmt), (new_task, new_fmt) = _reading(serving), _reading(new)
    if new_task != old_task:
        return f"it is a {new_task} model, the serving model a {old_task} model (a different task)"
    if new_fmt != old_fmt:
        return (f"its outputs read as {new_fmt}, the serving model's as {old_fmt} (a different output format; "
                f"outputs {[list(o.shape) for o in new.outputs]} against {[list(o.shape) for o in serving.outputs]})")
    old_labels, new_labels = _labels(serving), _labels(new)
    if old_labels is not None and new_labels is not None and old_labels != new_labels:
        added = [x for x in new_labels if x not in old_labels]
        missing = [x for x in old_labels if x not in new_labels]
        what = ", ".join(filter(None, [f"adds {added[:5]}" if added else "",
                                       f"lacks {missing[:5]}" if missing else ""])) or "orders them differently"
        return f"its labels differ from the serving model's (a different label set: it {what})"
    return None


def _reading(model: Model) -> tuple[str, str]:
    """The task and output format the model's reading gives (an unknown one when it reads as none)."""
    try:
        reading = model.reading()
    except ModelError:
        return "an unknown", f"an unknown format (outputs {[list(o.shape) for o in model.outputs]})"
    return reading.task.value, reading.format.value


def _labels(model: Model) -> list[str] | None:
    try:
        return list(model.reading().labels) or None
    except ModelError:
        return None
