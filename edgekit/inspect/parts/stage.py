"""Per-part mode inside a cell: tracking, verdicts, events, counters, crops and rejects, per frame.

The :class:`PartsStage` takes each FrameResult from the cell's loop and returns the verdicts of
the parts that crossed the line in it. Every verdict becomes a ``part`` event (through the cell's
sinks, numbered on disk like every event), a count in ``edgekit_parts_total{verdict,reason}``,
a best-frame JPEG under ``<state_dir>/crops`` (when ``crops = true``) and, for a FAIL, a reject
for the PLC after its delay. The PLC's answers come back as ``reject`` events and
``edgekit_rejects_total{result}``; an unreachable PLC is retried on the rejector's thread and
never holds up the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from edgekit.inspect.encoder import GpioEncoder
from edgekit.inspect.events import EventKind, SequenceCounter
from edgekit.inspect.parts.inspector import PartInspector, PartsFrame, PartVerdict
from edgekit.inspect.parts.config import PartsConfig
from edgekit.inspect.plc import GpioOutput, ModbusOutput, RejectOutput, Rejector, RejectReport, ReportKind
from edgekit.inspect.verdict import Verdict

from edgekit.inspect.live import RejectState
from edgekit.inspect.stage import JudgedFrame, StageContext

if TYPE_CHECKING:
    from edgekit.inspect.metrics import CellMetrics
    from edgekit.results import FrameResult

__all__ = ["PartsStage"]


class _PartMetrics:
    """The per-part series, registered on the cell's Prometheus registry."""

    def __init__(self, metrics: CellMetrics, parts: PartsConfig) -> None:
        from prometheus_client import Counter, Histogram

        kw: dict[str, Any] = {"namespace": "edgekit", "registry": metrics.registry}
        self.parts = Counter("parts", "Parts judged at the line, by verdict and reason", ["verdict", "reason"], **kw)
        self.rejects = Counter("rejects", "Reject signals: written, retry, failed, dropped", ["result"], **kw)
        self.latency = Histogram("reject_latency_seconds", "From the crossing frame's capture to the reject write",
                                 buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), **kw)
        self.parts.labels(Verdict.PASS.value, "none")
        for kind in ReportKind:
            self.rejects.labels(kind.value)


class PartsStage:
    """Per-part verdicts for a cell: a :class:`~edgekit.inspect.stage.Stage` (see the module docstring).

    Args:
        parts: the config's per-part settings.
        outputs: reject outputs to use instead of the config's (tests, embedding apps).

    When opened it takes from the cell's context the events (``part`` and ``reject`` events go
    through them), the metrics (or None) and the state folder (the part numbering ``parts.json``
    and the crops).

    Raises (when opened):
        ConfigError: a part or defect class the model lacks.
        PlcError: the PLC cannot be reached or refuses the address (``check_at_start``).
    """

    def __init__(self, parts: PartsConfig, *, outputs: list[RejectOutput] | None = None) -> None:
        self.config = parts
        self.last: PartsFrame | None = None  # the newest frame's tracked parts (the dashboard draws them)
        self.rejector: Rejector | None = None
        self.numbers: SequenceCounter | None = None
        self._outputs = outputs
        self._checked_frame = False

    def open(self, context: StageContext) -> None:
        self.config.check_labels(context.labels)
        self.events, self.state_dir = context.events, context.state_dir
        self.numbers = SequenceCounter(self.state_dir / "parts.json")
        self.inspector = PartInspector(self.config.options, self.config.line, numbering=self.numbers.next)
        self.metrics = _PartMetrics(context.metrics, self.config) if context.metrics is not None else None
        context.report_rejects(self.rejects)
        try:
            self._open_rejector()
        except BaseException:
            self.close()
            raise

    def _open_rejector(self) -> None:
        plc = self.config.plc
        outputs, encoder = self._outputs, None
        made: list[Any] = []  # what this stage opens, closed again when a later one fails
        try:
            if outputs is None and plc is not None:
                if plc.modbus is not None:
                    made.append(ModbusOutput(plc.modbus))
                if plc.gpio_pin is not None:
                    made.append(GpioOutput(plc.gpio_pin, pulse=plc.gpio_pulse))
                outputs = list(made)
            if outputs and plc is not None and plc.delay_ticks is not None:
                encoder = GpioEncoder(plc.encoder_pin, edge=plc.encoder_edge)  # type: ignore[arg-type]
                made.append(encoder)
            if outputs:
                kw: dict[str, Any] = {} if plc is None else {
                    "delay": plc.delay, "retry_interval": plc.retry_interval, "give_up_after": plc.give_up_after,
                    "check": plc.check_at_start}
                if encoder is not None:
                    kw.update(encoder=encoder, delay_ticks=plc.delay_ticks)  # type: ignore[union-attr]
                self.rejector = Rejector(outputs, on_report=self._on_report, **kw)
        except BaseException:
            for device in made:
                device.close()
            raise
        if self.rejector is not None:
            try:
                self.rejector.start()
            except BaseException:
                self.rejector.close(timeout=1.0)
                self.rejector = None
                raise

    def rejects(self) -> RejectState | None:
        """The reject signals as the cell's live state shows them (None: no PLC outputs)."""
        r = self.rejector
        if r is None:
            return None
        lat = sorted(r.latencies_ms)
        return RejectState(outputs=tuple(out.name for out in r.outputs), counts=dict(r.counts), queued=r.queued,
                           delay_s=r.delay, latency_ms_p50=round(lat[len(lat) // 2], 2) if lat else None,
                           last=r.last)

    def process(self, frame: JudgedFrame) -> None:
        """Run one frame through the parts logic; the verdicts made in it (already published) join
        the frame's, its tracked parts become the frame's ``tracked``.

        Raises:
            ConfigError: the line lies outside the first frame.
        """
        frame.parts.extend(self.judge(frame.result))
        frame.tracked = self.last

    def judge(self, result: FrameResult) -> list[PartVerdict]:
        """One frame's part verdicts (each published as it is made)."""
        image = result.frame_bgr
        if not self._checked_frame and image is not None:
            self.config.check_frame(image.shape[1], image.shape[0])
            self._checked_frame = True
        frame = self.inspector.update(result.detections, frame=result.index, timestamp=result.timestamp,
                                      captured_at=result.capture_ts, image_bgr=image)
        self.last = frame
        for verdict in frame.verdicts:
            self._publish(verdict)
        return list(frame.verdicts)

    def _publish(self, verdict: PartVerdict) -> None:
        payload = verdict.to_dict()
        if verdict.crop_jpeg is not None:
            payload["crop"] = self._save_crop(verdict)
        if not verdict.passed and self.rejector is not None:
            self.rejector.reject(verdict.sequence, verdict.track_id, verdict.captured_at)
            payload["reject"] = "queued"
        if self.metrics is not None:
            self.metrics.parts.labels(verdict.outcome.value, verdict.reason).inc()
        self.events.emit(EventKind.PART, payload)

    def _save_crop(self, verdict: PartVerdict) -> str | None:
        folder = self.state_dir / "crops"
        path = folder / f"part-{verdict.sequence:08d}-{verdict.outcome.value.lower()}.jpg"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(verdict.crop_jpeg or b"")
        except OSError as exc:  # a full disk loses the picture, not the verdict
            self.events.emit(EventKind.STATUS, {"state": "error", "component": "crops", "error": str(exc)})
            return None
        return str(path)

    def _on_report(self, report: RejectReport) -> None:
        """On the rejector's thread: every attempt and outcome becomes an event and a count."""
        if self.metrics is not None:
            self.metrics.rejects.labels(report.kind.value).inc()
            if report.latency_ms is not None:
                self.metrics.latency.observe(report.latency_ms / 1e3)
        self.events.emit(EventKind.REJECT, report.to_dict())

    def close(self) -> None:
        """Send the rejects still due, stop the rejector, record the part numbering. Safe twice."""
        if self.rejector is not None:
            self.rejector.close()
            self.rejector = None
        if self.numbers is not None:
            self.numbers.close()
            self.numbers = None
