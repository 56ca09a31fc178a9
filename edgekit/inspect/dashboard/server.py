"""The dashboard's HTTP server (the standard library's ThreadingHTTPServer): the page, its JSON API,
the live view as MJPEG or one JPEG at a time, the crops of the last parts, and an optional trigger.

Routes (all GET but the trigger)::

    /                      the page (static/index.html, app.js, app.css shipped in the package)
    /api/status            loop figures, model, sinks, PLC, counters (shift and since start), viewers
    /api/parts?since=N     the last parts with a number above N (their verdicts, reasons, crop URLs)
    /api/events?since=N    the last events with a sequence number above N
    /api/frame.jpg?after=V the newest annotated frame (waits up to 2 s for one newer than version V)
    /stream.mjpg           the annotated frames as multipart/x-mixed-replace, at most max_fps
    /api/crops/N.jpg       the best-frame crop of part N (when the cell saves crops)
    POST /api/trigger      one on-demand trigger (only with trigger = true; always needs the token)

With a token, each request needs ``Authorization: Bearer TOKEN``, or ``?token=TOKEN`` once, which
sets an HttpOnly cookie holding a value derived from the token (never the token itself).
"""

from __future__ import annotations

import hashlib
import hmac
import http.cookies
import json
import logging
import re
import threading
from enum import Enum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, urlsplit

from edgekit.errors import ConfigError
from edgekit.inspect.dashboard.config import DashboardConfig, TokenSource
from edgekit.inspect.dashboard.render import FrameEncoder, Overlay
from edgekit.inspect.dashboard.state import EventFeed, ViewState
from edgekit.inspect.events import to_jsonable

__all__ = ["Dashboard", "DashboardMode", "COOKIE"]

log = logging.getLogger("edgekit.dashboard")

COOKIE = "edgekit_dashboard"
_STATIC = {"/": ("index.html", "text/html; charset=utf-8"), "/app.js": ("app.js", "text/javascript; charset=utf-8"),
           "/app.css": ("app.css", "text/css; charset=utf-8")}
_CROP = re.compile(r"^/api/crops/(\d{1,12})\.jpg$")
_SECURITY_HEADERS = {
    "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; "
                               "script-src 'self'; frame-ancestors 'none'; form-action 'self'"}


def _session(token: str) -> str:
    """The cookie's value: derived from the token, so no response ever carries the token itself."""
    return hmac.new(token.encode(), b"edgekit-dashboard-session", hashlib.sha256).hexdigest()


class DashboardMode(str, Enum):
    """What the page shows: ``edgekit detect --serve``'s live view, or a cell judging parts or frames."""

    DETECT = "detect"
    PARTS = "parts"
    FRAMES = "frames"


class _Redactor:
    """Replaces known secrets (MQTT password, webhook headers, the token) in text sent out."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        found = {s for s in secrets if s and len(s) >= 4}
        self.secrets = sorted(found | {json.dumps(s)[1:-1] for s in found}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, "***")
        return text


class Dashboard:
    """The operator's page for a running loop. A context manager: ``with`` starts the server.

    Args:
        config: port, host, token, rates (:class:`DashboardConfig`).
        overlay: zones and the counting line to draw on the live view.
        status: called per /api/status request (in a server thread) for the model, sinks, PLC...
        trigger: fires one on-demand trigger and returns its id (with ``config.trigger``).
        secrets: values never to appear in a response (the token is always one).
        title: shown in the page's header (default: the config's title, else "edgekit").

    Raises (on start):
        ConfigError: the address cannot be bound (the port is taken, the host is not an address here).
    """

    def __init__(self, config: DashboardConfig, *, overlay: Overlay = Overlay(),
                 status: Callable[[], dict[str, Any]] | None = None, trigger: Callable[[], str] | None = None,
                 secrets: Iterable[str | None] = (), title: str = "", mode: DashboardMode | str = DashboardMode.DETECT) -> None:
        self.config = config
        self.state = ViewState(recent=config.recent, shifts=config.shifts)
        self.closing = threading.Event()
        self.encoder = FrameEncoder(self.state, overlay, max_fps=config.max_fps, max_width=config.max_width,
                                    quality=config.quality, closing=self.closing)
        self.feed = EventFeed(self.state)
        self.title = config.title or title or "edgekit"
        self.mode = DashboardMode(mode)  # a plain "detect" / "parts" / "frames" too, as before the enum
        self._status, self._trigger = status, trigger if config.trigger else None
        self.redact = _Redactor([*secrets, config.token])
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.triggers = 0

    # --- the loop's side ----------------------------------------------------------------
    def observe(self, result: Any, extra: Any = None) -> None:
        """Hand over the newest result (the loop's thread; a few attribute writes, never waits)."""
        self.state.observe(result, extra)

    # --- starting and stopping ----------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1] if self._server is not None else self.config.port

    @property
    def url(self) -> str:
        host = self.config.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    def announce(self) -> str:
        """The line logged at start; names the token only when edgekit made it up (never one from the
        environment)."""
        if self.config.token is None:
            return f"dashboard on {self.url}"
        line = f"dashboard on {self.url} (token required)"
        if self.config.token_source == TokenSource.GENERATED:
            keep = ("set EDGEKIT_DASHBOARD_TOKEN to keep one" if self.mode is DashboardMode.DETECT
                    else "set [dashboard] token_env in the config to keep one")
            line += f"; open {self.url}/?token={self.config.token} once per browser (a new token each start: {keep})"
        return line

    def start(self) -> Dashboard:
        """Bind and serve in a background thread; logs :meth:`announce`.

        Raises:
            ConfigError: the address cannot be bound.
        """
        if self._server is not None:
            return self
        try:
            server = ThreadingHTTPServer((self.config.host, self.config.port), _handler(self))
        except OSError as exc:
            where = "--serve [HOST:]PORT" if self.mode is DashboardMode.DETECT else "[dashboard] port in the config"
            raise ConfigError(f"the dashboard cannot listen on {self.config.host}:{self.config.port}: "
                              f"{exc.strerror or exc} (another program on that port? choose another with {where})") from None
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="edgekit-dashboard", daemon=True)
        self._thread.start()
        log.info(self.announce())
        return self

    def close(self) -> None:
        """Stop serving (open streams end within a frame interval). Safe twice."""
        self.closing.set()
        self.encoder.wake_all()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Dashboard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- what the API answers -----------------------------------------------------------
    def status(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self._status is not None:
            try:
                extra = self._status()
            except Exception as exc:  # noqa: BLE001 - the page shows what it can
                extra = {"status_error": f"{type(exc).__name__}: {exc}"}
        state = self.state
        return {"title": self.title, "mode": self.mode.value, "loop": state.figures(), "viewers": state.viewer_count(),
                "encoded": self.encoder.encoded, "max_fps": self.config.max_fps, "trigger": self._trigger is not None,
                **state.counter_docs(),
                "last_part": state.last_part, "last_event": state.last_event_seq, "started": state.started, **extra}

    def fire(self) -> str:
        if self._trigger is None:
            raise RuntimeError("triggers are off")
        self.triggers += 1
        return self._trigger()


def _handler(dash: Dashboard) -> type[BaseHTTPRequestHandler]:
    token = dash.config.token
    session = _session(token) if token else None

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def version_string(self) -> str:
            return "edgekit"

        # --- authentication -------------------------------------------------------------
        def _auth(self, query: dict[str, list[str]], *, header_only: bool = False) -> tuple[bool, bool]:
            """(allowed, set the cookie)."""
            if token is None:
                return True, False
            given = self.headers.get("Authorization", "")
            if given.startswith("Bearer ") and hmac.compare_digest(given[7:].strip().encode(), token.encode()):
                return True, False
            if header_only:
                return self._cookie_ok() and self._same_origin(), False
            if self._cookie_ok():
                return True, False
            q = query.get("token", [""])[0]
            if q and hmac.compare_digest(q.encode(), token.encode()):
                return True, True
            return False, False

        def _cookie_ok(self) -> bool:
            jar = http.cookies.SimpleCookie()
            try:
                jar.load(self.headers.get("Cookie", ""))
            except http.cookies.CookieError:
                return False
            morsel = jar.get(COOKIE)
            return morsel is not None and session is not None and hmac.compare_digest(morsel.value.encode(),
                                                                                      session.encode())

        def _host_ok(self) -> bool:
            """Without a token (a local bind) only local names may be asked for: a web page elsewhere
            cannot read the API through a DNS name re-pointed at 127.0.0.1."""
            if token is not None:
                return True
            host = urlsplit("//" + self.headers.get("Host", "")).hostname or ""
            return host in ("127.0.0.1", "localhost", "::1", dash.config.host.lower())

        def _same_origin(self) -> bool:
            origin = self.headers.get("Origin")
            return origin is None or urlsplit(origin).netloc == self.headers.get("Host", "")

        def _refuse(self, path: str) -> None:
            if path.startswith("/api/") or path == "/stream.mjpg":
                self._json(401, {"error": "token required: send 'Authorization: Bearer TOKEN' or open the page "
                                          "with ?token=TOKEN once"}, extra={"WWW-Authenticate": 'Bearer realm="edgekit"'})
                return
            body = _static("login.html")
            self._send(401, body, "text/html; charset=utf-8", extra={"WWW-Authenticate": 'Bearer realm="edgekit"'})

        # --- responses ------------------------------------------------------------------
        def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in {**_SECURITY_HEADERS, **(extra or {})}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: int, doc: Any, extra: dict[str, str] | None = None) -> None:
            try:
                text = json.dumps(doc, separators=(",", ":"), allow_nan=False, default=str)
            except ValueError:  # a NaN somewhere: null instead (browsers reject NaN in JSON)
                text = json.dumps(to_jsonable(json.loads(json.dumps(doc, default=str))), separators=(",", ":"))
            text = dash.redact(text)
            self._send(status, text.encode(), "application/json", extra)

        def _cookie_header(self) -> dict[str, str]:
            return {"Set-Cookie": f"{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/"}

        # --- routes ---------------------------------------------------------------------
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            path = url.path
            if not self._host_ok():
                self._json(403, {"error": "this dashboard answers to its own address only (Host header)"})
                return
            if path == "/app.css":  # the login page's looks: nothing in it to protect
                self._send(200, _static("app.css"), _STATIC[path][1])
                return
            ok, set_cookie = self._auth(query)
            if not ok:
                self._refuse(path)
                return
            cookie = self._cookie_header() if set_cookie else {}
            if set_cookie and path in _STATIC:  # the token leaves the address bar and the history
                self._send(303, b"", "text/plain", extra={**cookie, "Location": path})
                return
            try:
                self._route(path, query, cookie)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _route(self, path: str, query: dict[str, list[str]], cookie: dict[str, str]) -> None:
            if path in _STATIC:
                name, ctype = _STATIC[path]
                self._send(200, _static(name), ctype, cookie)
            elif path == "/api/status":
                self._json(200, dash.status(), cookie)
            elif path == "/api/parts":
                since = _int(query, "since")
                self._json(200, {"parts": dash.state.parts_since(since), "last": dash.state.last_part}, cookie)
            elif path == "/api/events":
                since = _int(query, "since")
                self._json(200, {"events": dash.state.events_since(since), "last": dash.state.last_event_seq},
                           cookie)
            elif path == "/api/frame.jpg":
                self._frame(_int(query, "after", -1), cookie)
            elif path == "/stream.mjpg":
                self._mjpeg()
            elif (m := _CROP.match(path)) is not None:
                self._crop(int(m.group(1)), cookie)
            else:
                self._json(404, {"error": f"no such page: {path}"})

        def _frame(self, after: int, cookie: dict[str, str]) -> None:
            dash.state.page_viewer(self.client_address[0])
            got = dash.encoder.wait_newer(after, 2.0)
            if got is None:
                self._send(204, b"", "image/jpeg", {**cookie, "Retry-After": "1"})
                return
            self._send(200, got.jpeg, "image/jpeg", {**cookie, "X-Edgekit-Frame": str(got.frame),
                                                     "X-Edgekit-Version": str(got.version)})

        def _mjpeg(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "multipart/x-mixed-replace; boundary=edgekitframe")
            for k, v in _SECURITY_HEADERS.items():
                self.send_header(k, v)
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            dash.state.viewers += 1
            version = -1
            try:
                while not dash.closing.is_set():
                    got = dash.encoder.wait_newer(version, 1.0)  # the pacer sets the rate
                    if got is None or got.version == version:
                        continue
                    version = got.version
                    self.wfile.write(b"--edgekitframe\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n"
                                     b"X-Edgekit-Frame: %d\r\n\r\n" % (len(got.jpeg), got.frame) + got.jpeg + b"\r\n")
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass
            finally:
                dash.state.viewers -= 1

        def _crop(self, part: int, cookie: dict[str, str]) -> None:
            path = dash.state.crop_path(part)
            try:
                data = open(path, "rb").read() if path else None  # noqa: SIM115 - a small file, read once
            except OSError:
                data = None
            if data is None:
                self._json(404, {"error": f"no crop of part {part} (only the last parts' crops are served)"})
                return
            self._send(200, data, "image/jpeg", cookie)

        def do_POST(self) -> None:  # noqa: N802
            url = urlsplit(self.path)
            if not self._host_ok():
                self._json(403, {"error": "this dashboard answers to its own address only (Host header)"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(min(length, 65536))
            if url.path != "/api/trigger":
                self._json(404, {"error": f"no such endpoint: POST {url.path} (the dashboard is read-only)"})
                return
            if dash._trigger is None:
                self._json(403, {"error": "triggers are off: set [dashboard] trigger = true with [trigger] mode = "
                                          "\"on-demand\""})
                return
            ok, _ = self._auth({}, header_only=True)
            if not ok:
                self._refuse(url.path)
                return
            self._json(202, {"trigger": dash.fire()})

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            log.debug("dashboard %s: %s", self.address_string(), dash.redact(format % args))

    return Handler


def _int(query: dict[str, list[str]], key: str, default: int = 0) -> int:
    try:
        return int(query.get(key, [str(default)])[0])
    except ValueError:
        return default


def _static(name: str) -> bytes:
    # One part per joinpath: Python 3.10's Traversable.joinpath takes one.
    return resources.files("edgekit.inspect.dashboard").joinpath("static").joinpath(name).read_bytes()
