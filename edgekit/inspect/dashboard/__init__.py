"""The operator's dashboard: one local page with the live annotated view, the last parts with their
verdicts, counters per shift and since start, and the cell's health; a small JSON API beside it.

A cell serves it when its config has a ``[dashboard]`` table; ``edgekit detect --serve PORT`` serves
the live view of a plain detection run. In Python::

    from edgekit.inspect.dashboard import Dashboard, DashboardConfig

    with Dashboard(DashboardConfig(port=8080)) as dash:      # 127.0.0.1:8080
        for result in detector.stream("belt.avi"):
            dash.observe(result)                              # never waits for a viewer

Standard library only (http.server); the page is plain HTML, CSS and JavaScript shipped in the
package (no build step, nothing fetched from elsewhere).
"""

from __future__ import annotations

from edgekit.inspect.dashboard.cellview import (
    DashboardSink,
    DashboardStage,
    cell_dashboard,
    detect_dashboard,
    parse_serve,
)
from edgekit.inspect.dashboard.config import DashboardConfig, TokenSource, is_local, parse_dashboard, resolve_token
from edgekit.inspect.dashboard.render import Overlay, OverlayLine, overlay_of
from edgekit.inspect.dashboard.server import Dashboard

__all__ = ["Dashboard", "DashboardConfig", "DashboardSink", "DashboardStage", "Overlay", "OverlayLine", "TokenSource",
           "cell_dashboard", "detect_dashboard", "is_local", "overlay_of", "parse_dashboard", "parse_serve",
           "resolve_token"]
