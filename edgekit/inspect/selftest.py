"""Self-tests for a model version before it may serve: golden inputs, expected outputs, fit.

A model folder holds golden inputs (``golden/<case>.npy``, arrays of the model's input) that
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
from edgekit.runtimes import Model, load_model

__all__ = ["ModelRefused", "compatible", "golden_inputs", "run_golden", "self_test", "write_expected_outputs"]


class ModelRefused(ModelError):
    """A model version failed to load, did not fit the serving model, or failed its self-test."""


def golden_inputs(root: Path) -> dict[str, np.ndarray]:
    return {p.stem: np.load(p, allow_pickle=False) for p in sorted((root / "golden").glob("*.npy"))}


def run_golden(model: Model, x: np.ndarray) -> list[np.ndarray]:
    return model.run(x, dequantize=True)


def _tolerance(model: Model, i: int, expected: np.ndarray) -> float:
    """Two quantization steps of a quantized output, else 0.1% of its largest value."""
    spec = model.outputs[i]
    if spec.quantized:
        return 2.0 * spec.scale + 1e-6
    return 1e-3 * float(np.abs(expected).max(initial=0.0)) + 1e-5


def self_test(model: Model, version_dir: Path, golden: dict[str, np.ndarray]) -> tuple[int, float | None]:
    """Run every golden input; compare with ``<version>/golden/<case>.npz`` where present.

    Returns (cases compared, max error). Raises ModelRefused on a failure.
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
            for i, out in enumerate(outputs):
                key = f"output_{i}"
                if key not in expected:
                    raise ModelRefused(f"{expected_file} lacks {key}; rewrite it with write_expected_outputs()")
                exp = expected[key]
                if exp.shape != out.shape:
                    raise ModelRefused(f"golden {case!r} output {i}: shape {out.shape}, expected {exp.shape}")
                err = float(np.abs(out.astype(np.float64) - exp).max(initial=0.0))
                if err > _tolerance(model, i, exp):
                    raise ModelRefused(f"golden {case!r} output {i} differs from {expected_file.name} by "
                                       f"{err:.4g} (allowed {_tolerance(model, i, exp):.4g})")
                worst = err if worst is None else max(worst, err)
        compared += 1
    return compared, worst


def write_expected_outputs(model_path: str | os.PathLike[str], root: str | os.PathLike[str],
                           version: int, **load_kw: Any) -> list[Path]:
    """Save what `model_path` outputs for ``root/golden/*.npy`` as ``root/<version>/golden/*.npz``.

    Run it where the model was checked (same interpreter and delegate as the device, ideally
    on the device), then ship the files with the version.
    """
    root = Path(root)
    out_dir = root / str(version) / "golden"
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with load_model(model_path, **load_kw) as model:
        for case, x in golden_inputs(root).items():
            outs = run_golden(model, x)
            path = out_dir / f"{case}.npz"
            arrays: dict[str, Any] = {f"output_{i}": o for i, o in enumerate(outs)}
            np.savez(path, **arrays)
            written.append(path)
    return written


def compatible(new: Model, serving: Model) -> str | None:
    """Why `new` cannot replace `serving` in a running pipeline, or None if it can."""
    a = [(s.shape, np.dtype(s.dtype).name) for s in serving.inputs]
    b = [(s.shape, np.dtype(s.dtype).name) for s in new.inputs]
    if a != b:
        return f"its inputs {b} differ from the serving model's {a} (the pipeline is set up for those)"
    if len(new.outputs) != len(serving.outputs):
        return f"it has {len(new.outputs)} outputs, the serving model {len(serving.outputs)}"
    return None
