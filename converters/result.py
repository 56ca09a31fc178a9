"""The typed result of a conversion, and the name a model gets when it fails the gate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.converters.audit import AuditReport
from edgekit.converters.convert import LayerError
from edgekit.converters.debug import FallbackOutcome
from edgekit.converters.edgetpu import EdgeTPUCompilation
from edgekit.converters.evaluate import Metrics
from edgekit.converters.gate import GateResult
from edgekit.converters.options import Mode, OutputFormat, Task
from edgekit.converters.preprocessing import Preprocessing
from edgekit.errors import AccuracyGateError, ConversionError

__all__ = ["ConversionResult", "failed_gate_path"]


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
        from edgekit.converters.report import result_to_dict

        return result_to_dict(self)


def failed_gate_path(output: Path) -> Path:
    """OUT.tflite -> OUT.FAILED-GATE.tflite: written instead of OUT when the gate fails."""
    return output.with_name(f"{output.stem}.FAILED-GATE{output.suffix or '.tflite'}")
