"""The dashboard of an inspection cell and of a plain detection run: what each shows and where it
comes from (a cell's config, events and live state; the detector's model)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from edgekit.inspect.dashboard.config import DashboardConfig, resolve_token
from edgekit.inspect.dashboard.render import overlay_of
from edgekit.inspect.dashboard.server import Dashboard, DashboardMode
from edgekit.inspect.plc import ReportKind
from edgekit.inspect.stage import JudgedFrame, StageContext

if TYPE_CHECKING:
    from edgekit.inspect.config import InspectionConfig
    from edgekit.inspect.live import LiveState, RejectState
    from edgekit.results import FrameResult

__all__ = ["DashboardSink", "DashboardStage", "cell_dashboard", "config_secrets", "detect_dashboard", "live_status",
           "parse_serve"]

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
    """The dashboard as a stage of the cell: opened with the cell (its port bound), handed each
    judged frame (the newest is drawn, its verdicts counted), closed with the cell.

    Args:
        config: the ``[dashboard]`` table.
        trigger: what the page's trigger button fires (the rules' on-demand trigger), if anything.
    """

    def __init__(self, config: DashboardConfig, trigger: Callable[[str], str] | None = None) -> None:
        self.config, self._trigger = config, trigger
        self.dashboard: Dashboard | None = None

    def open(self, context: StageContext) -> None:
        self.dashboard = cell_dashboard(context, self.config, self._trigger)
        self.dashboard.start()

    def process(self, frame: JudgedFrame) -> None:
        """Hands over the newest frame and counts its verdicts; never waits for a viewer."""
        if self.dashboard is not None:
            self.dashboard.observe(frame.result, frame.tracked)
            self.dashboard.state.count(frame.parts, frame.published, frame.result.timestamp)

    def close(self) -> None:
        if self.dashboard is not None:
            self.dashboard.close()


_PLC_STATE = {ReportKind.WRITTEN: "ok", ReportKind.RETRY: "retrying", ReportKind.FAILED: "failed",
              ReportKind.DROPPED: "failed"}


def _plc(rejects: RejectState | None) -> dict[str, Any]:
    if rejects is None:
        return {"state": "none"}
    last = rejects.last
    return {"state": "idle" if last is None else _PLC_STATE[last.kind], "outputs": list(rejects.outputs),
            **{kind.value: n for kind, n in rejects.counts.items()}, "queued": rejects.queued,
            "delay_s": rejects.delay_s, "latency_ms_p50": rejects.latency_ms_p50,
            "last_error": None if last is None else last.error}


_OWN_FEED = "eventfeed"  # the dashboard's own event sink (EventFeed), not listed among the cell's


def live_status(live: LiveState) -> dict[str, Any]:
    """The cell's part of the dashboard's /api/status, from what the cell publishes."""
    model = live.model
    return {"device": live.device,
            "model": {"version": model.version, "file": model.file, "backend": model.backend} if model else None,
            "sinks": [{"name": s.name, "queued": s.queued} for s in live.sinks if s.name != _OWN_FEED],
            "sink_errors": live.sink_errors, "plc": _plc(live.rejects), "time": time.time()}


def cell_dashboard(cell: StageContext, config: DashboardConfig,
                   trigger: Callable[[str], str] | None = None) -> Dashboard:
    """The dashboard of an open cell (not started): its zones and counting line on the live view,
    its events through an event sink, its model, sinks and PLC in the status (the cell's
    :class:`~edgekit.inspect.live.LiveState`), and ``trigger`` behind the page's button when
    ``config.trigger`` is on."""
    cfg = cell.config
    line = cfg.parts.line if cfg.parts is not None else None
    mode = DashboardMode.PARTS if cfg.parts is not None else DashboardMode.FRAMES
    fired = iter(range(1, 1 << 62))

    def status() -> dict[str, Any]:
        return {**live_status(cell.live()), "trigger_mode": cfg.trigger.mode.value}

    def fire() -> str:
        if trigger is None:
            raise RuntimeError("this cell has no trigger")
        return trigger(f"dashboard-{next(fired)}")

    dash = Dashboard(config, overlay=overlay_of(cfg.zones, line, cfg.model.threshold), status=status,
                     trigger=fire, secrets=config_secrets(cfg), title=cfg.device, mode=mode)
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
    return Dashboard(config, status=lambda: {"model": {"version": None, "file": name}}, title=name, mode=DashboardMode.DETECT)


class DashboardSink:
    """A loop sink (``edgekit detect``) that hands each result to a dashboard."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard

    def write(self, result: FrameResult) -> None:
        self.dashboard.observe(result)

    def close(self) -> None:
        self.dashboard.close()
