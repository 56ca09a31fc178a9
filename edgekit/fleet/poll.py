"""Reading a device's release channel: conditional GETs that cannot miss a rewrite, the serial a
notification announced, the signature, and the replay check.

A conditional GET uses the server's ETag where it gives one, else its Last-Modified; both only
once the second the Last-Modified names was over when the server answered
(:func:`edgekit.fleet.transport.trusted_last_modified`): a rewrite within that second keeps both.
A notification carries the serial of the channel it announces; until the device holds that
serial every GET goes out unconditional.
"""

from __future__ import annotations

import json
from typing import Any

from edgekit.fleet.keys import SignatureError
from edgekit.fleet.manifest import MAX_DOCUMENT_BYTES, Channel
from edgekit.fleet.staging import Staging
from edgekit.fleet.transport import TransferError, fetch

__all__ = ["ChannelReader", "announced_serial"]


def announced_serial(payload: bytes) -> int | None:
    """The ``serial`` of a notification's JSON payload (what ``edgekit release --mqtt`` sends), or None."""
    try:
        serial = json.loads(payload.decode("utf-8")).get("serial") if payload else None
    except (UnicodeDecodeError, ValueError, AttributeError):
        return None
    return serial if isinstance(serial, int) and not isinstance(serial, bool) and serial > 0 else None


class ChannelReader:
    """GETs the channel at `url` (signatures checked with `key`; bytes counted by `staging`)."""

    def __init__(self, url: str, key: Any, staging: Staging, timeout: float) -> None:
        self.url, self.key, self.staging, self.timeout = url, key, staging, timeout
        self.etag: str | None = None
        self.modified: str | None = None
        self.wanted = 0  # the highest serial a notification announced
        self.retry = 1.0  # seconds to the next unconditional GET while behind (doubles)

    def announce(self, payload: bytes) -> None:
        """A notification arrived; remember the serial it carries, if any. It is not signed, so it
        only makes the device look (and look again) sooner; what it installs is what the signed
        channel says."""
        serial = announced_serial(payload)
        if serial is not None and serial > self.wanted:
            self.wanted, self.retry = serial, 1.0

    def behind(self, held: int) -> bool:
        """Whether a notification announced a newer serial than `held`."""
        return held < self.wanted

    def next_retry(self, ceiling: float) -> float:
        """Seconds until the next unconditional GET while behind: 1, 2, 4 ... at most `ceiling`."""
        wait, self.retry = self.retry, min(2 * self.retry, ceiling)
        return wait

    def read(self, held: int) -> Channel | None:
        """The channel when it changed since the last read (None: the server said unchanged).

        Raises:
            TransferError: unreachable or too large. SignatureError: a bad signature, or a serial
                below `held` (a replayed old channel). ManifestError: a malformed channel.
        """
        behind = self.behind(held)  # no conditional GET can be trusted to say "unchanged" then
        try:
            got = fetch(self.url, cap=MAX_DOCUMENT_BYTES, etag=None if behind else self.etag,
                        last_modified=None if behind else self.modified, timeout=self.timeout)
        except TransferError as exc:
            self.staging.received += getattr(exc, "received", 0)
            raise
        self.staging.received += got.received
        if got.data is None:
            return None
        if self.key is not None:
            self.key.verify(self.staging.signature(self.url + ".sig"), got.data, "channel.json")
        channel = Channel.parse(got.data)
        if channel.serial < held:
            raise SignatureError(f"channel.json serial {channel.serial} is older than {held} seen "
                                 "before; a replayed old channel is refused")
        self.etag, self.modified = got.etag, got.last_modified  # only once it verified
        return channel
