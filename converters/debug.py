"""Per-layer quantization error, and keeping the worst layers in float until the gate passes.

The error of each layer comes from ``tf.lite.experimental.QuantizationDebugger``: it
runs a debug model in which every quantized op is checked against its float value,
giving the RMSE, and RMSE divided by the layer's quantization step (scale). About 0.29
(1/sqrt(12)) is the rounding error of a well calibrated layer; well above is a layer
whose range or distribution int8 does not fit.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from edgekit.converters._native import import_tensorflow
from edgekit.converters.engines.base import LayerError, Representative, io_dtypes
from edgekit.errors import ConversionError

__all__ = [
    "DebuggerDiagnosis",
    "Trial",
    "FallbackAttempt",
    "FallbackOutcome",
    "auto_fallback",
    "worst_layers",
    "plot_layer_errors",
    "plot_fallback",
    "SUSPECT_RMSE_OVER_SCALE",
]

SUSPECT_RMSE_OVER_SCALE = 0.7  # TensorFlow's debugger guide flags layers above this


def _rmse(diffs: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(diffs, dtype=np.float64))))


class DebuggerDiagnosis:
    """Calibrate once with QuantizationDebugger; measure layers; re-quantize with a denylist."""

    def __init__(self, converter: Any, debug_data: Representative, finalize: Callable[[bytes], bytes]) -> None:
        tf = import_tensorflow()
        self._tf = tf
        self._finalize = finalize
        options = tf.lite.experimental.QuantizationDebugOptions(layer_debug_metrics={"rmse": _rmse})
        try:
            self._debugger = tf.lite.experimental.QuantizationDebugger(
                converter=converter, debug_dataset=debug_data, debug_options=options)
            self._debugger.run()
        except Exception as exc:  # noqa: BLE001 - TF's messages, one line for the user
            raise ConversionError(f"the quantization debugger failed: {str(exc).strip().splitlines()[0]}") from None
        dump = io.StringIO()
        self._debugger.layer_statistics_dump(dump)
        self.layers: list[LayerError] = _parse_dump(dump.getvalue())

    def quantize_keeping_float(self, tensor_names: Sequence[str]) -> bytes:
        """The model with these layers (output tensor names) left in float, I/O types of the mode.

        Raises:
            ConversionError: the quantizer refused the denylist.
        """
        opts = self._tf.lite.experimental.QuantizationDebugOptions(denylisted_nodes=list(tensor_names))
        try:
            self._debugger.options = opts
            model = bytes(self._debugger.get_nondebug_quantized_model())
        except ValueError as exc:
            # With every quantized op denylisted the debugger finds nothing to verify and refuses.
            raise ConversionError(f"cannot keep {len(tensor_names)} layer(s) in float: {exc}. "
                                  "The model is then float; use --mode float16 instead") from None
        return self._finalize(model)


def _parse_dump(text: str) -> list[LayerError]:
    rows = list(csv.DictReader(io.StringIO(text)))
    out = []
    for r in rows:
        tensor = r.get("tensor_name", "")
        out.append(LayerError(name=_short_name(tensor), tensor_name=tensor, op=r.get("op_name", ""),
                              rmse=_float(r.get("rmse")), scale=_float(r.get("scale")),
                              max_abs_error=_float(r.get("max_abs_error")),
                              elements=int(_float(r.get("num_elements")))))
    return out


def _float(value: str | None) -> float:
    try:
        return float(value) if value not in (None, "") else float("nan")
    except ValueError:
        return float("nan")


_WRAPPER = re.compile(
    r"^(functional(_\d+)*|sequential(_\d+)*|model(_\d+)*|StatefulPartitionedCall.*|.*_batch1(_\d+)*)$")


def _short_name(tensor: str) -> str:
    """'functional_1_1/functional_1/conv2_1/Relu;...' -> 'conv2_1/Relu' (the layer, for people)."""
    first = tensor.split(";")[0]
    parts = [p for p in first.split("/") if not _WRAPPER.match(p)]
    return "/".join(parts[-2:]) if parts else first


def worst_layers(layers: Sequence[LayerError], n: int = 5) -> list[LayerError]:
    """The `n` layers with the largest RMSE/scale (NaN last)."""
    ranked = [layer for layer in layers if np.isfinite(layer.rmse_over_scale)]
    return sorted(ranked, key=lambda layer: -layer.rmse_over_scale)[:n]


@dataclass(frozen=True)
class Trial:
    """What the caller measured on one candidate model."""

    passed: bool
    drop: float | None
    latency_ms: float | None
    detail: Any = None


@dataclass(frozen=True)
class FallbackAttempt:
    kept_in_float: tuple[LayerError, ...]
    size_bytes: int
    trial: Trial
    label: str = ""  # what this candidate added: "all int8", "+ boxes decode tail", "+ 2 worst layers"

    def to_dict(self) -> dict[str, Any]:
        metrics = getattr(self.trial.detail, "metrics", None)
        fidelity = getattr(metrics, "detection", None)
        return {"label": self.label, "layers_in_float": [layer.name for layer in self.kept_in_float],
                "size_bytes": self.size_bytes, "drop": self.trial.drop, "passed": self.trial.passed,
                "latency_ms": self.trial.latency_ms, "int8_latency_ms": getattr(self.trial.detail, "int8_latency_ms", None),
                "fidelity": fidelity.to_dict() if fidelity is not None else None}


@dataclass(frozen=True)
class FallbackOutcome:
    attempts: tuple[FallbackAttempt, ...]
    chosen: FallbackAttempt | None  # the first that passed, else the smallest drop
    model: bytes | None
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.chosen is not None and self.chosen.trial.passed


def _steps(limit: int) -> list[int]:
    """1, 2, 4, ... up to and including `limit`: few re-measurements, growing reach."""
    out, k = [], 1
    while k < limit:
        out.append(k)
        k *= 2
    return out + [limit]


def auto_fallback(diagnosis: Any, measure: Callable[[bytes], Trial], *, max_layers: int,
                  io_dtype: str, groups: Sequence[Any] = (), baseline: tuple[bytes, Trial] | None = None
                  ) -> FallbackOutcome:
    """Keep layers in float until `measure` says the gate passed: first each of `groups` (op groups
    with a ``label`` and output ``tensors``, cheapest first: a detector's decode tails), adding up,
    then the worst layers by RMSE/scale, 1, 2, 4, ... up to `max_layers` of them on top.
    `baseline` (the all-int8 model and its trial) is the table's first row, what costs are against.

    A layer whose float version would change the model's input or output type (the mode
    promises `io_dtype`) is skipped and named in the notes.
    """
    kept: list[LayerError] = []
    notes: list[str] = []
    attempts: list[tuple[FallbackAttempt, bytes]] = []
    if baseline is not None:
        attempts.append((FallbackAttempt((), len(baseline[0]), baseline[1], "all int8"), baseline[0]))
    by_name = {x.tensor_name: x for x in diagnosis.layers}
    for group in groups:
        add = [by_name[t] for t in group.tensors if t in by_name and by_name[t] not in kept]
        if not add:
            continue
        try:
            model = diagnosis.quantize_keeping_float([x.tensor_name for x in kept + add])
        except ConversionError as exc:
            notes.append(f"{group.label} stays int8: {exc}")
            continue
        if not _io_ok(model, io_dtype):
            notes.append(f"{group.label} stays int8: in float it would make the model's input float, and this "
                         f"mode promises {io_dtype}")
            continue
        kept.extend(add)
        if any(t != io_dtype for t in io_dtypes(model)[1]) and not any("outputs float32" in n for n in notes):
            notes.append(f"with the {group.label} in float the model's outputs are float32, not {io_dtype} "
                         "(its input stays so): the boxes are computed and handed over in float")
        attempt = FallbackAttempt(tuple(kept), len(model), measure(model), f"+ {group.label}")
        attempts.append((attempt, model))
        if attempt.trial.passed:
            return _outcome(attempts, notes)
    # A layer with (almost) no error of its own (pooling, reshape: it shares its input's
    # scale) gains nothing in float.
    queue = [x for x in worst_layers(diagnosis.layers, n=len(diagnosis.layers))
             if x.rmse_over_scale > 0.1 and x not in kept]
    base = len(kept)
    for step in _steps(min(max_layers, len(queue))):
        try:
            model = _grow(diagnosis, kept, queue, base + step, io_dtype, notes)
        except ConversionError as exc:
            notes.append(str(exc))
            break
        if len(kept) == base or (attempts and len(attempts[-1][0].kept_in_float) == len(kept)):
            continue
        if model is None:
            model = diagnosis.quantize_keeping_float([x.tensor_name for x in kept])
        attempt = FallbackAttempt(tuple(kept), len(model), measure(model), f"+ {len(kept) - base} worst layer(s)")
        attempts.append((attempt, model))
        if attempt.trial.passed:
            break
    return _outcome(attempts, notes)


def _grow(diagnosis: Any, kept: list[LayerError], queue: list[LayerError], target: int, io_dtype: str,
          notes: list[str]) -> bytes | None:
    """Move layers from `queue` to `kept` until `target` are kept; return the model when built."""
    model = None
    while len(kept) < target and queue:
        batch = queue[:target - len(kept)]
        del queue[:len(batch)]
        model = diagnosis.quantize_keeping_float([x.tensor_name for x in kept + batch])
        if _io_ok(model, io_dtype):
            kept.extend(batch)
            continue
        model = None
        for layer in batch:  # find the layer(s) at the model's edge, one by one
            candidate = diagnosis.quantize_keeping_float([x.tensor_name for x in kept + [layer]])
            if _io_ok(candidate, io_dtype):
                kept.append(layer)
                model = candidate
            else:
                notes.append(f"{layer.name} ({layer.op}) stays int8: in float it would make the model's "
                             f"input or output float, and this mode promises {io_dtype}")
    return model


def _outcome(attempts: list[tuple[FallbackAttempt, bytes]], notes: list[str]) -> FallbackOutcome:
    if not any(a.kept_in_float for a, _ in attempts):
        notes.append("no layer could be kept in float")
    if not attempts:
        return FallbackOutcome((), None, None, tuple(notes))
    passing = [(a, m) for a, m in attempts if a.trial.passed]
    if passing:
        chosen, model = passing[0]
    else:  # the fewest failed checks of the gate, then the smallest drop
        chosen, model = min(attempts, key=lambda am: (_failed_checks(am[0].trial),
                                                      am[0].trial.drop if am[0].trial.drop is not None else 1e9))
    return FallbackOutcome(tuple(a for a, _ in attempts), chosen, model, tuple(notes))


def _failed_checks(trial: Trial) -> int:
    checks = getattr(getattr(trial.detail, "gate", None), "checks", ())
    return sum(1 for c in checks if not c.passed)


def _io_ok(model: bytes, io_dtype: str) -> bool:
    ins, _ = io_dtypes(model)
    return all(t == io_dtype for t in ins)


def _figure(width: float, height: float) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ConversionError("plots need matplotlib; run: pip install 'edgekit-tflite[convert]'") from None
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)  # the Agg canvas: no display, no global pyplot state
    return fig


def plot_layer_errors(layers: Sequence[LayerError], path: Path, kept: Sequence[str] = ()) -> Path:
    """A PNG bar chart of RMSE/scale per layer in graph order, suspect ones and float ones marked."""
    ratios = [layer.rmse_over_scale if np.isfinite(layer.rmse_over_scale) else 0.0 for layer in layers]
    fig = _figure(max(6.0, 0.28 * len(layers) + 2), 4.5)
    ax = fig.add_subplot(1, 1, 1)
    colors = ["#2a9d8f" if layer.tensor_name in kept else
              "#e76f51" if r > SUSPECT_RMSE_OVER_SCALE else "#577590" for layer, r in zip(layers, ratios)]
    ax.bar(range(len(layers)), ratios, color=colors)
    ax.axhline(SUSPECT_RMSE_OVER_SCALE, color="#e76f51", linestyle="--", linewidth=1,
               label=f"suspect (> {SUSPECT_RMSE_OVER_SCALE})")
    ax.axhline(1 / np.sqrt(12), color="grey", linestyle=":", linewidth=1, label="rounding only (0.29)")
    ax.set_xticks(range(len(layers)))
    ax.set_xticklabels([f"{layer.name} [{layer.op}]" for layer in layers], rotation=75, ha="right", fontsize=7)
    ax.set_ylabel("RMSE / scale (quantization steps)")
    ax.set_title("Quantization error by layer" + (" (green: kept in float)" if kept else ""))
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path


def plot_fallback(attempts: Sequence[FallbackAttempt], max_drop: float, path: Path) -> Path:
    """A PNG of the measured drop against the number of layers kept in float."""
    fig = _figure(6.0, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    xs = [len(a.kept_in_float) for a in attempts]
    ys = [a.trial.drop if a.trial.drop is not None else np.nan for a in attempts]
    ax.plot(xs, ys, marker="o")
    ax.axhline(max_drop, color="#e76f51", linestyle="--", label=f"gate: max drop {max_drop:g}")
    ax.set_xlabel("layers kept in float")
    ax.set_ylabel("drop (points)")
    ax.set_title("Auto-fallback")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
