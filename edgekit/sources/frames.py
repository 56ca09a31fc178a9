"""Frames and the hand-over between threads: :class:`Frame`, :class:`Handoff`, and the CPU
priority of work that only has to stay ahead of the model."""

from __future__ import annotations

import os
import sys
import threading
from collections import deque
from typing import Generic, NamedTuple, TypeVar

import cv2
import numpy as np

__all__ = ["BACKGROUND_NICE", "Handoff", "Frame", "SourceStats", "background_priority"]

T = TypeVar("T")
BACKGROUND_NICE = 19


def background_priority() -> None:
    """Give the calling thread the lowest CPU priority (Linux; elsewhere nothing).

    For work that only has to stay ahead of the model, such as reading a file frame by
    frame: it then runs in the gaps the interpreter's threads leave instead of preempting
    them mid-layer (measured on 2 cores with SSD MobileNet: 0.84 -> 0.89 of the bare
    interpreter's rate). Never for a live source, whose newest frame must be ready at once.
    """
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)  # Linux: per thread
        except OSError:
            pass


class Frame:
    """One captured frame. ``index`` counts the frames the source produced (gaps: dropped).

    ``image`` is RGB uint8 (H, W, 3). A frame OpenCV decoded is kept in OpenCV's BGR order
    (``bgr=True``) and converted the first time ``image`` is read: the loop resizes the BGR
    pixels and swaps the channels of the small result only, so a frame nobody looks at is
    never converted whole (0.5 ms of CPU for 640x480, 3% of an SSD MobileNet inference).
    """

    __slots__ = ("index", "capture_ts", "timestamp", "capture_ms", "_decoded", "_rgb", "_bgr")

    def __init__(self, index: int, image: np.ndarray, capture_ts: float, timestamp: float, capture_ms: float,
                 *, bgr: bool = False) -> None:
        self.index = index
        self.capture_ts = capture_ts  # time.perf_counter() when it was ready (a realtime file: when it was due)
        self.timestamp = timestamp  # time.time() at the same moment
        self.capture_ms = capture_ms  # reading and decoding it
        self._decoded = image  # in the order read: _rgb or _bgr is it, the other None until converted
        self._rgb: np.ndarray | None = None if bgr else image
        self._bgr: np.ndarray | None = image if bgr else None

    @property
    def image(self) -> np.ndarray:
        """The RGB pixels (converted from BGR once, on first use)."""
        if self._rgb is None:
            self._rgb = cv2.cvtColor(self._decoded, cv2.COLOR_BGR2RGB)
        return self._rgb

    @property
    def pixels(self) -> tuple[np.ndarray, bool]:
        """The pixels as decoded and whether they are BGR, without converting anything."""
        return (self._rgb, False) if self._rgb is not None else (self._decoded, True)

    @property
    def bgr(self) -> np.ndarray:
        """The pixels in OpenCV's BGR order (for cv2.imshow and VideoWriter)."""
        if self._bgr is None:
            self._bgr = cv2.cvtColor(self._decoded, cv2.COLOR_RGB2BGR)
        return self._bgr

    @property
    def shape(self) -> tuple[int, ...]:
        return self._decoded.shape

    def __repr__(self) -> str:
        return f"Frame(index={self.index}, shape={self.shape}, capture_ts={self.capture_ts:.3f})"


class SourceStats(NamedTuple):
    captured: int
    dropped: int
    undecodable: int
    reopens: int


class Handoff(Generic[T]):
    """Hands items from one thread to another: newest-only (an unread item is replaced and
    counted in :attr:`dropped`) or a bounded FIFO (``put`` waits for room)."""

    def __init__(self, capacity: int = 1, keep_latest: bool = False) -> None:
        self._items: deque[T] = deque()
        self._capacity = 1 if keep_latest else max(1, capacity)
        self._keep_latest = keep_latest
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0

    def put(self, item: T) -> bool:
        """Hand over ``item``; False (and nothing done) once the channel is closed."""
        with self._cond:
            if self._keep_latest:
                self.dropped += len(self._items)  # the unread item is stale now
                self._items.clear()
            else:
                while len(self._items) >= self._capacity and not self._closed:
                    self._cond.wait()
            if self._closed:
                return False
            self._items.append(item)
            self._cond.notify_all()
            return True

    def get(self, timeout: float | None = None) -> T | None:
        """The next item; None when the channel is closed and empty, or after ``timeout`` seconds."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items or self._closed, timeout) or not self._items:
                return None
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def close(self, discard: bool = False) -> None:
        """No more puts; ``get`` drains what is left (nothing with ``discard``) then returns None."""
        with self._cond:
            self._closed = True
            if discard:
                self._items.clear()
            self._cond.notify_all()

    @property
    def done(self) -> bool:
        """Closed and drained."""
        with self._cond:
            return self._closed and not self._items
