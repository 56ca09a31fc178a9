"""edgekit's workstation side: convert a Keras/SavedModel model into a checked .tflite.

TensorFlow is imported only when a conversion starts (metadata writing and Edge TPU log
parsing work without it)::

    from edgekit.converters import convert, ConvertOptions, Mode

    result = convert("model.keras", "model_int8.tflite", calibration="images/",
                     options=ConvertOptions(mode=Mode.INT8, max_drop=1.0))
    print(result.size_bytes / result.float_size_bytes, result.metrics.top1_agreement, result.gate.status)
    result.raise_for_status()   # AccuracyGateError (exit status 3) when the gate failed
"""

from __future__ import annotations

from edgekit.contract import map50  # mAP@0.5 is the model contract's, shared with the device
from edgekit.converters.audit import AuditFinding, AuditReport, audit_calibration
from edgekit.converters.compare import ModeComparison, compare_modes, format_comparison
from edgekit.converters.engines.tflite_converter import (
                                        MODE_SETTINGS,
                                        LayerDiagnosis,
                                        LayerError,
                                        ModeSettings,
                                        QuantizerEngine,
                                        TFLiteConverterEngine,
)
from edgekit.converters.data import DataSplit, Samples, load_data
from edgekit.converters.debug import FallbackAttempt, FallbackOutcome, Trial, auto_fallback, worst_layers
from edgekit.converters.edgetpu import (
                                        CompilerReport,
                                        EdgeTPUCompilation,
                                        OpStatus,
                                        compile_for_edgetpu,
                                        compiler_command,
                                        parse_compiler_log,
)
from edgekit.converters.evaluate import Metrics, OutputMetrics, compare, predict
from edgekit.converters.fidelity import DetectionFidelity
from edgekit.converters.gate import GateMeasure, GateResult, GateTargets, check_gate
from edgekit.converters.metadata_writer import write_metadata, write_metadata_file
from edgekit.converters.options import (
                                        ColorOrder,
                                        ConvertOptions,
                                        Mode,
                                        OutputFormat,
                                        PreprocessingOverrides,
                                        ResizeMode,
                                        Task,
)
from edgekit.converters.pipeline import convert
from edgekit.converters.preprocessing import Preprocessing
from edgekit.converters.result import ConversionResult, failed_gate_path
from edgekit.errors import AccuracyGateError, ConversionError

__all__ = [
    "AccuracyGateError",
    "AuditFinding",
    "AuditReport",
    "ColorOrder",
    "CompilerReport",
    "ConversionError",
    "ConversionResult",
    "ConvertOptions",
    "DataSplit",
    "EdgeTPUCompilation",
    "FallbackAttempt",
    "FallbackOutcome",
    "GateResult",
    "GateMeasure",
    "GateTargets",
    "DetectionFidelity",
    "LayerDiagnosis",
    "LayerError",
    "MODE_SETTINGS",
    "Metrics",
    "Mode",
    "ModeComparison",
    "ModeSettings",
    "OpStatus",
    "OutputFormat",
    "OutputMetrics",
    "Preprocessing",
    "PreprocessingOverrides",
    "QuantizerEngine",
    "ResizeMode",
    "Samples",
    "TFLiteConverterEngine",
    "Task",
    "Trial",
    "audit_calibration",
    "auto_fallback",
    "check_gate",
    "compare",
    "compare_modes",
    "compile_for_edgetpu",
    "compiler_command",
    "convert",
    "failed_gate_path",
    "format_comparison",
    "load_data",
    "map50",
    "parse_compiler_log",
    "predict",
    "worst_layers",
    "write_metadata",
    "write_metadata_file",
]
