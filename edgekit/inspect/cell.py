"""The inspection cell: detector, zones and rules, events to the sinks, metrics, hot model updates
and the systemd watchdog, opened in order and closed in reverse. What ``edgekit inspect`` runs::

    from edgekit.inspect import Cell, load_config

    with Cell.from_config(load_config("inspection.toml")) as cell:
        for decision in cell.run(max_frames=300):      # one Decision per published verdict
            print(decision.frame, decision.verdict.label if decision.verdict else decision.error)
        print(cell.summary.line())                       # the loop's figures (fps, latency, drops)

Every decision is also an event in the configured sinks (files, MQTT, webhook), numbered
across restarts. :meth:`Cell.stop` (from a signal handler or another thread) ends
:meth:`Cell.run` after the frames already inferred.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from edgekit.errors import EdgekitError
from edgekit.inspect.config import InspectionConfig
from edgekit.inspect.engine import CellDetector, ResultStream
from edgekit.inspect.events import EventEmitter, EventKind, EventSink, SequenceCounter
from edgekit.inspect.inspector import Decision, Inspector
from edgekit.inspect.metrics import CellMetrics
from edgekit.inspect.stage import JudgedFrame, ModelFollower, Stage, follower_opener
from edgekit.inspect.systemd import Watchdog
from edgekit.inspect.triggers import TriggerMode
from edgekit.results import Detections, Segmentation

if TYPE_CHECKING:  # OpenCV and the loop load when a cell opens, not when edgekit.inspect is imported
    from edgekit.inspect.dashboard import Dashboard
    from edgekit.inspect.parts import PartVerdict
    from edgekit.inspect.parts.stage import PartsStage
    from edgekit.loop import LoopSummary
    from edgekit.results import FrameResult
    from edgekit.tasks import DetectorOptions
    from edgekit.sources import SourceSpec, VideoSource

__all__ = ["Cell", "CellNotOpen", "source_spec", "config_sinks"]


class CellNotOpen(EdgekitError, RuntimeError):
    """:meth:`Cell.run` was called on a cell that is not open (use it in a ``with`` block)."""


def _judged(result: FrameResult) -> tuple[Detections, list[int] | None]:
    """What the rules judge in a frame: a detector's boxes (areas: their own), or a segmenter's
    regions as boxes with the pixels they cover as areas (rules' min_area)."""
    if isinstance(result.result, Segmentation):
        return result.result.as_detections(), [r.area for r in result.result.regions]
    return result.detections, None


def source_spec(config: InspectionConfig) -> SourceSpec:
    """The video source the config's ``[source]`` describes.

    Raises:
        SourceError: the source is malformed (a bad URL, say).
    """
    from edgekit.sources import SourceKind, SourceSpec, parse_source

    s = config.source
    kw: dict[str, Any] = dict(width=s.width, height=s.height, fps=s.fps, realtime=s.realtime)
    if s.picamera:
        return SourceSpec(SourceKind.PICAMERA, "picamera2", **kw)
    if s.camera is not None:
        return SourceSpec(SourceKind.CAMERA, s.camera, **kw)
    return parse_source(s.target, **kw)


def config_sinks(config: InspectionConfig) -> list[EventSink]:
    """The event sinks of the config's ``[sinks.*]`` tables, opened (closed again on an error).

    Raises:
        ConfigError: a sink cannot be set up (a folder that cannot be written, a bad broker address).
    """
    from edgekit.sinks.mqtt import MqttSink
    from edgekit.sinks.rotating import RotatingJsonlSink
    from edgekit.sinks.webhook import WebhookSink

    s = config.sinks
    out: list[EventSink] = []
    try:
        if s.jsonl is not None:
            out.append(RotatingJsonlSink(s.jsonl))
        if s.mqtt is not None:
            out.append(MqttSink(s.mqtt))
        if s.webhook is not None:
            out.append(WebhookSink(s.webhook))
    except BaseException:
        for sink in out:
            sink.close()
        raise
    return out


class Cell:
    """Everything one inspection cell runs. A context manager: ``with`` opens it, leaving closes it.

    Args:
        config: the cell's config (:func:`edgekit.inspect.load_config`).
        model_dir: serve this versioned model folder (hot updates) instead of the config's model.
        detector: run on this engine instead of opening the config's model (the caller keeps
            it and closes it); any :class:`~edgekit.inspect.engine.CellDetector`.
        source: read frames from here instead of the config's ``[source]``.
        sinks: more event sinks, beside the config's; the cell closes them.

    Raises (when opened):
        ConfigError: a rule names a label the model lacks; the state folder, a sink or the
            metrics port cannot be set up.
        ModelError: no model is configured, or it cannot serve (missing, corrupt, not a detector).
    """

    def __init__(self, config: InspectionConfig, *, model_dir: str | None = None,
                 detector: CellDetector | None = None, source: VideoSource | SourceSpec | None = None,
                 sinks: Sequence[EventSink] = (), isolate: bool | None = None) -> None:
        self.config = config
        self.isolate = isolate  # try a fixed model file in a child process first (load_model(isolate=))
        self.model_dir = model_dir or config.model.dir
        self.watchdog = Watchdog()
        self.metrics: CellMetrics | None = None
        self.parts: PartsStage | None = None  # per-part mode (opened with the cell)
        self.dashboard: Dashboard | None = None  # the operator's page ([dashboard])
        self.fleet: ModelFollower | None = None  # [model] channel: the release channel's follower (edgekit.fleet)
        self.stages: list[Stage] = []  # what watches each judged frame: the follower, the dashboard
        self.published = 0  # decisions published as events so far
        self._given_detector = detector
        self._given_source = source
        self._extra_sinks = list(sinks)
        self._stack = contextlib.ExitStack()
        self._stream: ResultStream | None = None
        self._summary: LoopSummary | None = None
        self._opened = False
        self._checking = False  # opened by check(): no events published, no model fetched

    @classmethod
    def from_config(cls, config: InspectionConfig, *, model_dir: str | None = None,
                    isolate: bool | None = None) -> Cell:
        """The cell the config describes (its model, source and sinks). Open it with ``with``."""
        return cls(config, model_dir=model_dir, isolate=isolate)

    # --- opening ------------------------------------------------------------------------
    def check(self, timeout: float = 10.0) -> tuple[int, int]:
        """What ``edgekit inspect --check`` runs: the run's own opening (:meth:`open`: state folder,
        sinks, metrics port, model version, labels, triggers, PLC, dashboard port) and its first
        frame (the source opened and read once, the zones checked against its real size), then
        everything is closed again (ports released). Nothing is published and no model is fetched.

        Returns:
            The (width, height) of the source's first frame.

        Raises:
            What the run raises at start, with the same sentence.
        """
        self._checking = True
        try:
            self.open()
            return self._first_frame(timeout)
        finally:
            self.close()
            self._checking = False

    def _first_frame(self, timeout: float) -> tuple[int, int]:
        from edgekit.errors import SourceError
        from edgekit.sources import VideoSource

        given = self._given_source
        source = given if isinstance(given, VideoSource) else VideoSource(given or source_spec(self.config))
        try:
            frame = source.get(timeout=timeout)
        finally:
            if source is not given:
                source.close()
        if frame is None:
            raise SourceError(f"source {self.config.source.target} gave no frame within {timeout:g} s")
        h, w = frame.image.shape[:2]
        self.config.check_frame(w, h)
        return w, h

    def __enter__(self) -> Cell:
        return self.open()

    def open(self) -> Cell:
        """Open the events, sinks, metrics, detector and triggers (what ``with`` does)."""
        if self._opened:
            return self
        try:
            self._open()
        except BaseException:
            self._stack.close()
            raise
        self._opened = True
        return self

    def _open(self) -> None:
        from edgekit.errors import ModelError

        cfg, stack = self.config, self._stack
        state = Path(cfg.state_dir)
        state.mkdir(parents=True, exist_ok=True)
        # background: the loop's output stage hands events over and never waits on a disk or network
        counter = SequenceCounter(None if self._checking else state / "sequence.json")  # a check numbers nothing
        self.events = stack.enter_context(EventEmitter(cfg.device, counter, background=True))
        for sink in [*config_sinks(cfg), *self._extra_sinks]:
            self.events.add_sink(sink)
        if cfg.metrics.enabled:
            self.metrics = stack.enter_context(CellMetrics(device=cfg.device))
            self.metrics.serve(cfg.metrics.port, cfg.metrics.host)
        skipped = self.events.counter.may_have_skipped
        if not self._checking:
            self.events.emit(EventKind.STATUS, {"state": "starting", "config": cfg.path, "may_have_skipped": skipped})
        if self._given_detector is not None:
            self.detector: CellDetector = self._given_detector
        elif self.model_dir:
            if cfg.fleet is not None and not self._checking:  # first the channel's verified version into the folder
                opener = follower_opener("fleet", f"{cfg.path}: [model] channel")
                self.fleet = opener(cfg, self.model_dir, self.events, stack, self.isolate)
                self.stages.append(self.fleet)
            self.detector = stack.enter_context(contextlib.closing(self._hot_swap(self._options(), self.model_dir)))
        elif cfg.model.path:
            self.detector = stack.enter_context(contextlib.closing(self._fixed(self._options())))
        else:
            raise ModelError("no model: set [model] path or dir in the config, or pass --model-dir")
        if not self.model_dir:
            # A fixed file has no version folder: name it by its content, so events still tell
            # which model judged them and a replaced file shows up as a new version.
            path = Path(self.detector.model.path)
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
            self.events.model_version = f"{path.stem}@{digest}"
        labels = self.detector.labels
        cfg.check_labels(list(labels) if labels else None)  # no labels: the rules would count nothing
        self.inspector = stack.enter_context(Inspector.from_config(cfg))
        self._per_frame = cfg.parts is None or bool(cfg.rules) or cfg.trigger.mode is not TriggerMode.CONTINUOUS
        if cfg.parts is not None:
            from edgekit.inspect.parts.stage import PartsStage

            cfg.parts.check_labels(list(labels) if labels else None)
            self.parts = stack.enter_context(PartsStage(cfg.parts, self.events, self.metrics, cfg.state_dir))
        if cfg.dashboard is not None:
            from edgekit.inspect.dashboard import DashboardStage, cell_dashboard

            self.dashboard = stack.enter_context(cell_dashboard(self, cfg.dashboard))
            self.stages.append(DashboardStage(self.dashboard, self.parts))

    def _options(self) -> DetectorOptions:
        from edgekit.tasks import DetectorOptions

        cfg = self.config
        # The detector keeps what any rule may count; each rule then applies its own threshold.
        lowest = min([cfg.model.threshold, *(r.min_score for r in cfg.rules if r.min_score is not None)])
        if cfg.parts is not None:  # ByteTrack keeps a part's track alive on its weak boxes too
            lowest = min(lowest, cfg.parts.low_threshold)
        return DetectorOptions(model=cfg.model.path or "", labels=cfg.model.labels, delegate=cfg.model.delegate,
                               num_threads=cfg.model.threads, threshold=lowest, isolate=self.isolate)

    def _fixed(self, options: DetectorOptions) -> CellDetector:
        from edgekit.tasks import Detector
        from edgekit.tasks_vision import segmenter_for

        return segmenter_for(options) or Detector(options)  # a segmenter's regions are judged as boxes

    def _hot_swap(self, options: DetectorOptions, model_dir: str) -> CellDetector:
        from edgekit.inspect.hotswap import HotSwapEngine

        def on_model_event(kind: EventKind, payload: dict[str, Any]) -> None:
            if kind is EventKind.MODEL_SWITCH:
                self.events.model_version = payload["to"]
                if self.metrics is not None:
                    self.metrics.set_model(payload["name"], payload["version"], payload["path"],
                                           payload.get("backend", ""), payload.get("delegate", ""))
            if self.metrics is not None:
                self.metrics.model_switches.labels("switched" if kind is EventKind.MODEL_SWITCH else "refused").inc()
            self.events.emit(kind, payload)
            if self.fleet is not None:  # after the switch's own event: a trial starts on the new version
                self.fleet.on_model_event(kind, payload)

        return HotSwapEngine.open(model_dir, options, poll_seconds=self.config.model.poll_seconds,
                                  on_event=on_model_event, vet=self.fleet.vet if self.fleet is not None else None)

    # --- running ------------------------------------------------------------------------
    def _open_stream(self, max_frames: int | None, duration: float | None) -> ResultStream:
        from edgekit.sources import VideoSource

        given = self._given_source
        source = given if isinstance(given, VideoSource) else VideoSource(given or source_spec(self.config))
        self._stack.callback(source.close)
        stream = self.detector.stream(source, max_frames=max_frames, duration=duration)
        if self.metrics is not None and not self.model_dir:
            m = self.detector.model
            name, _, version = (self.events.model_version or "").partition("@")
            self.metrics.set_model(name, version, m.path, m.backend.name, m.delegate.value)
        return stream

    def run(self, max_frames: int | None = None,
            duration: float | None = None) -> Iterator[Decision | PartVerdict]:
        """Process frames until the source ends, a limit is reached or :meth:`stop` is called;
        yields each decision as it is published (an event has been queued for the sinks). In
        per-part mode (a ``[parts]`` table) it yields each part's :class:`PartVerdict`, and
        per-frame decisions only when rules or triggers ask for them.

        Iterate it to run the cell; :attr:`summary` holds the loop's figures afterwards.

        Raises (while iterating):
            SourceError: the source fails for good. ModelError: inference fails.
            ConfigError: a zone lies outside the frames the source delivers.
            CellNotOpen: the cell is not open.
        """
        if not self._opened:
            raise CellNotOpen("open the cell first: `with Cell.from_config(config) as cell: ...`")
        self._stream = stream = self._open_stream(max_frames, duration)
        processed, checked_frame, last_queue = 0, False, 0.0
        try:
            with contextlib.closing(stream):
                self.watchdog.ready(f"inspecting {self.config.source.target}")
                for result in stream:
                    self.watchdog.ping()
                    processed += 1
                    if not checked_frame and result.frame is not None:
                        h, w = result.frame.shape[:2]
                        self.config.check_frame(w, h)
                        checked_frame = True
                    parts: list[PartVerdict] = []
                    if self.parts is not None:
                        parts = self.parts.process(result)  # all of the frame's published before any is yielded
                        yield from parts
                    decisions = self._decisions(result) if self._per_frame else []
                    for decision in decisions:
                        if self._publish(decision):
                            yield decision
                    self._observe(result, processed)
                    if self.stages:  # the follower's health check of a version on trial; the dashboard
                        outcome = JudgedFrame(result, decisions, parts)
                        for stage in self.stages:
                            stage.on_frame(outcome)
                    if time.monotonic() - last_queue > 1.0:
                        self._queue_gauges()
                        last_queue = time.monotonic()
        finally:
            self._summary = stream.summary

    @property
    def summary(self) -> LoopSummary | None:
        """The loop's figures of the last :meth:`run` (None before one)."""
        return self._summary if self._stream is None or self._summary is not None else self._stream.summary

    def _decisions(self, result: FrameResult) -> list[Decision]:
        d, areas = _judged(result)
        return self.inspector.process(d.xyxy, d.labels, d.scores, areas=areas, frame=result.index,
                                      captured_at=result.capture_ts)

    def _publish(self, decision: Decision) -> bool:
        if self.metrics is not None and decision.verdict is not None:
            self.metrics.observe_verdict(decision.verdict.passed)
        if decision.publish:
            self.published += 1
            self.events.emit(EventKind.INSPECTION, decision.to_payload())
        return decision.publish

    def _observe(self, result: FrameResult, processed: int) -> None:
        if self.metrics is None:
            return
        captured = result.index + 1  # frame indices count every frame the source produced
        self.metrics.frame_counts(captured=captured, processed=processed, dropped=max(0, captured - processed))
        self.metrics.observe_inference(result.stages.inference / 1e3)
        self.metrics.observe_capture_to_result(result.latency_ms / 1e3)

    def _queue_gauges(self) -> None:
        if self.metrics is None:
            return
        for sink in self.events.sinks:
            queue = getattr(sink, "queue", None)
            if queue is not None:
                self.metrics.set_queued(type(sink).__name__.replace("Sink", "").lower(), len(queue))
        if self.events.last_error:
            self.metrics.record_error("sinks", self.events.last_error)
            self.events.last_error = None

    # --- stopping -----------------------------------------------------------------------
    def stop(self, reason: str) -> None:
        """End :meth:`run` soon (safe from a signal handler or another thread)."""
        if self._stream is not None:
            self._stream.stop(reason)

    def close(self, error: BaseException | None = None) -> None:
        """Publish the "stopped" status and close everything, newest first (safe twice)."""
        if not self._opened:
            return
        self._opened = False
        self.watchdog.stopping()
        try:
            if self.parts is not None:  # rejects still due go out (and are reported) before "stopped"
                self.parts.close()
            if not self._checking:
                self.events.emit(EventKind.STATUS, {"state": "stopped", "decisions": self.published,
                                                    "error": str(error) if error else None})
        finally:
            self._stack.close()

    def __exit__(self, *exc: object) -> None:
        self.close(exc[1] if isinstance(exc[1], BaseException) else None)
