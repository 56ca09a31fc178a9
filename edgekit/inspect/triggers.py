"""On-demand triggers: from a file, an HTTP call on localhost, or a Python call.

A PLC, a light barrier script or an operator asks "inspect the part that is there now".
Each trigger is answered with the verdict of the first frame *captured after* it (never a
stale frame from before the part arrived), or with an error when no such frame comes
within the timeout::

    triggers = Triggers(file="/run/edgekit/trigger", http_port=8089)
    triggers.start()
    request = triggers.fire("part-123")          # from Python
    request.result(timeout=5)                    # -> RulesVerdict
    # shell:  touch /run/edgekit/trigger        or  echo part-7 > /run/edgekit/trigger
    # HTTP:   curl -X POST 'http://127.0.0.1:8089/trigger?wait=1' -d '{"id": "part-7"}'
"""

from __future__ import annotations

import enum
import itertools
import json
import logging
import os
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from edgekit.errors import ConfigError

__all__ = ["TriggerMode", "PublishMode", "TriggerRequest", "Triggers", "TriggerTimeout"]

log = logging.getLogger(__name__)


class TriggerMode(str, enum.Enum):
    CONTINUOUS = "continuous"  # a verdict for every processed frame
    ON_DEMAND = "on-demand"  # a verdict per trigger


class PublishMode(str, enum.Enum):
    EVERY = "every"  # publish every verdict
    CHANGE = "change"  # continuous mode: publish when PASS/FAIL changes (metrics still count all)


class TriggerTimeout(Exception):
    """No frame was captured after the trigger within its timeout (camera stalled?)."""


@dataclass
class TriggerRequest:
    """One trigger. ``created`` is on the clock of the frames' capture time."""

    id: str
    source: str  # "file", "http" or "python"
    created: float
    deadline: float
    future: Future = field(default_factory=Future, repr=False)

    def result(self, timeout: float | None = None) -> Any:
        """The verdict (blocks). Raises TriggerTimeout when no frame came in time."""
        try:
            return self.future.result(timeout)
        except FutureTimeout:
            raise TriggerTimeout(f"trigger {self.id!r}: no verdict within {timeout} s") from None


class Triggers:
    """Collects triggers from every source into one ordered queue.

    Args:
        file: a path to watch; creating it fires a trigger (its first line, if any, is the
            trigger id) and the file is removed.
        http_port: serve POST /trigger on ``http_host`` (127.0.0.1: local callers only).
        timeout: seconds a trigger waits for a frame captured after it.
        clock: the frames' capture clock (edgekit's loop uses time.perf_counter).
    """

    def __init__(self, *, file: str | os.PathLike[str] | None = None, http_port: int | None = None,
                 http_host: str = "127.0.0.1", timeout: float = 5.0,
                 clock: Callable[[], float] = time.perf_counter, poll_seconds: float = 0.02) -> None:
        self.file = Path(file) if file is not None else None
        self.http_port, self.http_host, self.timeout = http_port, http_host, timeout
        self._clock, self._poll = clock, poll_seconds
        self._lock = threading.Lock()
        self._pending: list[TriggerRequest] = []
        self._counter = itertools.count(1)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._server: ThreadingHTTPServer | None = None

    def fire(self, trigger_id: str | None = None, source: str = "python") -> TriggerRequest:
        """Queue a trigger (thread-safe); its verdict comes with the next captured frame."""
        now = self._clock()
        n = next(self._counter)
        req = TriggerRequest(str(trigger_id) if trigger_id else f"t{n}", source, now, now + self.timeout)
        with self._lock:
            self._pending.append(req)
        return req

    def due(self, captured_at: float) -> tuple[list[TriggerRequest], list[TriggerRequest]]:
        """Split waiting triggers for a frame captured at `captured_at`: those it answers (fired
        before it), and those that timed out. Later triggers keep waiting."""
        now = self._clock()
        with self._lock:
            answer = [r for r in self._pending if r.created <= captured_at]
            expired = [r for r in self._pending if r not in answer and r.deadline < now]
            self._pending = [r for r in self._pending if r not in answer and r not in expired]
        return answer, expired

    def expire(self) -> list[TriggerRequest]:
        """Triggers past their deadline (call when no frame arrives at all)."""
        return self.due(float("-inf"))[1]

    # --- sources ----------------------------------------------------------------------
    def start(self) -> Triggers:
        """Start watching the file and serving HTTP, where configured.

        Raises:
            ConfigError: the HTTP port cannot be bound, or the file's folder does not exist.
        """
        if self.file is not None:
            if not self.file.parent.is_dir():
                raise ConfigError(f"trigger file folder {str(self.file.parent)!r} does not exist; create it "
                                  "(for /run/edgekit: RuntimeDirectory=edgekit in the systemd unit)")
            path = self.file
            self._spawn(lambda: self._watch_file(path), "edgekit-trigger-file")
        if self.http_port is not None:
            try:
                self._server = ThreadingHTTPServer((self.http_host, self.http_port), _handler(self))
            except OSError as exc:
                raise ConfigError(f"cannot serve triggers on {self.http_host}:{self.http_port}: "
                                  f"{exc.strerror or exc}; choose another trigger.http_port") from None
            self.http_port = int(self._server.server_address[1])
            self._spawn(self._server.serve_forever, "edgekit-trigger-http")
        return self

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _watch_file(self, path: Path) -> None:
        while not self._stop.wait(self._poll):
            try:
                text = path.read_text(errors="replace")[:200]
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("trigger file %s unreadable: %s", path, exc)
                continue
            first = text.strip().splitlines()[0].strip() if text.strip() else None
            self.fire(first, source="file")

    def close(self) -> None:
        """Stop the sources; waiting triggers get TriggerTimeout. Safe to call twice."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for t in self._threads:
            t.join(timeout=2)
        self._threads.clear()
        with self._lock:
            pending, self._pending = self._pending, []
        for r in pending:
            if not r.future.done():
                r.future.set_exception(TriggerTimeout(f"trigger {r.id!r}: inspection stopped"))

    def __enter__(self) -> Triggers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(triggers: Triggers) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "edgekit"

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            url = urlsplit(self.path)
            if url.path != "/trigger":
                return self._send(404, {"error": "POST /trigger"})
            body = self.rfile.read(min(int(self.headers.get("Content-Length") or 0), 4096))
            try:
                trigger_id = (json.loads(body) or {}).get("id") if body.strip() else None
            except (ValueError, AttributeError):
                return self._send(400, {"error": 'body must be empty or JSON like {"id": "part-7"}'})
            req = triggers.fire(trigger_id, source="http")
            if parse_qs(url.query).get("wait", ["0"])[0] in ("1", "true", "yes"):
                try:
                    verdict = req.result(triggers.timeout + 1)
                except TriggerTimeout as exc:
                    return self._send(504, {"trigger": req.id, "error": str(exc)})
                return self._send(200, {"trigger": req.id, **verdict.to_dict()})
            return self._send(202, {"trigger": req.id})

        def do_GET(self) -> None:  # noqa: N802
            if urlsplit(self.path).path == "/healthz":
                return self._send(200, {"ok": True})
            return self._send(404, {"error": "POST /trigger or GET /healthz"})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            log.debug("trigger http: " + format, *args)

    return Handler
