"""The typed result of a conversion, and the name a model gets when it fails the gate."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.converters.audit import AuditReport
from edgekit.converters.engines.base import LayerError
from edgekit.converters.debug import FallbackOutcome, worst_layers
from edgekit.converters.edgetpu import EdgeTPUCompilation
from edgekit.converters.evaluate import Metrics
from edgekit.converters.gate import GateResult
from edgekit.converters.options import Mode, OutputFormat, Task
from edgekit.converters.preprocessing import Preprocessing
from edgekit.errors import AccuracyGateError, ConversionError

__all__ = ["ConversionResult", "failed_gate_path", "result_to_dict"]

WORST_SHOWN = 5  # the worst layers the report names


@dataclass(frozen=True)
class ConversionResult:
    """What :func:`convert` did and measured.

    ``output`` is the file written: the requested path, or ``OUT.FAILED-GATE.tflite``
    when the gate failed. Sizes are in bytes; metrics fractions are 0..1, drops in points.
    """

    output: Path
    mode: Mode
    size_bytes: int  # the written file, metadata included
    float_size_bytes: int  # the float32 conversion of the same model
    metrics: Metrics
    gate: GateResult
    warnings: tuple[str, ...]
    layers_kept_in_float: tuple[str, ...]
    layer_errors: tuple[LayerError, ...]
    fallback: FallbackOutcome | None
    audit: AuditReport
    preprocessing: Preprocessing | None
    task: Task | None
    output_format: OutputFormat | None
    labels: tuple[str, ...] | None
    metadata: dict[str, Any]
    source_sha256: str
    engine: str
    report_paths: tuple[Path, ...] = ()
    edgetpu: EdgeTPUCompilation | None = None
    edgetpu_error: str | None = None

    @property
    def passed(self) -> bool:
        return self.gate.passed

    def raise_for_status(self) -> None:
        """Turn a failed gate or a failed Edge TPU compile into an exception.

        Raises:
            AccuracyGateError: the accuracy drop is over the allowed one (CLI exit 3).
            ConversionError: edgetpu mode and the compiler is missing or failed.
        """
        if not self.gate.passed:
            raise AccuracyGateError(f"accuracy gate failed: {self.gate.reason}. The model is written as "
                                    f"{str(self.output)!r} so that nobody ships it by mistake")
        if self.edgetpu_error:
            raise ConversionError(self.edgetpu_error)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (report.json, ``--json``)."""
        return result_to_dict(self)


def failed_gate_path(output: Path) -> Path:
    """OUT.tflite -> OUT.FAILED-GATE.tflite: written instead of OUT when the gate fails."""
    return output.with_name(f"{output.stem}.FAILED-GATE{output.suffix or '.tflite'}")


def _json_safe(value: Any) -> Any:
    """NaN/inf -> None, Paths -> str, tuples -> lists: the report is plain JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def result_to_dict(r: ConversionResult) -> dict[str, Any]:
    """The report document. Keys: mode, output, size_bytes, float_size_bytes, metrics, gate, ..."""
    from edgekit import __version__

    return _json_safe({
        "edgekit_version": __version__,
        "mode": r.mode.value,
        "output": r.output,
        "engine": r.engine,
        "size_bytes": r.size_bytes,
        "float_size_bytes": r.float_size_bytes,
        "size_ratio": round(r.size_bytes / r.float_size_bytes, 4) if r.float_size_bytes else None,
        "metrics": r.metrics.to_dict(),
        "gate": r.gate.to_dict(),
        "task": r.task.value if r.task else None,
        "output_format": r.output_format.value if r.output_format else None,
        "preprocessing": ({**r.preprocessing.to_metadata(), "decided_by": r.preprocessing.decided_by}
                          if r.preprocessing else None),
        "labels": len(r.labels) if r.labels else 0,
        "audit": r.audit.to_dict(),
        "worst_layers": [layer.to_dict() for layer in worst_layers(r.layer_errors, WORST_SHOWN)],
        "layers": [layer.to_dict() for layer in r.layer_errors],
        "layers_kept_in_float": list(r.layers_kept_in_float),
        "fallback": ({"attempts": [a.to_dict() for a in r.fallback.attempts], "passed": r.fallback.passed,
                      "notes": list(r.fallback.notes)} if r.fallback else None),
        "edgetpu": ({"model": r.edgetpu.model, "command": list(r.edgetpu.command), **r.edgetpu.report.to_dict()}
                    if r.edgetpu else None),
        "edgetpu_error": r.edgetpu_error,
        "source_sha256": r.source_sha256,
        "warnings": list(r.warnings),
        "report_paths": list(r.report_paths),
    })
