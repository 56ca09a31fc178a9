"""What a source is: a camera, a video file, a stream URL, image files or the Pi camera.

:func:`parse_source` tells them apart from what the user typed; :class:`SourceSpec` is the
answer, immutable, and says whether frames arrive on their own clock (``live``) and whether a
lost source is opened again (``reconnects``).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from pathlib import Path

from edgekit.errors import SourceError

__all__ = ["IMAGE_EXTENSIONS", "Reconnect", "SourceKind", "SourceSpec", "parse_source"]

IMAGE_EXTENSIONS = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".gif"})
_STREAM_SCHEMES = ("rtsp://", "rtsps://", "rtmp://", "http://", "https://", "udp://", "tcp://", "srt://")


class SourceKind(str, enum.Enum):
    CAMERA = "camera"  # OpenCV device: an index or /dev/videoN
    FILE = "file"  # a video file
    STREAM = "stream"  # RTSP / HTTP / ... URL
    IMAGES = "images"  # one image file, a folder or a glob
    PICAMERA = "picamera"  # Raspberry Pi camera through picamera2


@dataclass(frozen=True)
class SourceSpec:
    """Where frames come from. ``width``/``height``/``fps`` are requests for cameras; for a
    file ``fps`` overrides its own rate when ``realtime`` plays it like a camera."""

    kind: SourceKind
    target: str | int = 0
    width: int | None = None
    height: int | None = None
    fps: float | None = None
    realtime: bool = False
    images: tuple[str, ...] = ()  # the files of an IMAGES source, in order

    @property
    def live(self) -> bool:
        """True when frames arrive on their own clock and only the newest matters."""
        return self.kind in (SourceKind.CAMERA, SourceKind.STREAM, SourceKind.PICAMERA) or (
            self.kind is SourceKind.FILE and self.realtime)

    @property
    def reconnects(self) -> bool:
        """True when a lost source is opened again (cameras and streams; a file just ends)."""
        return self.kind in (SourceKind.CAMERA, SourceKind.STREAM, SourceKind.PICAMERA)

    @property
    def paced(self) -> bool:
        """True for a file played like a camera: its frames fall due on the file's clock."""
        return self.realtime and self.kind is SourceKind.FILE

    def __str__(self) -> str:
        if self.kind is SourceKind.IMAGES:
            return f"{len(self.images)} image(s) from {self.target}"
        return f"{self.kind.value} {self.target}" + (" (realtime)" if self.realtime else "")


def parse_source(source: str | int | os.PathLike[str], *, width: int | None = None, height: int | None = None,
                 fps: float | None = None, realtime: bool = False) -> SourceSpec:
    """Tell what ``source`` is: a camera index or /dev/videoN, a URL, an image, a folder or glob of
    images, or a video file.

    Raises:
        SourceError: the path does not exist, or the folder/glob holds no image.
    """

    def spec(kind: SourceKind, target: str | int) -> SourceSpec:
        return SourceSpec(kind, target, width=width, height=height, fps=fps, realtime=realtime)

    if isinstance(source, int) or (isinstance(source, str) and source.isdigit()):
        return spec(SourceKind.CAMERA, int(source))
    text = os.fspath(source)
    if text.startswith("/dev/video"):
        return spec(SourceKind.CAMERA, text)
    if text.lower().startswith(_STREAM_SCHEMES):
        return spec(SourceKind.STREAM, text)
    p = Path(text)
    if any(ch in text for ch in "*?[") and not p.exists():
        import glob  # only for a pattern (0.4 ms of every start-up otherwise)

        return _images(text, sorted(glob.glob(text)))
    if p.is_dir():
        return _images(text, sorted(str(f) for f in p.iterdir() if f.suffix.lower() in IMAGE_EXTENSIONS))
    if not p.exists():
        raise SourceError(f"source {text!r} does not exist. Pass a video or image file, a folder of images, "
                          "a glob like 'photos/*.jpg', an rtsp:// or http:// URL, or --camera N.")
    if p.suffix.lower() in IMAGE_EXTENSIONS:
        return _images(text, [text])
    return spec(SourceKind.FILE, text)


def _images(target: str, files: list[str]) -> SourceSpec:
    files = [f for f in files if Path(f).is_file()]
    if not files:
        raise SourceError(f"no images in {target!r} (looked for {', '.join(sorted(IMAGE_EXTENSIONS))}). "
                          "Check the folder or the pattern (quote it so the shell does not expand it).")
    return SourceSpec(SourceKind.IMAGES, target, images=tuple(files))


@dataclass(frozen=True)
class Reconnect:
    """Backoff for reopening a camera or stream that stopped delivering frames."""

    first_delay: float = 0.5
    max_delay: float = 8.0
    give_up_after: float | None = None  # seconds of trying; None keeps trying until stopped
