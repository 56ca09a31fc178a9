"""The one comparison of a golden self-test: what a version outputs here against what it output where it was made.

Where the expected outputs were written by the same interpreter build on the same kind of machine
(``made_with`` in the ``.npz`` names the backend, its version, the delegate, the machine and the
pointer size), the raw tensors must agree within two quantization steps (0.1 % of the largest value
for float outputs): the same build gives the same numbers, and any more is a different model.

Anywhere else (ai-edge-litert on the workstation, tflite-runtime on a 32-bit Pi; x86 against ARM)
int8 kernels round differently (XNNPACK's and the reference kernels, FMA on aarch64): a few values
differ by a step, an SSD's detections come in another order, a class near a tie swaps places. There
the task's result is compared, as a user would see it:

- classes: the same top-1, or a near-tie: the two classes within :data:`TIE_STEPS` quantization
  steps of each other on both machines; and the top-1 score within :data:`SCORE_STEPS` steps;
- detections (SSD, YOLO, anchors): each detection matched by one of the same class with
  IoU >= :data:`MATCH_IOU` (or, for boxes a few pixels wide, where a third of a pixel costs more
  IoU than that, every edge within :data:`MATCH_PX` input pixels) and a score within
  :data:`SCORE_STEPS` steps; a detection within that margin of the score threshold may appear on
  one machine only;
- segmentation masks: at least :data:`MASK_AGREEMENT` of the pixels of the same class;
- anything else: the raw tensors within :data:`SCORE_STEPS` steps.

A step is the output's quantization scale; for float outputs it is :data:`FLOAT_STEP` (a uint8
score's step, 1/256) of the largest value, at least 1/256 (detection scores: 1/256).

Measured (x86_64, the shared models and photos, 4 photos each): ai-edge-litert 2.3.0 against
tflite-runtime 2.14.0 differ by up to 7 steps in a classifier's scores (mobilenet_v1 0.25) and
6 steps in SSD scores; one photo's top-1 of mobilenet_v2 is an exact tie on one and 8 steps apart
on the other; SSD boxes of 5 px kites move by 0.3 px (IoU 0.85). ai-edge-litert 2.3.0 on x86_64
against the same on aarch64 (emulated, .ci/arm) on identical golden inputs: a top-1 score 10 steps
apart (mobilenet_v2, cat.bmp). Hence 12 steps.
"""

from __future__ import annotations

import platform
import struct
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from edgekit.errors import ModelError
from edgekit.runtimes import Model

if TYPE_CHECKING:
    from edgekit.contract.modelreading import ModelReading
    from edgekit.contract.segmentation import SegmentationLayout

__all__ = ["MADE_WITH", "TIE_STEPS", "SCORE_STEPS", "MATCH_IOU", "MATCH_PX", "MASK_AGREEMENT", "FLOAT_STEP", "made_with",
           "expected_arrays", "compare_case"]

MADE_WITH = "made_with"  # the .npz entry naming where its outputs were made
TIE_STEPS = 12
SCORE_STEPS = 12
MATCH_IOU = 0.9
MATCH_PX = 2.0
MASK_AGREEMENT = 0.99
FLOAT_STEP = 1 / 256


def made_with(model: Model) -> str:
    """The interpreter build and machine `model` runs with here, as the expected outputs record it."""
    d = model.describe()
    return (f"{d['backend']} {d['backend_version']}, delegate {d['delegate']}, {platform.machine()} "
            f"{struct.calcsize('P') * 8}-bit")


def expected_arrays(model: Model, outputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """What a ``<case>.npz`` holds: every output, and where they were made."""
    arrays: dict[str, np.ndarray] = {f"output_{i}": np.asarray(o) for i, o in enumerate(outputs)}
    arrays[MADE_WITH] = np.array(made_with(model))
    return arrays


def _step(model: Model, i: int, expected: np.ndarray) -> float:
    spec = model.outputs[i]
    if spec.quantized:
        return float(spec.scale)
    return max(FLOAT_STEP, FLOAT_STEP * float(np.abs(expected).max(initial=0.0)))


def _raw_tolerance(model: Model, i: int, expected: np.ndarray) -> float:
    """Same build, same machine: two quantization steps, else 0.1 % of the largest value."""
    spec = model.outputs[i]
    if spec.quantized:
        return 2.0 * spec.scale + 1e-6
    return 1e-3 * float(np.abs(expected).max(initial=0.0)) + 1e-5


def compare_case(model: Model, case: str, outputs: Sequence[np.ndarray], expected: Mapping[str, np.ndarray],
                 source: str) -> float:
    """Compare one golden case; return the largest raw difference (for the report).

    Raises:
        ModelError: the outputs are not what the version output where it was made (the message
            says which comparison was made, and what differs).
    """
    exp: list[np.ndarray] = []
    for i, out in enumerate(outputs):
        key = f"output_{i}"
        if key not in expected:
            raise ModelError(f"{source} lacks {key}; rewrite it with write_expected_outputs()")
        e = np.asarray(expected[key])
        if e.shape != out.shape:
            raise ModelError(f"golden {case!r} output {i}: shape {out.shape}, expected {e.shape}")
        exp.append(e)
    worst = max((float(np.abs(o.astype(np.float64) - e).max(initial=0.0)) for o, e in zip(outputs, exp)), default=0.0)
    recorded = str(expected[MADE_WITH]) if MADE_WITH in expected else None
    here = made_with(model)
    if recorded == here:
        for i, (o, e) in enumerate(zip(outputs, exp)):
            err, allowed = float(np.abs(o.astype(np.float64) - e).max(initial=0.0)), _raw_tolerance(model, i, e)
            if err > allowed:
                raise ModelError(f"golden {case!r} output {i} differs from {source} by {err:.4g} (allowed "
                                 f"{allowed:.4g}: the same interpreter build on the same machine, {here})")
        return worst
    where = f"made with {recorded}" if recorded else "made where it does not say"
    problem = _task_difference(model, list(outputs), exp)
    if problem:
        raise ModelError(f"golden {case!r}: {problem}, against {source} ({where}; here {here}; compared as "
                         "results, since the interpreter or machine differs)")
    return worst


def _task_difference(model: Model, outs: list[np.ndarray], exp: list[np.ndarray]) -> str | None:
    """Why the outputs differ as the task's results (by the model's reading), or None."""
    from edgekit.contract import OutputFormat

    try:
        reading: ModelReading | None = model.reading()
    except ModelError:
        reading = None  # compared as raw tensors, in quantization steps
    if reading is not None and reading.format is OutputFormat.CLASSES:
        return _classes_difference(outs[0].reshape(-1).astype(np.float64), exp[0].reshape(-1).astype(np.float64),
                                   _step(model, 0, exp[0]))
    if reading is not None and reading.format in (OutputFormat.SSD, OutputFormat.YOLO, OutputFormat.ANCHORS):
        return _detections_difference(model, reading, outs, exp)
    if reading is not None and reading.format is OutputFormat.SEGMENTATION:
        return _mask_difference(reading.segmentation, outs[0], exp[0])
    for i, (o, e) in enumerate(zip(outs, exp)):
        err, allowed = float(np.abs(o.astype(np.float64) - e).max(initial=0.0)), SCORE_STEPS * _step(model, i, e)
        if err > allowed:
            return f"output {i} differs by {err:.4g} (allowed {allowed:.4g}, {SCORE_STEPS} quantization steps)"
    return None


def _classes_difference(got: np.ndarray, exp: np.ndarray, step: float) -> str | None:
    g, e = int(np.argmax(got)), int(np.argmax(exp))  # argmax: the lower id of a tie, everywhere
    tie = TIE_STEPS * step + 1e-9
    if g != e and not (exp[e] - exp[g] <= tie and got[g] - got[e] <= tie):
        return (f"top-1 is class {g} (score {got[g]:.4g}; {exp[g]:.4g} there), expected class {e} (score "
                f"{exp[e]:.4g}; {got[e]:.4g} here), not a near-tie (within {TIE_STEPS} steps of {step:.4g})")
    if abs(got[e] - exp[e]) > SCORE_STEPS * step + 1e-9:
        return (f"class {e}'s score is {got[e]:.4g}, expected {exp[e]:.4g} (allowed {SCORE_STEPS} steps of "
                f"{step:.4g})")
    return None


def _detections_difference(model: Model, reading: ModelReading, outs: list[np.ndarray],
                           exp: list[np.ndarray]) -> str | None:
    from edgekit.contract import Transform, box_iou, image_input
    from edgekit.contract.decode import decoder_for

    decoder: Any = decoder_for(reading)
    size = reading.input.size if reading.input is not None else image_input(model.inputs[0]).size
    transform = Transform.identity(size)
    got, want = decoder(outs, transform), decoder(exp, transform)
    score_out = getattr(decoder, "ssd_order", (0, 1, 2, 3))[2] if len(outs) == 4 else 0
    spec = model.outputs[min(max(score_out, 0), len(outs) - 1)]
    step = float(spec.scale) if spec.quantized else FLOAT_STEP
    margin = SCORE_STEPS * step + 1e-9
    threshold = float(getattr(decoder, "threshold", 0.0))
    used = np.zeros(len(got), bool)
    for j in np.argsort(-want.scores, kind="stable"):
        box, score, cls = want.xyxy[j], float(want.scores[j]), int(want.class_ids[j])
        near = np.abs(got.xyxy - box).max(axis=1, initial=0.0) <= MATCH_PX if len(got) else np.zeros(0, bool)
        iou = box_iou(box, got.xyxy) if len(got) else np.zeros(0)
        fits = (got.class_ids == cls) & ~used & (np.abs(got.scores - score) <= margin) & ((iou >= MATCH_IOU) | near)
        k = int(np.argmax(np.where(fits, iou + 1.0, 0.0))) if fits.any() else -1
        if k >= 0:
            used[k] = True
        elif score - threshold > margin:
            return (f"detection of class {cls} at {np.round(box, 1).tolist()} (score {score:.3f}) has no match "
                    f"here (same class, IoU >= {MATCH_IOU} or edges within {MATCH_PX:g} px, score within "
                    f"{margin:.3g}); here: {_listed(got)}")
    for k in np.flatnonzero(~used).tolist():
        if float(got.scores[k]) - threshold > margin:
            return (f"detection of class {int(got.class_ids[k])} at {np.round(got.xyxy[k], 1).tolist()} (score "
                    f"{float(got.scores[k]):.3f}) is new here; expected: {_listed(want)}")
    return None


def _listed(dets: Any) -> str:
    rows = [f"{int(c)}@{np.round(b, 1).tolist()}:{s:.3f}" for b, s, c in zip(dets.xyxy, dets.scores, dets.class_ids)]
    return ", ".join(rows[:5]) + (f" and {len(rows) - 5} more" if len(rows) > 5 else "") if rows else "none"


def _mask_difference(layout: SegmentationLayout | None, got: np.ndarray, exp: np.ndarray) -> str | None:
    from edgekit.contract.segmentation import class_map_of

    if layout is None:
        return None if np.array_equal(got, exp) else "the mask differs"
    g, e = class_map_of(got, layout), class_map_of(exp, layout)
    agree = float(np.mean(g == e)) if e.size else 1.0
    if agree < MASK_AGREEMENT:
        return f"{agree:.2%} of the mask's pixels have the same class (at least {MASK_AGREEMENT:.0%} required)"
    return None
