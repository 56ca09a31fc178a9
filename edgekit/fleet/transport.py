"""Reading a release channel over HTTP(S) or from a folder: conditional GETs and resumable,
size-capped downloads. Standard library only (urllib), so a device needs nothing more.

An S3 bucket serves a channel through its HTTPS endpoint (public read, or a CDN in front);
nothing edgekit-specific runs on the server.
"""

from __future__ import annotations

import email.utils
import http.client
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from edgekit.errors import EdgekitError

__all__ = ["TransferError", "TooLarge", "Fetched", "fetch", "download", "join_url", "url_kind"]

CHUNK = 64 * 1024


class TransferError(EdgekitError):
    """The server could not be reached or broke off; what arrived is kept for a resume."""

    received: int = 0  # the bytes this try brought (the caller counts them)


class TooLarge(TransferError):
    """The server sent more bytes than the signed manifest allows; what arrived is deleted."""


@dataclass(frozen=True)
class Fetched:
    """A small document, or ``data=None`` when the server said it had not changed (304).

    ``last_modified`` is kept only when it can be trusted for the next conditional GET: servers
    give it to the second, so a document rewritten within the second it was fetched in keeps the
    same Last-Modified, and an If-Modified-Since with it would be answered 304 for the new one.
    It is trusted only when the server's clock (its Date) had moved past that second when it
    answered; so is the ETag (nginx makes it of the size and the mtime in seconds), which is
    otherwise preferred. Without a validator the next GET is unconditional: one small document."""

    data: bytes | None
    etag: str | None
    last_modified: str | None
    received: int  # bytes that came over the wire


def _http_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return email.utils.parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def trusted_last_modified(last_modified: str | None, date: str | None) -> str | None:
    """`last_modified` when the answer's Date lies in a later second (a later rewrite then gets a
    later Last-Modified), else None: the next GET goes out unconditional."""
    lm, now = _http_time(last_modified), _http_time(date)
    return last_modified if lm is not None and now is not None and now >= lm + 1 else None


def url_kind(url: str) -> str:
    """'http', 'https' or 'file'.

    Raises:
        TransferError: any other scheme.
    """
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https", "file"):
        raise TransferError(f"a channel is an https://, http:// or file:// URL, got {url!r}")
    return scheme


def join_url(base: str, relative: str) -> str:
    return urllib.parse.urljoin(base, relative)


def _file_path(url: str) -> Path:
    return Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))


def fetch(url: str, *, cap: int, etag: str | None = None, last_modified: str | None = None,
          timeout: float = 10.0) -> Fetched:
    """GET a small document (at most `cap` bytes) unless it is unchanged since `etag`/`last_modified`.

    Raises:
        TransferError: unreachable, an HTTP error, or more than `cap` bytes.
    """
    if url_kind(url) == "file":
        path = _file_path(url)
        try:
            st = path.stat()
            tag = f"{st.st_size}-{st.st_mtime_ns}"
            if tag == etag:
                return Fetched(None, etag, None, 0)
            if st.st_size > cap:
                raise TooLarge(f"{url} has {st.st_size} bytes, more than {cap}")
            data = path.read_bytes()
        except OSError as exc:
            raise TransferError(f"cannot read {url}: {exc.strerror or exc}") from None
        return Fetched(data[:cap + 1] if len(data) > cap else data, tag, None, len(data))
    headers = {"Cache-Control": "no-cache"}
    if etag:
        headers["If-None-Match"] = etag
    elif last_modified:  # an ETag decides alone (RFC 9110 13.1.3): a Last-Modified is only to the second
        headers["If-Modified-Since"] = last_modified
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as resp:
            data = resp.read(cap + 1)
            if len(data) > cap:
                too = TooLarge(f"{url} is larger than {cap} bytes")
                too.received = len(data)  # refused, but it came over the wire
                raise too
            stamp = resp.headers.get("Last-Modified")
            modified = trusted_last_modified(stamp, resp.headers.get("Date"))
            # nginx's ETag is size and mtime in seconds: one from a second not yet over is no better
            etag_now: str | None = resp.headers.get("ETag") if stamp is None or modified is not None else None
            return Fetched(data, etag_now, modified, len(data))
    except urllib.error.HTTPError as exc:
        if exc.code == 304:
            return Fetched(None, etag, last_modified, 0)
        raise TransferError(f"GET {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise TransferError(f"GET {url}: {getattr(exc, 'reason', exc)}") from None


def download(url: str, part: Path, size: int, *, timeout: float = 10.0, stop: threading.Event | None = None) -> int:
    """Bring `part` up to `size` bytes from `url`, resuming after what it already holds (an HTTP
    Range request; a server that ignores it sends everything and the file starts over).

    Returns the bytes received. Raises:
        TooLarge: the server sends more than `size` bytes (`part` is deleted).
        TransferError: the server is unreachable or breaks off, or `stop` was set (a closing
            device); `part` keeps what arrived, and the next call resumes there.
    """
    have = part.stat().st_size if part.exists() else 0
    if have > size:
        part.unlink()
        have = 0
    if have == size:
        return 0
    if url_kind(url) == "file":
        return _copy_file(_file_path(url), part, have, size)
    headers = {"Range": f"bytes={have}-"} if have else {}
    received = 0
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as resp:
            if have and resp.status != 206:
                have = 0  # no Range support: start over
            elif have and not (resp.headers.get("Content-Range") or "").startswith(f"bytes {have}-"):
                raise TransferError(f"GET {url}: the server answered the range {have}- with "
                                    f"{resp.headers.get('Content-Range')!r}")
            with open(part, "ab" if have else "wb") as f:
                while chunk := resp.read(CHUNK):
                    if stop is not None and stop.is_set():
                        raise TransferError(f"GET {url}: stopped after {have} of {size} bytes; resuming next time")
                    received += len(chunk)
                    if have + len(chunk) > size:
                        raise TooLarge(f"{url} sends more than the {size} bytes its manifest allows")
                    f.write(chunk)
                    have += len(chunk)
    except TooLarge:
        part.unlink(missing_ok=True)
        raise
    except TransferError:
        raise
    except urllib.error.HTTPError as exc:
        raise TransferError(f"GET {url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise TransferError(f"GET {url} broke off after {have} of {size} bytes: "
                            f"{getattr(exc, 'reason', exc)}") from None
    if have < size:
        raise TransferError(f"GET {url} ended after {have} of {size} bytes (truncated); resuming next time")
    return received


def _copy_file(src: Path, part: Path, have: int, size: int) -> int:
    try:
        with open(src, "rb") as s, open(part, "ab" if have else "wb") as d:
            s.seek(have)
            data = s.read(size - have + 1)
    except OSError as exc:
        raise TransferError(f"cannot read {src}: {exc.strerror or exc}") from None
    if len(data) > size - have:
        part.unlink(missing_ok=True)
        raise TooLarge(f"{src} holds more than the {size} bytes its manifest allows")
    with open(part, "ab") as d:
        d.write(data)
    if have + len(data) < size:
        raise TransferError(f"{src} holds {have + len(data)} of {size} bytes (truncated)")
    return len(data)
