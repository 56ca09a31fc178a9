"""A channel rewritten within the second it was last fetched in is never missed: a plain static
server (Python's http.server: Last-Modified to the second, no ETag) answers an If-Modified-Since
with 304 for it, so the device does not trust such a Last-Modified, and a notification's serial
makes it fetch without conditions until it holds that serial."""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

from edgekit.fleet.follower import Outcome
from edgekit.fleet.release import write_release
from edgekit.fleet.transport import fetch, trusted_last_modified
from tests.edgekit.fleet.conftest import Device, Kit, wait_until


@pytest.fixture()
def plain_server(kit: Kit) -> Iterator[str]:
    """Python's own static server over the kit's folder (Last-Modified to the second, no ETag)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(kit.www))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class NginxLike(http.server.SimpleHTTPRequestHandler):
    """A static server whose ETag is nginx's: the size and the mtime in whole seconds, in hex."""

    def log_message(self, *args: object) -> None:
        pass

    def send_head(self):  # type: ignore[no-untyped-def]
        st = os.stat(self.translate_path(self.path))
        tag = f'"{int(st.st_mtime):x}-{st.st_size:x}"'
        if self.headers.get("If-None-Match") == tag:
            self.send_response(304)
            self.end_headers()
            return None
        self._tag = tag
        return super().send_head()

    def end_headers(self) -> None:
        if getattr(self, "_tag", None):
            self.send_header("ETag", self._tag)
        super().end_headers()


@pytest.fixture()
def nginx_like(kit: Kit) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(NginxLike, directory=str(kit.www)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_etag_of_whole_seconds_is_not_trusted_within_its_second(kit: Kit, nginx_like: str) -> None:
    doc = kit.www / "nginx.json"
    url = f"{nginx_like}/nginx.json"
    second = start_of_a_second()
    doc.write_text('{"serial": 1}')
    os.utime(doc, (second + 0.01, second + 0.01))
    first = fetch(url, cap=1000)
    assert first.data == b'{"serial": 1}' and first.etag is None and first.last_modified is None
    doc.write_text('{"serial": 2}')  # same size, same second: the same nginx ETag
    os.utime(doc, (second + 0.02, second + 0.02))
    assert fetch(url, cap=1000, etag=first.etag, last_modified=first.last_modified).data == b'{"serial": 2}'
    assert time.time() < second + 1, "the test ran past the second it depends on"
    old = time.time() - 10
    os.utime(doc, (old, old))  # a document whose second is long over: its ETag is kept and answered 304
    again = fetch(url, cap=1000)
    assert again.etag is not None and fetch(url, cap=1000, etag=again.etag).data is None


def start_of_a_second() -> float:
    """Sleep into the first tenth of a wall-clock second; return that second."""
    while time.time() % 1 > 0.1:
        time.sleep(0.02)
    return float(int(time.time()))


@pytest.mark.parametrize(("modified", "date", "trusted"), [
    ("Tue, 01 Dec 2026 20:00:00 GMT", "Tue, 01 Dec 2026 20:00:00 GMT", False),  # fetched in the same second
    ("Tue, 01 Dec 2026 20:00:00 GMT", "Tue, 01 Dec 2026 20:00:01 GMT", True),
    ("Tue, 01 Dec 2026 20:00:00 GMT", None, False),  # no Date: nothing says the second is over
    ("not a date", "Tue, 01 Dec 2026 20:00:01 GMT", False),
    (None, "Tue, 01 Dec 2026 20:00:01 GMT", False),
])
def test_a_last_modified_is_trusted_only_once_its_second_is_over(modified: str | None, date: str | None,
                                                                 trusted: bool) -> None:
    assert trusted_last_modified(modified, date) == (modified if trusted else None)


def test_a_document_rewritten_within_the_second_is_fetched_again(kit: Kit, plain_server: str) -> None:
    doc = kit.www / "same-second.json"
    url = f"{plain_server}/same-second.json"
    second = start_of_a_second()
    doc.write_text('{"serial": 1}')
    os.utime(doc, (second + 0.01, second + 0.01))
    first = fetch(url, cap=1000)
    assert first.etag is None and first.data == b'{"serial": 1}'
    doc.write_text('{"serial": 2}')  # the same second: the same Last-Modified
    os.utime(doc, (second + 0.02, second + 0.02))
    second_fetch = fetch(url, cap=1000, etag=first.etag, last_modified=first.last_modified)
    assert time.time() < second + 1, "the test ran past the second it depends on"
    assert second_fetch.data == b'{"serial": 2}'
    # what the same server answers when the Last-Modified is sent anyway: the miss the issue saw
    stale = fetch(url, cap=1000, last_modified=time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(second)))
    assert stale.data is None


def test_a_notified_serial_is_fetched_without_conditions_until_it_arrives(kit: Kit, plain_server: str,
                                                                          tmp_path: Path) -> None:
    folder = kit.www / "notified"
    write_release(kit.model, 1, folder, kit.key, golden=kit.golden)
    past = time.time() - 10  # both writes carry one old second: a trusted Last-Modified says "unchanged"
    os.utime(folder / "channel.json", (past, past))
    settings = replace(kit.settings("notified", poll_seconds=3600.0), channel=f"{plain_server}/notified/channel.json")
    d = Device("notified-dev", tmp_path / "dev", settings, kit.images).start()
    try:
        assert d.follower.reader.modified is not None  # the first fetch's Last-Modified was trusted
        channel = write_release(kit.model, 2, folder, kit.key).channel
        os.utime(folder / "channel.json", (past, past))
        assert d.follower.sync() is Outcome.UNCHANGED  # without the serial, the 304 wins
        d.follower.notify(b"not json")  # a notification without a serial only wakes it
        assert not d.follower.behind and d.follower.sync() is Outcome.UNCHANGED
        d.follower.notify(json.dumps({"channel": "notified", "serial": channel.serial}).encode())
        assert d.follower.behind  # the follower's own thread, woken, fetches it now
        wait_until(lambda: d.serving == 2, what="the notified version to serve")
        assert not d.follower.behind and d.follower.state.serial == channel.serial
    finally:
        d.stop()
