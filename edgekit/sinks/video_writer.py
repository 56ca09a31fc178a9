"""Annotated frames: to a video file (``--save OUT.avi``) or a window (``--show``).

The file is written with OpenCV's VideoWriter (MJPG in .avi, mp4v in .mp4: codecs every
OpenCV build can write) and finalised on :meth:`VideoWriterSink.close`, so a run stopped
by SIGINT/SIGTERM still leaves a playable file.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Callable

import cv2
import numpy as np

from edgekit.errors import InputError
from edgekit.drawing import draw
from edgekit.outputs import output_file
from edgekit.results import FrameResult

__all__ = ["VideoWriterSink", "WindowSink", "gui_available", "FOURCC_BY_SUFFIX"]

FOURCC_BY_SUFFIX = {".avi": "MJPG", ".mp4": "mp4v", ".mkv": "MJPG"}


def _annotated_bgr(result: FrameResult) -> np.ndarray:
    frame = result.frame_bgr
    if frame is None:
        raise InputError(f"frame {result.index} carries no image to draw on; the loop attaches frames "
                         "to its results, a FrameResult made by hand needs captured=Frame(...)")
    return draw(frame, result.result, bgr=True)


class VideoWriterSink:
    """Writes each result's frame with its boxes drawn into a video file.

    With ``fill_gaps`` the last frame is repeated for frames the loop dropped (up to
    ``max_fill`` at a time), so the video keeps the source's timing at ``fps``. ``annotate`` draws
    a result's frame instead of :func:`edgekit.draw` (it returns the BGR image to write).

    Raises:
        InputError: the suffix has no codec here, the folder does not exist, or OpenCV
            cannot open the file for writing.
    """

    def __init__(self, path: str | os.PathLike[str], fps: float = 30.0, *, fill_gaps: bool = True,
                 max_fill: int = 150, annotate: Callable[[FrameResult], np.ndarray] | None = None) -> None:
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in FOURCC_BY_SUFFIX:
            raise InputError(f"cannot save video as {str(self.path)!r}: use a .avi (MJPG) or .mp4 (mp4v) file name")
        output_file(self.path, "video")
        if not fps or fps <= 0 or fps > 1000:
            raise InputError(f"the video frame rate must be between 0 and 1000, got {fps}")
        self.fps = float(fps)
        self._fourcc = FOURCC_BY_SUFFIX[suffix]
        self._fill, self._max_fill = fill_gaps, max_fill
        self._annotate = annotate or _annotated_bgr
        self._writer: cv2.VideoWriter | None = None
        self._size: tuple[int, int] | None = None
        self._last: np.ndarray | None = None
        self._last_index: int | None = None
        self._closed = False
        self.frames = 0

    def _open(self, width: int, height: int) -> cv2.VideoWriter:
        writer = cv2.VideoWriter(str(self.path), cv2.VideoWriter.fourcc(*self._fourcc), self.fps, (width, height))
        if not writer.isOpened():
            raise InputError(f"OpenCV cannot write {self._fourcc} video to {str(self.path)!r} (permissions? disk "
                             "full?); try another folder or a .avi name")
        self._writer, self._size = writer, (width, height)
        return writer

    def write(self, result: FrameResult) -> None:
        if self._closed:
            raise InputError(f"the video writer for {str(self.path)!r} is closed")
        image = self._annotate(result)
        writer = self._writer or self._open(image.shape[1], image.shape[0])
        if (image.shape[1], image.shape[0]) != self._size:  # a folder of images of different sizes
            image = cv2.resize(image, self._size, interpolation=cv2.INTER_AREA)
        if self._fill and self._last is not None and self._last_index is not None:
            for _ in range(min(result.index - self._last_index - 1, self._max_fill)):
                writer.write(self._last)
                self.frames += 1
        writer.write(image)
        self.frames += 1
        self._last, self._last_index = image, result.index

    def close(self) -> None:
        """Finish the file (writes its index). Safe to call more than once.

        Raises:
            InputError: the file was cut short (disk full, file size limit); OpenCV's writer
                reports no write errors, so this is found from the finished file.
        """
        self._closed = True
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.release()
            if self.frames and (why := _cut_short(self.path)):
                raise InputError(f"the video {str(self.path)!r} was cut short ({why}): only the first of its "
                                 f"{self.frames} frames will play; free disk space or raise the file size limit")

    def __enter__(self) -> VideoWriterSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cut_short(path: Path) -> str | None:
    """Why a finished video file is incomplete, or None. An AVI whose RIFF header claims more
    bytes than the file holds lost its end, index included (a file over 1 GB starts a second
    RIFF chunk, so its first one claims less, never more)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(12)
    except OSError as exc:
        return f"cannot read it back: {exc.strerror or exc}"
    if size == 0:
        return "the file is empty"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        claimed = int.from_bytes(head[4:8], "little") + 8
        if claimed > size:
            return f"only {size} bytes reached the disk, its end and index are missing"
    return None


def gui_available() -> tuple[bool, str]:
    """Whether OpenCV can open a window here, and why not."""
    gui = re.search(r"GUI:\s*(\S+)", cv2.getBuildInformation())
    if gui is None or gui.group(1).upper() == "NONE":
        return False, ("this OpenCV has no GUI support (opencv-python-headless); install opencv-python "
                       "instead of the headless package")
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        return False, "there is no display (DISPLAY and WAYLAND_DISPLAY are unset: an SSH session or a service?)"
    return True, ""


class WindowSink:
    """Shows annotated frames in a window; ``q``, Esc or closing the window sets :attr:`quit`.

    Raises:
        InputError: OpenCV has no GUI here or there is no display.
    """

    def __init__(self, title: str = "edgekit") -> None:
        ok, why = gui_available()
        if not ok:
            raise InputError(f"--show cannot open a window: {why}. Run headless (the default) and keep the "
                             "results with --save OUT.avi or --json.")
        self.title = title
        self.quit = False
        self._open = True
        cv2.namedWindow(title, cv2.WINDOW_NORMAL)

    def write(self, result: FrameResult) -> None:
        if not self._open:
            return
        cv2.imshow(self.title, _annotated_bgr(result))
        key = cv2.waitKey(1) & 0xFF
        if key in (ord("q"), 27) or cv2.getWindowProperty(self.title, cv2.WND_PROP_VISIBLE) < 1:
            self.quit = True

    def close(self) -> None:
        if self._open:
            self._open = False
            cv2.destroyWindow(self.title)
