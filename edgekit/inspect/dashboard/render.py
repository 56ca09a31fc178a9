"""The live view: the newest frame scaled down, annotated (boxes, track ids, zones, the counting line)
and JPEG-encoded in a server thread, at most ``max_fps`` times a second however many viewers ask.

Nothing here runs in the loop: a frame is drawn and encoded only when a viewer asks for one, and all
viewers share each encoding. OpenCV releases the GIL while it resizes, draws and encodes.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

import numpy as np

from edgekit.inspect.dashboard.state import ViewState

if TYPE_CHECKING:
    from edgekit.results import FrameResult

__all__ = ["Encoded", "FrameEncoder", "Overlay", "OverlayLine", "annotate", "overlay_of"]

log = logging.getLogger("edgekit.dashboard")

_ZONE = (255, 200, 0)  # BGR: a light blue (the counting line: edgekit.drawing.LINE_COLOR, amber)


class OverlayLine(NamedTuple):
    """The counting line as drawn: its ends in frame pixels, its name and the way that counts."""

    start: tuple[float, float]
    end: tuple[float, float]
    name: str
    axis: tuple[float, float] = (0.0, 0.0)  # the counted direction (0, 0: either way)


class Overlay(NamedTuple):
    """What is drawn besides the boxes: named zones (polygons in frame pixels) and the counting line."""

    zones: tuple[tuple[str, np.ndarray], ...] = ()
    line: OverlayLine | None = None
    gate: str | None = None  # the zone whose crossing judges a part (drawn thicker)
    min_score: float = 0.0  # raw detections below it are not drawn


class Encoded(NamedTuple):
    version: int  # ViewState's frame version it was made from
    frame: int  # the source's frame index
    jpeg: bytes
    made: float  # time.monotonic() when encoded


def _scaled(result: Any, scale: float) -> Any:
    if scale == 1.0 or not hasattr(result, "xyxy"):
        return result
    return dataclasses.replace(result, xyxy=result.xyxy * np.float32(scale))


def annotate(result: FrameResult, extra: Any, overlay: Overlay, max_width: int) -> np.ndarray | None:
    """The frame of ``result`` as BGR, at most ``max_width`` wide, with boxes, ids, zones and line drawn.

    ``extra``: a :class:`~edgekit.inspect.parts.PartsFrame` (tracked parts and their defects are drawn
    instead of the raw detections), or None. None when the result carries no image.
    """
    import cv2

    from edgekit.drawing import draw, draw_counting_line
    from edgekit.results import Detections

    captured = result.captured
    if captured is None:
        return None
    pixels = getattr(captured, "pixels", None)
    image, bgr = pixels if pixels is not None else (result.frame_bgr, True)
    if image is None:
        return None
    h, w = image.shape[:2]
    scale = min(1.0, max_width / w)
    if scale < 1.0:
        out = cv2.resize(image, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)
    else:
        out = image.copy()
    if not bgr:
        out = cv2.cvtColor(out, cv2.COLOR_RGB2BGR)
    thick = max(1, round(2 * out.shape[1] / 640))
    for name, polygon in overlay.zones:
        pts = np.round(polygon * scale).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(out, [pts], True, _ZONE, thick * (2 if name == overlay.gate else 1), cv2.LINE_AA)
        x, y = pts[:, 0, 0].min(), pts[:, 0, 1].min()
        cv2.putText(out, name, (int(x) + 4, int(y) + 16), cv2.FONT_HERSHEY_SIMPLEX, 0.5, _ZONE, 1, cv2.LINE_AA)
    if overlay.line is not None:
        draw_counting_line(out, tuple(np.array(overlay.line.start) * scale), tuple(np.array(overlay.line.end) * scale),
                           overlay.line.name, axis=overlay.line.axis, thickness=thick + 1, bgr=True)
    if extra is not None and hasattr(extra, "parts"):  # a PartsFrame: parts with their track ids
        for layer in (extra.defects, extra.parts.confirmed().as_detections()):
            if len(layer):
                draw(out, _scaled(layer, scale), bgr=True, copy=False, thickness=thick)
        return out
    shown = result.result
    if isinstance(shown, Detections) and overlay.min_score > 0 and len(shown):
        shown = shown[shown.scores >= overlay.min_score]
    draw(out, _scaled(shown, scale), bgr=True, copy=False, thickness=thick)
    return out


class FrameEncoder:
    """Encodes the newest frame of a :class:`ViewState` at most ``max_fps`` times a second, while
    someone waits for one.

    One pacer thread (running only while viewers wait) encodes the newest frame every ``1 / max_fps``
    seconds and wakes the viewers waiting in :meth:`wait_newer`: each viewer wakes once per frame it
    is sent, and five viewers share each encoding. Runs in the server's threads only.
    """

    def __init__(self, state: ViewState, overlay: Overlay, *, max_fps: float = 5.0, max_width: int = 960,
                 quality: int = 75, closing: threading.Event | None = None) -> None:
        self.state, self.overlay = state, overlay
        self.interval = 1.0 / max_fps
        self.max_width, self.quality = max_width, quality
        self.closing = closing or threading.Event()
        self.encoded = 0  # frames encoded so far
        self._lock = threading.Lock()  # one encoding at a time
        self._cond = threading.Condition()  # viewers waiting for the next encoding
        self._waiting = 0
        self._pacer: threading.Thread | None = None
        self._cached: Encoded | None = None
        self._failed = False  # a frame could not be drawn (logged once)

    def current(self) -> Encoded | None:
        """The newest frame's JPEG, encoding it if the cached one is older than ``1 / max_fps``."""
        import cv2

        with self._lock:
            latest = self.state.latest()
            cached = self._cached
            if latest is None:
                return cached
            if cached is not None and (cached.version == latest.version
                                       or time.monotonic() - cached.made < self.interval * 0.9):
                return cached
            try:
                image = annotate(latest.result, latest.extra, self.overlay, self.max_width)
                ok, buf = (False, None) if image is None else cv2.imencode(
                    ".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, self.quality])
            except Exception as exc:  # noqa: BLE001 - a frame the view cannot draw costs the view, not the line
                if not self._failed:
                    log.warning("the dashboard cannot draw frame %d: %s", latest.result.index, exc)
                self._failed = True
                return cached
            if not ok or buf is None:
                return cached
            self.encoded += 1
            self._cached = Encoded(latest.version, latest.result.index, buf.tobytes(), time.monotonic())
            return self._cached

    def wait_newer(self, after_version: int, timeout: float) -> Encoded | None:
        """A frame newer than ``after_version``, waiting up to ``timeout`` s (the current one then)."""
        deadline = time.monotonic() + timeout
        got = self.current()  # the newest, when the last encoding is old enough (a viewer after a pause)
        with self._cond:
            self._waiting += 1
            if self._pacer is None:
                self._pacer = threading.Thread(target=self._pace, name="edgekit-dashboard-pacer", daemon=True)
                self._pacer.start()
            try:
                while (got is None or got.version <= after_version) and not self.closing.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                    got = self._cached
            finally:
                self._waiting -= 1
        return got

    def _pace(self) -> None:
        idle_since: float | None = None
        while not self.closing.wait(self.interval):
            with self._cond:
                if self._waiting == 0:
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > 2.0:  # nobody for a while: stop until the next viewer
                        self._pacer = None
                        return
                    continue
                idle_since = None
            before = self._cached
            got = self.current()
            if got is not before:
                with self._cond:
                    self._cond.notify_all()
        with self._cond:
            self._pacer = None
            self._cond.notify_all()

    def wake_all(self) -> None:
        """Let every waiting viewer go (the server is closing)."""
        with self._cond:
            self._cond.notify_all()


def _xy(point: Sequence[float] | np.ndarray) -> tuple[float, float]:
    return float(point[0]), float(point[1])


def overlay_of(zones: Sequence[Any] = (), line: Any = None, min_score: float = 0.0) -> Overlay:
    """The overlay of an inspection config's zones and its counting line or zone crossing."""
    drawn = tuple((z.name, np.asarray(z.polygon, dtype=np.float64)) for z in zones)
    gate, ol = None, None
    if line is not None and hasattr(line, "start"):
        axis = getattr(getattr(line, "direction", None), "axis", np.zeros(2))
        ol = OverlayLine(_xy(line.start), _xy(line.end), line.name, _xy(axis))
    elif line is not None:
        gate = getattr(getattr(line, "zone", None), "name", None)
    return Overlay(drawn, ol, gate, min_score)
