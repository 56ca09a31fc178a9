"""convert(): data, audit, conversion, accuracy check, gate, diagnosis, fallback, metadata, report.

Each step is a module of its own; this one only orders them and carries the values
between them (never file names one step writes and another guesses).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from edgekit.contract.metadata import DetectionMetadata, ModelMetadata, QuantizationMetadata
from edgekit.converters._native import capture_native_output
from edgekit.converters.audit import AuditFinding, AuditReport, audit_calibration
from edgekit.converters.engines.aiq import default_engine
from edgekit.converters.engines.base import LayerDiagnosis, QuantizerEngine
from edgekit.converters.data import DataSplit, load_data
from edgekit.converters.debug import FallbackOutcome, Trial, auto_fallback
from edgekit.converters.decode_tail import tail_groups
from edgekit.converters.edgetpu import compile_for_edgetpu
from edgekit.converters.evaluate import (
    Metrics,
    ModelOutputs,
    chance_warning,
    few_objects_warning,
    compare,
    detection_metadata,
    infer_output_format,
    label_summary,
    measure_latency,
    predict,
    task_of,
)
from edgekit.converters.gate import GateResult, check_gate
from edgekit.converters.metadata_writer import write_bytes_atomic, write_metadata
from edgekit.converters.options import ConvertOptions, Mode, OutputFormat, Task
from edgekit.converters.preprocessing import Preprocessing, resolve_preprocessing
from edgekit.converters.reference import head_finding, merged, reference_outputs, split_roles, truth_map50
from edgekit.converters.result import ConversionResult, failed_gate_path
from edgekit.converters.sources import load_source
from edgekit.converters.sources.base import SourceModel
from edgekit.errors import ConversionError, InputError, ModelError

__all__ = ["convert", "read_labels", "Session", "Prepared", "Measured"]

DEBUG_SAMPLES = 64  # the debugger runs a slow instrumented model; this many samples rank layers well


def read_labels(labels: Sequence[str] | str | os.PathLike[str] | None) -> tuple[str, ...] | None:
    """Labels from a list, or a labels file (one per line, or "id label"; see edgekit.labels).

    Raises:
        InputError: the file is missing, unreadable or empty.
    """
    if labels is None:
        return None
    if isinstance(labels, (str, os.PathLike)):
        from edgekit.labels import load_labels

        return tuple(load_labels(labels))
    return tuple(str(x) for x in labels)


def convert(model: Any, output: str | os.PathLike[str], *, calibration: Any = None, validation: Any = None,
            options: ConvertOptions | None = None, engine: QuantizerEngine | None = None,
            **overrides: Any) -> ConversionResult:
    """Convert a Keras/SavedModel model to .tflite, check it against the float model, write it.

    Args:
        model: a .keras/.h5 path, a SavedModel folder, an .onnx file, a float .tflite or a keras.Model.
        output: the .tflite to write (``OUT.FAILED-GATE.tflite`` instead when the gate fails).
        calibration, validation: an image folder, .npy/.npz, array, (x, y) arrays,
            tf.data.Dataset or iterable. Without validation a held-out part of calibration is used.
        options: a ConvertOptions; keyword `overrides` replace its fields (``mode="uint8"``).
        engine: the quantizer (default: TFLiteConverter's post-training quantization).

    Returns:
        A ConversionResult; ``raise_for_status()`` turns a failed gate into an exception.

    Raises:
        InputError: bad model path, data or options.
        ConversionError: the converter failed, or the mode needs calibration data that is missing.
    """
    opts = dataclasses.replace(options or ConvertOptions(), **overrides)
    with capture_native_output(enabled=not opts.verbose, show_progress=opts.progress), \
            load_source(model, opts.preprocessing.input_size, layout=opts.layout, split_head=opts.split_head,
                        verbose=opts.verbose) as src, Session(src, opts, engine) as session:
        return session.convert(Path(output), session.prepare(calibration, validation))


@dataclass
class Prepared:
    """What every mode shares: data, audit, the float model, its outputs and latency."""

    pre: Preprocessing | None
    data: DataSplit
    labels: tuple[str, ...] | None
    audit: AuditReport
    float_bytes: bytes
    output_format: OutputFormat | None
    task: Task | None
    reference: ModelOutputs | None
    float_path: Path
    warnings: list[str] = field(default_factory=list)
    roles: tuple[str, ...] | None = None  # a split YOLO head: "boxes"/"scores" in output order
    float_map50_truth: float | None = None  # the float model against labelled objects

    def first_input(self, shape: tuple[int, ...]) -> np.ndarray:
        val = self.data.validation
        return val.x[:1] if val is not None else np.zeros(shape, np.float32)


@dataclass(frozen=True)
class Measured:
    metrics: Metrics
    gate: GateResult
    # a fallback candidate: the all-int8 model's latency, timed in the same interleaved blocks
    int8_latency_ms: float | None = None


class Session:
    """One source model's conversions, with a temporary folder for the float model and candidates."""

    def __init__(self, src: SourceModel, opts: ConvertOptions, engine: QuantizerEngine | None = None) -> None:
        self.src, self.opts = src, opts
        self.engine: QuantizerEngine = engine or default_engine(src, opts)
        self._tmp = tempfile.TemporaryDirectory(prefix="edgekit-convert-")
        self.tmp = Path(self._tmp.name)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the temporary folder. Safe to call twice."""
        self._tmp.cleanup()

    def prepare(self, calibration: Any, validation: Any) -> Prepared:
        """Load data, audit it, convert the float reference and run it on the validation samples."""
        o = self.opts
        pre, warnings = resolve_preprocessing(self.src, o.preprocessing)
        labels = read_labels(o.labels)
        data = load_data(calibration, validation, input_shape=self.src.input_shape, input_dtype=self.src.input_dtype,
                         pre=pre, num_calibration=o.num_calibration, num_validation=o.num_validation,
                         seed=o.seed, holdout=o.holdout, labels=labels)
        labels = labels or self.src.labels or data.class_names
        audit = audit_calibration(data.calibration, data.validation, labels)
        some = data.calibration or data.validation  # ONNX: onnx2tf's sample images are made from these
        self.src.build(some.x if some is not None else None, pre.mean if pre else (0.0,),
                       pre.std if pre else (255.0,))
        data = self.src.to_model_layout(data)
        float_bytes = self.engine.convert(self.src, Mode.FLOAT32, None)
        float_path = self._write("float32.tflite", float_bytes)
        fmt = (o.output_format or OutputFormat.YOLO) if self.src.head_split is not None \
            else infer_output_format(float_bytes, o.task, o.output_format)
        warnings += list(data.notes) + audit.warnings
        reference = None
        roles = truth_map = None
        if data.validation is None:
            warnings.append("no calibration or validation data: the accuracy was not measured")
        else:
            reference = predict(float_path, data.validation.x, "float model") if self.src.reference is None \
                else reference_outputs(self.src.reference, data.validation.x)
            if self.src.head_split is not None:
                roles = split_roles(self.src, float_path, data.validation.x[:1])
            else:
                roles = self.src.output_roles  # a head split before: the file names its outputs
            if fmt in (OutputFormat.YOLO, OutputFormat.SSD):
                truth_map = truth_map50(reference, fmt, reference, data.validation, self._stated(roles))
            if fmt is OutputFormat.YOLO and (finding := head_finding(reference, self.src, o.split_head,
                                                                     data.validation, fmt)):
                audit = dataclasses.replace(audit, findings=(*audit.findings, AuditFinding("shared-scale", finding)))
                warnings.append(finding)
            if fmt is OutputFormat.CLASSES:
                classes = int(np.prod(reference.arrays[0].shape[1:]))
                warnings += [w for w in (label_summary(labels, classes),
                                         chance_warning(reference, data.validation.y, classes)) if w]
        return Prepared(pre, data, labels, audit, float_bytes, fmt, task_of(fmt, o.task), reference, float_path,
                        warnings, roles, truth_map)

    def _stated(self, roles: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The roles to decode the reference and candidates with: a head split here is merged back
        into one output first (None), one split before is decoded as its two outputs."""
        return roles if self.src.head_split is None else None

    def _write(self, name: str, data: bytes) -> Path:
        path = self.tmp / name
        path.write_bytes(data)
        return path

    def quantize(self, p: Prepared, mode: Mode) -> bytes:
        """The model in `mode` (edgetpu: the uint8 model the compiler takes).

        Raises:
            InputError: the mode needs calibration data and there is none.
        """
        if mode is Mode.FLOAT32:
            return p.float_bytes
        cal = p.data.calibration
        if mode.needs_calibration and cal is None:
            raise InputError(f"mode {mode.value!r} calibrates int8 ranges on real inputs: pass --calibration "
                             "(an image folder, .npy or .npz; 300 samples recommended)")
        return self.engine.convert(self.src, mode, cal.representative() if cal is not None else None)

    def measure(self, p: Prepared, model: bytes, mode: Mode, against: Path | None = None) -> Trial:
        """Run `model` on the validation samples with the device's interpreter and gate it
        (`against`: a model timed in the same interleaved blocks, the all-int8 one for a fallback candidate).

        Raises:
            ConversionError: the interpreter cannot load or run the converted model.
        """
        path = self._write(f"{mode.value}{'-candidate' if against else ''}.tflite", model)
        metrics = Metrics(0, ())
        base_ms = None
        try:
            if p.reference is not None and p.data.validation is not None:
                val = p.data.validation
                quant = p.reference if model == p.float_bytes and self.src.reference is None \
                    else predict(path, val.x, f"{mode.value} model")
                if p.roles is not None and self.src.head_split is not None:
                    quant = merged(quant, p.roles, self.src.head_split.axis, p.reference)
                stated = self._stated(p.roles)
                metrics = compare(p.reference, quant, val.y, p.output_format, val.transforms, p.pre, stated)
                if p.float_map50_truth is not None and p.output_format is not None:
                    truth = truth_map50(quant, p.output_format, p.reference, val, stated)
                    metrics = dataclasses.replace(metrics, float_map50_truth=p.float_map50_truth, map50_truth=truth)
            timed = measure_latency([p.float_path, path, *([against] if against else [])],
                                    p.first_input(self.src.model_input_shape))
            float_ms, latency, base_ms = (*timed, None)[:3]
        except ModelError as exc:
            raise ConversionError(f"the {mode.value} model was converted but the interpreter cannot run it "
                                  f"({str(exc).split(': ', 1)[-1]}); try another mode") from None
        metrics = metrics.with_latency(float_ms, latency)
        gate = check_gate(metrics if p.reference is not None else None, self.opts.gate_targets)
        return Trial(gate.passed, gate.drop, latency, Measured(metrics, gate, base_ms))

    def diagnose(self, p: Prepared, mode: Mode) -> LayerDiagnosis | None:
        """Per-layer errors for int8 modes (on up to 64 validation samples), else None."""
        cal, val = p.data.calibration, p.data.validation
        if not (mode.int8_body and self.opts.diagnose and cal is not None):
            return None
        debug = (val if val is not None else cal).head(DEBUG_SAMPLES)
        return self.engine.diagnose(self.src, mode, cal.representative(), debug.representative("per-layer error"))

    def convert(self, output: Path, p: Prepared) -> ConversionResult:
        """Quantize, measure, diagnose, fall back if asked, write the model (and report)."""
        mode = self.opts.mode
        model = self.quantize(p, mode)
        trial = self.measure(p, model, mode)
        diagnosis = self.diagnose(p, mode)
        fallback = None
        if not trial.passed and self.opts.auto_fallback and diagnosis is not None:
            groups = tail_groups(p.float_bytes, p.roles) if p.output_format is OutputFormat.YOLO else []
            base = self.tmp / f"{mode.value}.tflite"  # the all-int8 model measure wrote
            fallback = auto_fallback(diagnosis, lambda m: self.measure(p, m, mode, against=base),
                                     max_layers=self.opts.max_fallback_layers, io_dtype=mode.io_dtype,
                                     groups=groups, baseline=(model, trial))
            if fallback.chosen is not None and fallback.model is not None:
                model, trial = fallback.model, fallback.chosen.trial
        res = self._write_model(output, p, model, trial.detail, diagnosis, fallback)
        if mode is Mode.EDGETPU:
            res = self._edgetpu(res)
        if self.opts.report_dir is not None:
            from edgekit.converters.report import write_report

            res = dataclasses.replace(res, report_paths=write_report(res, self.opts.report_dir))
        return res

    def _write_model(self, output: Path, p: Prepared, model: bytes, measured: Measured,
                     diagnosis: LayerDiagnosis | None, fallback: FallbackOutcome | None) -> ConversionResult:
        """Add the metadata, write OUT (or OUT.FAILED-GATE when the gate failed), say what was done."""
        mode = self.opts.mode
        kept = fallback.chosen.kept_in_float if fallback is not None and fallback.chosen is not None else ()
        doc = self.metadata(p, measured, tuple(x.name for x in kept))
        final = write_metadata(model, doc)
        path = output if measured.gate.passed else failed_gate_path(output)
        write_bytes_atomic(path, final)
        warnings = p.warnings + (list(fallback.notes) if fallback else [])
        if few := few_objects_warning(measured.metrics):
            warnings.append(few)
        if kept and mode is Mode.EDGETPU:
            warnings.append(f"{len(kept)} layer(s) kept in float run on the CPU and split the Edge TPU graph: "
                            "each split costs a round trip over USB")
        if not measured.gate.passed and output.exists():
            warnings.append(f"{str(output)!r} from an earlier run was left as it was; it is NOT this conversion")
        return ConversionResult(
            output=path, mode=mode, size_bytes=len(final), float_size_bytes=len(p.float_bytes),
            metrics=measured.metrics, gate=measured.gate, warnings=tuple(warnings),
            layers_kept_in_float=tuple(x.name for x in kept),
            layer_errors=tuple(diagnosis.layers) if diagnosis is not None else (), fallback=fallback,
            audit=p.audit, preprocessing=p.pre, task=p.task, output_format=p.output_format, labels=p.labels,
            metadata=doc, source_sha256=self.src.sha256, engine=f"{self.engine.name} ({self.engine.version})")

    def metadata(self, p: Prepared, measured: Measured, kept: tuple[str, ...]) -> dict[str, Any]:
        """The edgekit metadata document (BRIEF's schema, written by the contract's ModelMetadata);
        absent values are left out, and ``extra_metadata``'s keys win."""
        from edgekit import __version__

        m, g = measured.metrics, measured.gate
        detection = detection_metadata(p.output_format, p.reference, p.pre, self._stated(p.roles))
        if detection is not None and p.roles is not None:  # a split head's outputs, named (the device reads them as a pair)
            detection = dataclasses.replace(detection, outputs=tuple(p.roles))
        meta = ModelMetadata(
            task=p.task, output_format=p.output_format, labels=tuple(p.labels or ()),
            detection=detection or DetectionMetadata(), preprocessing=p.pre.to_metadata() if p.pre else {},
            source=self.src.name, source_sha256=self.src.sha256, edgekit_version=__version__,
            quantization=QuantizationMetadata(
                self.opts.mode.value, self.engine.name, self.engine.version,
                len(p.data.calibration) if p.data.calibration else None, self.opts.seed, kept),
            accuracy=_drop_none({
                "validation_samples": m.samples or None, "top1_agreement": m.top1_agreement,
                "float_accuracy": m.float_accuracy, "accuracy": m.accuracy, "map50": m.map50,
                "float_map50_truth": m.float_map50_truth, "map50_truth": m.map50_truth,
                "drop": g.drop, "basis": g.basis if g.drop is not None else None, "max_drop": g.max_drop,
                "gate": g.status}),
            extra=dict(self.opts.extra_metadata or {}))
        return meta.to_document()

    def _edgetpu(self, res: ConversionResult) -> ConversionResult:
        if not res.gate.passed:
            return dataclasses.replace(res, warnings=res.warnings + ("the gate failed: edgetpu_compiler was not run",))
        try:
            compiled = compile_for_edgetpu(res.output)
        except ConversionError as exc:
            return dataclasses.replace(res, edgetpu_error=str(exc))
        report = compiled.report
        doc = ModelMetadata.parse(res.metadata, keep_bad=True).with_values(edgetpu={
            "compiler": report.version, "ops_on_edgetpu": report.ops_on_edgetpu, "ops_on_cpu": report.ops_on_cpu
        }).to_document()
        write_bytes_atomic(compiled.model, write_metadata(compiled.model.read_bytes(), doc))
        return dataclasses.replace(res, edgetpu=compiled)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}
