"""The inspection cell: a detector's frames through a pipeline of stages (parts, rules, metrics, a
release channel's health check, the dashboard: :mod:`edgekit.inspect.stage`), events to the sinks,
hot model updates and the systemd watchdog, opened in order and closed in reverse. What
``edgekit inspect`` runs::

    from edgekit.inspect import Cell, load_config

    with Cell.from_config(load_config("inspection.toml")) as cell:
        for decision in cell.run(max_frames=300):      # one Decision per published verdict
            print(decision.frame, decision.verdict.label if decision.verdict else decision.error)
        print(cell.summary.line())                       # the loop's figures (fps, latency, drops)

Every decision is also an event in the configured sinks (files, MQTT, webhook), numbered
across restarts. :meth:`Cell.stop` (from a signal handler or another thread) ends
:meth:`Cell.run` after the frames already inferred. :meth:`Cell.live` is what the cell publishes
about itself (:class:`~edgekit.inspect.live.LiveState`); the stages read that, never the cell.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

from edgekit.errors import EdgekitError
from edgekit.inspect.config import InspectionConfig
from edgekit.inspect.engine import CellDetector, ResultStream
from edgekit.inspect.events import EventEmitter, EventKind, EventSink, SequenceCounter
from edgekit.inspect.inspector import Decision
from edgekit.inspect.live import LiveState, ModelState, RejectState, Tallies, sink_state
from edgekit.inspect.metrics import CellMetrics
from edgekit.inspect.stage import JudgedFrame, ModelFollower, Stage, StageContext, follower_opener
from edgekit.inspect.stages import config_stages
from edgekit.inspect.systemd import Watchdog
from edgekit.inspect.verdict import Verdict

if TYPE_CHECKING:  # OpenCV and the loop load when a cell opens, not when edgekit.inspect is imported
    from edgekit.inspect.parts.options import PartVerdict
    from edgekit.loop import LoopSummary
    from edgekit.tasks import DetectorOptions
    from edgekit.sources import SourceSpec, VideoSource

__all__ = ["Cell", "CellNotOpen", "source_spec", "config_sinks"]

S = TypeVar("S")


class CellNotOpen(EdgekitError, RuntimeError):
    """:meth:`Cell.run` was called on a cell that is not open (use it in a ``with`` block)."""


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
        stages: more stages (:class:`~edgekit.inspect.stage.Stage`), run after the config's on
            every frame; the cell opens and closes them.

    Raises (when opened):
        ConfigError: a rule names a label the model lacks; the state folder, a sink or the
            metrics port cannot be set up.
        ModelError: no model is configured, or it cannot serve (missing, corrupt, not a detector).
    """

    def __init__(self, config: InspectionConfig, *, model_dir: str | None = None,
                 detector: CellDetector | None = None, source: VideoSource | SourceSpec | None = None,
                 sinks: Sequence[EventSink] = (), stages: Sequence[Stage] = (),
                 isolate: bool | None = None) -> None:
        self.config = config
        self.isolate = isolate  # try a fixed model file in a child process first (load_model(isolate=))
        self.model_dir = model_dir or config.model.dir
        self.watchdog = Watchdog()
        self.metrics: CellMetrics | None = None
        self.fleet: ModelFollower | None = None  # [model] channel: the release channel's follower (edgekit.fleet)
        self.stages: list[Stage] = []  # what each frame runs through, in order (opened with the cell)
        self._given_detector = detector
        self._given_source = source
        self._extra_sinks = list(sinks)
        self._extra_stages = list(stages)
        self._serving: CellDetector | None = None  # the detector, once opened
        self._captured = self._processed = self._errors = 0
        self._frame_tally = {v: 0 for v in Verdict}
        self._part_tally = {v: 0 for v in Verdict}
        self._rejects: list[Callable[[], RejectState | None]] = []
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
                self.fleet = opener(self._context(), self.model_dir, self.isolate)
                stack.callback(self.fleet.close)
            self.detector = stack.enter_context(contextlib.closing(self._hot_swap(self._options(), self.model_dir)))
        elif cfg.model.path:
            self.detector = stack.enter_context(contextlib.closing(self._fixed(self._options())))
        else:
            raise ModelError("no model: set [model] path or dir in the config, or pass --model-dir")
        self._serving = self.detector
        if not self.model_dir:
            # A fixed file has no version folder: name it by its content, so events still tell
            # which model judged them and a replaced file shows up as a new version.
            path = Path(self.detector.model.path)
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
            self.events.model_version = f"{path.stem}@{digest}"
        labels = self.detector.labels
        context = self._context(list(labels) if labels else None)
        stack.callback(self._close_stages)
        for stage in [*config_stages(cfg, metrics=self.metrics is not None, follower=self.fleet),
                      *self._extra_stages]:
            self.stages.append(stage)  # first: a stage whose open fails half-way is closed too
            if stage is not self.fleet:  # opened above, before the model folder
                stage.open(context)

    def _close_stages(self) -> None:
        """Close the stages, newest first (the follower apart: it outlives the model folder it feeds)."""
        stages, self.stages = self.stages, []
        for stage in reversed(stages):
            if stage is not self.fleet:
                stage.close()

    def _context(self, labels: list[str] | None = None) -> StageContext:
        return StageContext(self.config, self.events, self.live, metrics=self.metrics, labels=labels,
                            checking=self._checking, report_rejects=self._rejects.append)

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
        checked_frame = False
        try:
            with contextlib.closing(stream):
                self.watchdog.ready(f"inspecting {self.config.source.target}")
                for result in stream:
                    self.watchdog.ping()
                    if not checked_frame and result.frame is not None:
                        h, w = result.frame.shape[:2]
                        self.config.check_frame(w, h)
                        checked_frame = True
                    frame = JudgedFrame(result)
                    for stage in self.stages:
                        stage.process(frame)
                    self._tally(frame)
                    yield from frame.parts  # all of the frame's published before any is yielded
                    yield from frame.published
        finally:
            self._summary = stream.summary

    def _tally(self, frame: JudgedFrame) -> None:
        self._processed += 1
        self._captured = frame.result.index + 1  # frame indices count every frame the source produced
        for decision in frame.published:
            if decision.verdict is None:
                self._errors += 1
            else:
                self._frame_tally[decision.verdict.verdict] += 1
        for part in frame.parts:
            self._part_tally[part.outcome] += 1

    @property
    def published(self) -> int:
        """Per-frame decisions published as events so far."""
        return sum(self._frame_tally.values()) + self._errors

    def live(self) -> LiveState:
        """What the cell publishes about itself now (any thread; a few counters and a look at
        each sink's queue). Stages read this, not the cell's attributes."""
        model = None
        if self._serving is not None:
            m = self._serving.model
            model = ModelState(self.events.model_version, Path(m.path).name,
                               getattr(m.backend, "name", str(m.backend)))
        rejects = next((r for r in (source() for source in self._rejects) if r is not None), None)
        return LiveState(device=self.config.device, model=model, captured=self._captured,
                         processed=self._processed,
                         tallies=Tallies(dict(self._frame_tally), self._errors, dict(self._part_tally)),
                         sinks=tuple(sink_state(s) for s in self.events.sinks), sink_errors=self.events.sink_errors,
                         rejects=rejects)

    def stage(self, kind: type[S]) -> S | None:
        """The cell's open stage of type ``kind`` (None: it runs none), e.g. ``cell.stage(PartsStage)``."""
        return next((s for s in self.stages if isinstance(s, kind)), None)

    @property
    def summary(self) -> LoopSummary | None:
        """The loop's figures of the last :meth:`run` (None before one)."""
        return self._summary if self._stream is None or self._summary is not None else self._stream.summary

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
            self._close_stages()  # rejects still due go out (and are reported) before "stopped"
            if not self._checking:
                self.events.emit(EventKind.STATUS, {"state": "stopped", "decisions": self.published,
                                                    "error": str(error) if error else None})
        finally:
            self._serving = None
            self._rejects.clear()
            self._stack.close()

    def __exit__(self, *exc: object) -> None:
        self.close(exc[1] if isinstance(exc[1], BaseException) else None)
