"""`edgekit inspect --config inspection.toml`: an inspection cell, headless, as a service runs it.

Runs the detection loop on the configured source, applies the zones and rules per frame
(continuous) or per trigger (on-demand), publishes every verdict as an event to the
configured sinks (rotating files, MQTT, webhook), serves Prometheus metrics, takes new
model versions from a model folder without stopping, and talks to systemd (READY=1, watchdog
pings from the loop, STOPPING=1). SIGTERM/SIGINT stop cleanly with every sink flushed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from edgekit.commands._common import native_stderr_filtered, positive_float, positive_int
from edgekit.errors import ConfigError, ModelError
from edgekit.events import EventEmitter, EventKind, SequenceCounter
from edgekit.inspect import Decision, InspectionConfig, Inspector, load_config
from edgekit.loop import LoopOptions, Stream
from edgekit.metrics import Metrics
from edgekit.systemd import Watchdog

__all__ = ["register", "run", "Cell"]

log = logging.getLogger("edgekit")


def register(subparsers: Any) -> None:
    from edgekit.cli import HelpFormatter

    p = subparsers.add_parser(
        "inspect", help="run an inspection cell from a TOML config (rules, events, metrics, hot model updates)",
        description="Detect, apply the config's zones and rules, and publish PASS/FAIL events to files, MQTT "
                    "or a webhook; serve Prometheus metrics; pick up new model versions from the model folder "
                    "while running. Made to run headless under systemd (see examples/raspberrypi).",
        formatter_class=HelpFormatter)
    p.add_argument("-c", "--config", required=True, help="the inspection TOML file")
    p.add_argument("--check", action="store_true", help="validate the config (and the model, if present), then exit")
    p.add_argument("--model-dir", help="serve this versioned model folder instead of the config's model")
    p.add_argument("--max-frames", type=positive_int, help="stop after this many processed frames")
    p.add_argument("--duration", type=positive_float, metavar="SECONDS", help="stop after this long")
    p.add_argument("--json", action="store_true", help="print each published decision as a JSON line")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-decision lines on stdout")
    p.set_defaults(func=run)


def _source(config: InspectionConfig) -> Any:
    from edgekit.video import SourceKind, SourceSpec, parse_source

    s = config.source
    kw = dict(width=s.width, height=s.height, fps=s.fps, realtime=s.realtime)
    if s.picamera:
        return SourceSpec(SourceKind.PICAMERA, "picamera2", **kw)  # type: ignore[arg-type]
    if s.camera is not None:
        return SourceSpec(SourceKind.CAMERA, s.camera, **kw)  # type: ignore[arg-type]
    return parse_source(s.target, **kw)  # type: ignore[arg-type]


def _sinks(config: InspectionConfig) -> list[Any]:
    from edgekit.sinks.mqtt import MqttSink
    from edgekit.sinks.rotating import RotatingJsonlSink
    from edgekit.sinks.webhook import WebhookSink

    s = config.sinks
    out: list[Any] = []
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
    """Everything one inspection cell runs, opened in order and closed in reverse.

    Use it as a context manager; :meth:`run` processes frames until the source ends, a
    limit is reached or :meth:`stop` is called (from a signal handler, say).
    """

    def __init__(self, config: InspectionConfig, model_dir: str | None = None) -> None:
        self.config = config
        self.model_dir = model_dir or config.model.dir
        self.watchdog = Watchdog()
        self._stack = contextlib.ExitStack()
        self._stream: Stream | None = None
        self.metrics: Metrics | None = None
        self.decisions = 0

    def __enter__(self) -> Cell:
        try:
            self._open()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _open(self) -> None:
        from edgekit.tasks import Detector, DetectorOptions

        cfg, stack = self.config, self._stack
        state = Path(cfg.state_dir)
        state.mkdir(parents=True, exist_ok=True)
        # background: the loop's output stage hands events over and never waits on a disk or network
        self.events = stack.enter_context(EventEmitter(cfg.device, SequenceCounter(state / "sequence.json"),
                                                       background=True))
        for sink in _sinks(cfg):
            self.events.add_sink(sink)
        if cfg.metrics.enabled:
            self.metrics = stack.enter_context(Metrics(device=cfg.device))
            self.metrics.serve(cfg.metrics.port, cfg.metrics.host)
        skipped = self.events.counter.may_have_skipped
        self.events.emit(EventKind.STATUS, {"state": "starting", "config": cfg.path, "may_have_skipped": skipped})
        # The detector keeps what any rule may count; each rule then applies its own threshold.
        lowest = min([cfg.model.threshold, *(r.min_score for r in cfg.rules if r.min_score is not None)])
        options = DetectorOptions(model=cfg.model.path or "", labels=cfg.model.labels, delegate=cfg.model.delegate,
                                  num_threads=cfg.model.threads, threshold=lowest)
        with native_stderr_filtered():
            self.engine = self._engine(options) if self.model_dir else stack.enter_context(Detector(options))
        if not self.model_dir:
            # A fixed file has no version folder: name it by its content, so events still tell
            # which model judged them and a replaced file shows up as a new version.
            digest = hashlib.sha256(Path(options.model).read_bytes()).hexdigest()[:12]
            self.events.model_version = f"{Path(options.model).stem}@{digest}"
        labels = self.engine.labels
        if labels:
            cfg.check_labels(list(labels))
        self.inspector = stack.enter_context(Inspector.from_config(cfg))

    def _engine(self, options: Any) -> Any:
        from edgekit.hotswap import HotSwapEngine
        from edgekit.modelwatch import ModelWatcher

        def on_model_event(kind: EventKind, payload: dict[str, Any]) -> None:
            if kind is EventKind.MODEL_SWITCH:
                self.events.model_version = payload["to"]
                if self.metrics is not None:
                    self.metrics.set_model(payload["name"], payload["version"], payload["path"],
                                           payload.get("backend", ""), payload.get("delegate", ""))
            if self.metrics is not None:
                self.metrics.model_switches.labels("switched" if kind is EventKind.MODEL_SWITCH else "refused").inc()
            self.events.emit(kind, payload)

        cfg = self.config.model
        watcher = ModelWatcher(self.model_dir, delegate=cfg.delegate, num_threads=cfg.threads,  # type: ignore[arg-type]
                               poll_seconds=cfg.poll_seconds, on_event=on_model_event)
        self._stack.enter_context(watcher.start())
        return HotSwapEngine(watcher, options)

    def _open_stream(self, max_frames: int | None, duration: float | None) -> Stream:
        from edgekit.video import VideoSource

        source = VideoSource(_source(self.config))
        self._stack.callback(source.close)
        opts = LoopOptions(max_frames=max_frames, duration=duration)
        if self.model_dir:
            stream = Stream(self.engine, source, opts)
        else:
            stream = self.engine.stream(source, max_frames=max_frames, duration=duration)
        if self.metrics is not None and not self.model_dir:
            m = self.engine.model
            name, _, version = (self.events.model_version or "").partition("@")
            self.metrics.set_model(name, version, m.path, m.backend.name, m.delegate.value)
        return stream

    def run(self, max_frames: int | None = None, duration: float | None = None,
            on_decision: Any = None) -> Any:
        """Process frames; returns the loop's summary. ``on_decision(decision)`` sees each published one."""
        self._stream = stream = self._open_stream(max_frames, duration)
        processed, checked_frame, last_queue = 0, False, 0.0
        with stream:
            self.watchdog.ready(f"inspecting {self.config.source.target}")
            for result in stream:
                self.watchdog.ping()
                processed += 1
                if not checked_frame and result.frame is not None:
                    h, w = result.frame.shape[:2]
                    self.config.check_frame(w, h)
                    checked_frame = True
                d = result.detections
                for decision in self.inspector.process(d.xyxy, d.labels, d.scores, frame=result.index,
                                                       captured_at=result.capture_ts):
                    self._publish(decision, on_decision)
                self._observe(result, processed)
                if time.monotonic() - last_queue > 1.0:
                    self._queue_gauges()
                    last_queue = time.monotonic()
        return stream.summary

    def _publish(self, decision: Decision, on_decision: Any) -> None:
        if self.metrics is not None and decision.verdict is not None:
            self.metrics.observe_verdict(decision.verdict.passed)
        if decision.publish:
            self.decisions += 1
            self.events.emit(EventKind.INSPECTION, decision.to_payload())
            if on_decision is not None:
                on_decision(decision)

    def _observe(self, result: Any, processed: int) -> None:
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

    def stop(self, reason: str) -> None:
        if self._stream is not None:
            self._stream.stop(reason)

    def __exit__(self, *exc: object) -> None:
        self.watchdog.stopping()
        try:
            self.events.emit(EventKind.STATUS, {"state": "stopped", "decisions": self.decisions,
                                                "error": str(exc[1]) if exc[1] else None})
        finally:
            self._stack.close()


@contextlib.contextmanager
def _signals(cell: Cell, received: list[str]) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        cell.stop(received[-1])

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _check(config: InspectionConfig, model_dir: str | None) -> int:
    """--check: the config is valid; the model, when present, loads and knows the rules' labels."""
    from edgekit.modelwatch import ModelWatcher, find_versions
    from edgekit.runtimes import load_model

    where = model_dir or config.model.dir
    if where and not find_versions(Path(where)):
        print(f"edgekit inspect: config OK; note: {where} has no model version yet "
              f"(put one at {Path(where) / '1' / 'model.tflite'})")
        return 0
    if where:
        with native_stderr_filtered(), ModelWatcher(where, delegate=config.model.delegate).start(background=False) as w:
            labels = (w.model.metadata or {}).get("labels")
            serving = str(w.current)
    else:
        serving = config.model.path or ""
        with native_stderr_filtered(), load_model(serving, config.model.delegate, config.model.threads) as m:
            labels = (m.metadata or {}).get("labels")
    if config.model.labels:
        from edgekit.labels import load_labels
        labels = load_labels(config.model.labels)
    if labels:
        config.check_labels([str(x) for x in labels])
    print(f"edgekit inspect: config OK: {len(config.zones)} zone(s), {len(config.rules)} rule(s), "
          f"{config.trigger.mode.value}; model {serving}")
    return 0


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.model_dir and not Path(args.model_dir).is_dir():
        raise ConfigError(f"--model-dir {args.model_dir!r} is not a folder (expected NAME/1/model.tflite inside)")
    if args.check:
        return _check(config, args.model_dir)
    if not (args.model_dir or config.model.dir or config.model.path):
        raise ModelError("no model: set [model] path or dir in the config, or pass --model-dir")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("edgekit inspect: %(levelname)s: %(message)s"))
    logging.getLogger("edgekit").addHandler(handler)
    logging.getLogger("edgekit").setLevel(logging.INFO)
    received: list[str] = []

    def show(decision: Decision) -> None:
        if args.json:
            print(json.dumps(decision.to_payload()), flush=True)
        elif not args.quiet:
            what = decision.verdict.label if decision.verdict else f"ERROR {decision.error}"
            failed = ", ".join(r.rule.describe() + f" (got {r.count})" for r in decision.verdict.failed) \
                if decision.verdict else ""
            trig = f" trigger {decision.trigger_id}" if decision.trigger_id else ""
            print(f"frame {decision.frame}{trig}: {what}" + (f"  {failed}" if failed else ""), flush=True)

    try:
        with Cell(config, args.model_dir) as cell, _signals(cell, received):
            summary = cell.run(args.max_frames, args.duration, on_decision=show)
    finally:
        logging.getLogger("edgekit").removeHandler(handler)
    if not args.quiet:
        print(f"edgekit inspect: {cell.decisions} decision(s); {summary.line()}", file=sys.stderr)
    return 130 if "SIGINT" in received else 0
