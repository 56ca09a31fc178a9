"""Prometheus metrics for a running edgekit loop, in their own registry, on 127.0.0.1 by default.

::

    metrics = CellMetrics(device="cell-4")
    metrics.serve(port=9100)                 # http://127.0.0.1:9100/metrics
    metrics.frame_counts(captured=120, processed=118, dropped=2)
    metrics.observe_inference(0.031)
    metrics.observe_verdict(passed=True)
    metrics.close()

Needs the ``metrics`` extra (prometheus-client).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from edgekit.errors import ConfigError, EdgekitError

__all__ = ["CellMetrics", "LATENCY_BUCKETS"]

# Edge inference runs from ~1 ms (Edge TPU, tiny models) to seconds (big models on a Pi Zero).
LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5,
                   0.75, 1.0, 2.0, 5.0)


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise EdgekitError("metrics need prometheus-client: pip install 'edgekit-tflite[metrics]'") from None
    return prometheus_client


class CellMetrics:
    """The metrics of one device, in a private CollectorRegistry (never the global one).

    Args:
        device: the device id, a constant label on every series.
        namespace: the metric name prefix.
    """

    def __init__(self, device: str = "", namespace: str = "edgekit") -> None:
        pc = _prometheus()
        self.registry = pc.CollectorRegistry(auto_describe=True)
        kw: dict[str, Any] = {"namespace": namespace, "registry": self.registry}
        self.frames = pc.Counter("frames", "Frames by stage: captured, processed, dropped",
                                 ["stage"], **kw)
        self.inference = pc.Histogram("inference_seconds", "Model invoke time per frame",
                                      buckets=LATENCY_BUCKETS, **kw)
        self.capture_to_result = pc.Histogram(
            "capture_to_result_seconds", "From frame capture to its result being ready",
            buckets=LATENCY_BUCKETS, **kw)
        self.verdicts = pc.Counter("inspections", "Inspection verdicts", ["result"], **kw)
        self.model = pc.Info("model", "The model version serving now", **kw)
        self.model_switches = pc.Counter("model_switches", "Model versions switched to or refused",
                                         ["outcome"], **kw)
        self.errors = pc.Counter("errors", "Errors by component", ["component"], **kw)
        self.last_error = pc.Info("last_error", "The most recent error", **kw)
        self.last_error_time = pc.Gauge("last_error_timestamp_seconds",
                                        "When the most recent error happened (Unix time)", **kw)
        self.queued = pc.Gauge("events_queued", "Events waiting on disk for a sink", ["sink"], **kw)
        self.device = pc.Info("device", "This device", **kw)
        self.device.info({"device": device})
        for stage in ("captured", "processed", "dropped"):
            self.frames.labels(stage)  # present at 0 from the first scrape
        for result in ("pass", "fail"):
            self.verdicts.labels(result)
        self._seen = {"captured": 0, "processed": 0, "dropped": 0}
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    # --- recording --------------------------------------------------------------------
    def frame_counts(self, *, captured: int, processed: int, dropped: int) -> None:
        """Set the loop's running totals; only the increase since the last call is added."""
        with self._lock:
            for stage, total in (("captured", captured), ("processed", processed), ("dropped", dropped)):
                delta = total - self._seen[stage]
                if delta > 0:
                    self.frames.labels(stage).inc(delta)
                    self._seen[stage] = total

    def observe_inference(self, seconds: float) -> None:
        self.inference.observe(seconds)

    def observe_capture_to_result(self, seconds: float) -> None:
        self.capture_to_result.observe(seconds)

    def observe_verdict(self, passed: bool) -> None:
        self.verdicts.labels("pass" if passed else "fail").inc()

    def set_model(self, name: str, version: str | int, path: str = "", backend: str = "",
                  delegate: str = "") -> None:
        self.model.info({"name": name, "version": str(version), "path": path, "backend": backend,
                         "delegate": delegate})

    def record_error(self, component: str, message: str) -> None:
        """Count an error and keep it as the last one (message cut to 200 characters)."""
        self.errors.labels(component).inc()
        self.last_error.info({"component": component, "message": message[:200]})
        self.last_error_time.set(time.time())

    def set_queued(self, sink: str, count: int) -> None:
        self.queued.labels(sink).set(count)

    def text(self) -> str:
        """The exposition text a scrape would return."""
        return _prometheus().generate_latest(self.registry).decode()

    # --- serving ----------------------------------------------------------------------
    def serve(self, port: int = 9100, host: str = "127.0.0.1") -> int:
        """Serve /metrics over HTTP from a background thread. Returns the port (0 picks a free one).

        Bound to 127.0.0.1 by default: a metrics endpoint tells a visitor what runs on the
        line; expose it (host="0.0.0.0") only on a trusted network.

        Raises:
            ConfigError: the port is taken or the address cannot be bound.
        """
        from wsgiref.simple_server import make_server

        pc = _prometheus()
        from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler

        if self._server is not None:
            raise ConfigError(f"metrics are already served on port {self.port}")
        try:
            self._server = make_server(host, port, pc.make_wsgi_app(self.registry),
                                       ThreadingWSGIServer, handler_class=_SilentHandler)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}. Choose "
                              "another port (metrics.port in the config, or --metrics-port).") from None
        self.port = int(self._server.server_address[1])
        server = self._server
        self._thread = threading.Thread(target=lambda: server.serve_forever(poll_interval=0.25),
                                        name="edgekit-metrics", daemon=True)
        self._thread.start()
        return self.port

    def close(self) -> None:
        """Stop serving (safe twice)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> CellMetrics:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
