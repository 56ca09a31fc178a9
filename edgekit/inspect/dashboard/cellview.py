"""The dashboard of an inspection cell and of a plain detection run: what each shows and where it
comes from (the cell's config, events, sinks and PLC; the detector's model)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from edgekit.inspect.dashboard.config import DashboardConfig, resolve_token
from edgekit.inspect.dashboard.render import overlay_of
from edgekit.inspect.dashboard.server import Dashboard

from edgekit.inspect.stage import CellView, JudgedFrame

if TYPE_CHECKING:
    from edgekit.inspect.config import InspectionConfig
    from edgekit.inspect.parts.stage import PartsStage
    from edgekit.results import FrameResult

__all__ = ["DashboardSink", "DashboardStage", "cell_dashboard", "config_secrets", "detect_dashboard", "parse_serve"]

TOKEN_ENV = "EDGEKIT_DASHBOARD_TOKEN"


def config_secrets(config: InspectionConfig) -> list[str]:
    """Every value in the config that must never reach a response: the MQTT password, webhook
    header values and a password inside the webhook's URL."""
    out: list[str] = []
    sinks = config.sinks
    if sinks.mqtt is not None and sinks.mqtt.password:
        out.append(sinks.mqtt.password)
    if sinks.webhook is not None:
        out.extend(v for v in sinks.webhook.headers.values() if v)
        password = urlsplit(sinks.webhook.url).password
        if password:
            out.append(password)
    return out


class DashboardStage:
    """The dashboard as a stage of the cell: each judged frame, and the newest part verdict."""

    def __init__(self, dashboard: Dashboard, parts: PartsStage | None = None) -> None:
        self.dashboard, self.parts = dashboard, parts

    def on_frame(self, frame: JudgedFrame) -> None:
        """Hands over the newest frame; never waits for a viewer."""
        self.dashboard.observe(frame.result, self.parts.last if self.parts is not None else None)


def _plc(cell: CellView, dash: Dashboard) -> dict[str, Any]:
    parts = cell.parts
    rejector = parts.rejector if parts is not None else None
    if rejector is None:
        return {"state": "none"}
    counts = {kind.value: n for kind, n in rejector.counts.items()}
    last = next((e for e in reversed(list(dash.state.events)) if e["kind"] == "reject"), None)
    state = "idle" if last is None else {"written": "ok", "retry": "retrying", "failed": "failed",
                                         "dropped": "failed"}.get(last["payload"].get("result"), "ok")
    lat = sorted(rejector.latencies_ms)
    return {"state": state, "outputs": [out.name for out in rejector.outputs], **counts,
            "queued": rejector.queued, "delay_s": rejector.delay,
            "latency_ms_p50": round(lat[len(lat) // 2], 2) if lat else None,
            "last_error": None if last is None else last["payload"].get("error")}


def _sinks(cell: CellView, dash: Dashboard) -> list[dict[str, Any]]:
    out = []
    for sink in cell.events.sinks:
        if sink is dash.feed:
            continue
        queue = getattr(sink, "queue", None)
        try:
            queued = len(queue) if queue is not None else None
        except Exception:  # noqa: BLE001 - a queue being closed
            queued = None
        out.append({"name": type(sink).__name__.replace("Sink", "").lower(), "queued": queued})
    return out


def cell_dashboard(cell: CellView, config: DashboardConfig) -> Dashboard:
    """The dashboard of an open cell (not started): its zones and counting line on the live view,
    its events through an event sink, its model, sinks and PLC in the status, and the cell's
    on-demand trigger when ``config.trigger`` is on."""
    cfg = cell.config
    line = cfg.parts.line if cfg.parts is not None else None
    mode = "parts" if cfg.parts is not None else "frames"
    fired = iter(range(1, 1 << 62))

    def status() -> dict[str, Any]:
        model = cell.detector.model
        version = cell.events.model_version
        return {"device": cfg.device, "model": {"version": version, "file": Path(model.path).name,
                                                "backend": getattr(model.backend, "name", str(model.backend))},
                "sinks": _sinks(cell, dash), "sink_errors": cell.events.sink_errors, "plc": _plc(cell, dash),
                "trigger_mode": cfg.trigger.mode.value, "time": time.time()}

    def trigger() -> str:
        request = cell.inspector.trigger(f"dashboard-{next(fired)}")
        return request.id

    dash = Dashboard(config, overlay=overlay_of(cfg.zones, line, cfg.model.threshold), status=status,
                     trigger=trigger, secrets=config_secrets(cfg), title=cfg.device, mode=mode)
    cell.events.add_sink(dash.feed)
    return dash


def parse_serve(text: str) -> tuple[str, int]:
    """``--serve [HOST:]PORT`` -> (host, port).

    Raises:
        ValueError: not a port, or a port out of range.
    """
    host, _, port = text.rpartition(":")
    value = int(port)
    if not 0 < value < 65536:
        raise ValueError(f"port {value} is out of range 1-65535")
    return host.strip("[]") or "127.0.0.1", value


def detect_dashboard(host: str, port: int, *, model_path: str, max_fps: float = 5.0,
                     env: dict[str, str] | None = None) -> Dashboard:
    """The live view of ``edgekit detect --serve [HOST:]PORT``: boxes and track ids, the loop's
    figures and the model's name. A bind other than localhost takes its token from
    EDGEKIT_DASHBOARD_TOKEN, else makes one up (printed at start).

    Raises:
        ConfigError: the token in the environment is too short.
    """
    environ = os.environ if env is None else env
    token, source = resolve_token(host, environ, TOKEN_ENV if TOKEN_ENV in environ else None)
    config = DashboardConfig(port=port, host=host, token=token, token_source=source, max_fps=max_fps)
    name = Path(model_path).name
    return Dashboard(config, status=lambda: {"model": {"version": None, "file": name}}, title=name, mode="detect")


class DashboardSink:
    """A loop sink (``edgekit detect``) that hands each result to a dashboard."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard

    def write(self, result: FrameResult) -> None:
        self.dashboard.observe(result)

    def close(self) -> None:
        self.dashboard.close()
