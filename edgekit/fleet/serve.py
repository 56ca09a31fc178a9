"""A static file server for a release folder with what a following device uses: ETag and
Last-Modified (304 answers), and HTTP Range (resumed downloads). Python's ``http.server`` has no
Range support; any real server (nginx, S3, a CDN) has all of it, so this is for trying a
channel on a bench or a LAN and for the tests::

    python -m edgekit.fleet.serve releases/line1 --port 8000 [--rate 200000]
"""

from __future__ import annotations

import argparse
import email.utils
import http.server
import os
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["RangeHandler", "FolderServer", "serve_folder"]


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """GET/HEAD of files under the server's folder with ETag, Last-Modified and a single Range.

    Server attributes it reads: ``rate`` (bytes per second, None: as fast as possible) and
    ``faults`` (a dict: url path -> "truncate" sends half the bytes once, then closes).
    """

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_HEAD(self) -> None:  # noqa: N802
        self._send(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._send(head=False)

    def _send(self, head: bool) -> None:
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return
        st = path.stat()
        etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
        modified = email.utils.formatdate(st.st_mtime, usegmt=True)
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start, end = 0, st.st_size - 1
        rng = self.headers.get("Range", "")
        if rng.startswith("bytes=") and "," not in rng:
            a, _, b = rng[6:].partition("-")
            if a.isdigit():
                start, end = int(a), min(int(b), end) if b.isdigit() else end
            if start > end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{st.st_size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        partial = bool(rng) and start <= end
        self.send_response(206 if partial else 200)
        if partial:
            self.send_header("Content-Range", f"bytes {start}-{end}/{st.st_size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", modified)
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if head:
            return
        fault = getattr(self.server, "faults", {}).pop(self.path, None)
        stop_at = start + (end - start + 1) // 2 if fault == "truncate" else end + 1
        rate = getattr(self.server, "rate", None)
        with open(path, "rb") as f:
            f.seek(start)
            pos, t0 = start, time.monotonic()
            while pos < stop_at:
                chunk = f.read(min(16384, stop_at - pos))
                if not chunk:
                    break
                self.wfile.write(chunk)
                pos += len(chunk)
                if rate:
                    ahead = (pos - start) / rate - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
        if fault == "truncate":
            self.close_connection = True


class FolderServer(http.server.ThreadingHTTPServer):
    """What :func:`serve_folder` runs: a threading HTTP server with the two attributes RangeHandler reads."""

    rate: float | None = None  # bytes per second per download; None: as fast as possible
    faults: dict[str, str]  # url path -> "truncate"


def serve_folder(folder: str | os.PathLike[str], port: int = 0, host: str = "127.0.0.1",
                 rate: float | None = None) -> FolderServer:
    """Serve `folder` from a background thread; ``server.server_address[1]`` is the port.
    Stop it with ``server.shutdown(); server.server_close()``."""
    handler = lambda *a, **kw: RangeHandler(*a, directory=os.fspath(folder), **kw)  # noqa: E731
    server = FolderServer((host, port), handler)
    server.daemon_threads = True
    server.rate, server.faults = rate, {}
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="edgekit-serve",
                     daemon=True).start()
    return server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--rate", type=float, help="bytes per second per download (a slow link)")
    args = ap.parse_args()
    server = serve_folder(args.folder, args.port, args.host, args.rate)
    print(f"serving {args.folder} on http://{args.host}:{server.server_address[1]}/", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
