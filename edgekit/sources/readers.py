"""The readers behind :class:`~edgekit.sources.VideoSource`: OpenCV, image files, picamera2.

Each one opens in its constructor (raising :class:`SourceError` with what to do), then
``read()`` gives the next frame (RGB, or BGR where the reader says ``bgr``), None at the end,
or raises :class:`BadFrame` for a frame that cannot be decoded (the source goes on).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Protocol, TypeGuard

import cv2
import numpy as np

from edgekit.errors import InputError, SourceError
from edgekit.preprocess import load_image
from edgekit.sources.spec import SourceKind, SourceSpec

__all__ = ["BadFrame", "Reader", "LazyReader", "is_lazy", "OpenCVReader", "ImageFilesReader", "PiCameraReader",
           "open_reader", "video_devices"]

# A file whose reads keep failing before its last frame is damaged beyond this many frames: stop.
MAX_BAD_IN_A_ROW = 25
STREAM_TIMEOUT_MS = 5000
SINGLE_THREAD_DECODE_AREA = 1280 * 720  # video files up to this size are decoded on one thread


class BadFrame(Exception):
    """One frame could not be decoded; the source continues."""


class Reader(Protocol):
    """What a :class:`~edgekit.sources.VideoSource` reads from; :func:`open_reader` makes them,
    and a test or an app may pass its own ``opener``."""

    fps: float | None  # the rate the source reports, if any
    frames: int | None  # how many a file or folder holds; None for live sources
    bgr: bool  # read() gives OpenCV's BGR order (the loop converts only what it needs); False: RGB
    lazy: bool  # a LazyReader that wants its frames grabbed now and decoded later (see LazyReader)

    def read(self) -> np.ndarray | None: ...  # the next frame; None at the end; raises BadFrame

    def skip(self) -> bool: ...  # pass one frame without decoding it; False at the end

    def close(self) -> None: ...


class LazyReader(Reader, Protocol):
    """A live reader that can take a frame now and decode it later (``lazy = True``), as a V4L2
    camera does (dequeue a buffer, convert it on retrieve): a VideoSource then decodes only the
    frames the model will see, in the consumer's thread."""

    def grab(self) -> bool: ...  # take the next frame without decoding it; False at the end

    def retrieve(self) -> np.ndarray: ...  # decode the last grabbed frame; raises BadFrame


def is_lazy(reader: Reader) -> TypeGuard[LazyReader]:
    """True when ``reader`` declares itself a :class:`LazyReader`."""
    return reader.lazy


def video_devices() -> list[str]:
    """The V4L2 video devices present (/dev/video*), in numeric order."""
    import glob  # only here (0.4 ms of every start-up otherwise)

    found = glob.glob("/dev/video*")
    return sorted(found, key=lambda p: (len(p), p))


def _camera_error(target: str | int) -> SourceError:
    devices = video_devices()
    if devices:
        found = f"video devices found: {', '.join(devices)}. Pass --camera with one of their numbers"
    else:
        found = ("no video devices found (/dev/video* is empty): is the camera plugged in? "
                 "A Raspberry Pi camera module is read with --picamera")
    name = f"/dev/video{target}" if isinstance(target, int) else target
    return SourceError(f"cannot open camera {target} ({name}); {found}. "
                       "Another program may also be holding it (check with `fuser /dev/video*`).")


def _to_bgr(image: Any) -> np.ndarray:
    """OpenCV's frame as 3-channel BGR uint8 (the loop converts to RGB only what it needs)."""
    if image is None or not isinstance(image, np.ndarray) or image.size == 0:
        raise BadFrame("the decoder returned no image")
    if image.ndim == 2 and image.dtype == np.uint8:
        return cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    if image.ndim == 3 and image.shape[2] == 4 and image.dtype == np.uint8:
        return cv2.cvtColor(image, cv2.COLOR_BGRA2BGR)
    if image.ndim == 3 and image.shape[2] == 3 and image.dtype == np.uint8:
        return image
    raise BadFrame(f"unexpected frame {image.dtype} {image.shape}")


class OpenCVReader:
    """A camera, video file or stream URL through cv2.VideoCapture. Frames are BGR.

    A file played like a camera (``realtime``) is read lazily: :meth:`grab` takes each frame
    as it falls due and only the frames the model will see are decoded, by :meth:`retrieve`.
    That is how a V4L2 camera works (a frame is dequeued at once and converted when
    retrieved), and an MJPG file is then read as one: its JPEG packets are taken undecoded
    (0.02 ms each) and decoded by libjpeg on retrieve (1.3 ms at 640x480), so frames the
    model never sees cost nothing. Other codecs decode on grab and convert on retrieve.
    """

    bgr = True

    def __init__(self, spec: SourceSpec) -> None:
        self._spec = spec
        self._file = spec.kind is SourceKind.FILE
        if spec.kind is SourceKind.CAMERA:
            api = cv2.CAP_V4L2 if sys.platform.startswith("linux") else cv2.CAP_ANY
            self._cap = cv2.VideoCapture(spec.target, api)
            if not self._cap.isOpened():
                raise _camera_error(spec.target)
            self._request(spec)
        elif spec.kind is SourceKind.STREAM:
            params = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, STREAM_TIMEOUT_MS, cv2.CAP_PROP_READ_TIMEOUT_MSEC,
                      STREAM_TIMEOUT_MS]
            self._cap = cv2.VideoCapture(str(spec.target), cv2.CAP_FFMPEG, params)
            if not self._cap.isOpened():
                raise SourceError(f"cannot open stream {spec.target!r} within {STREAM_TIMEOUT_MS / 1000:.0f} s. "
                                  "Check the URL, the credentials in it and that the camera is reachable "
                                  "(try it in `ffplay URL`).")
        else:
            self._cap = self._open_file(str(spec.target))
            self.lazy = spec.realtime
            if self.lazy and _fourcc(self._cap) == "MJPG" and self._raw_jpeg_decodes(str(spec.target)):
                self._raw = True
        fps = self._cap.get(cv2.CAP_PROP_FPS)
        self.fps: float | None = float(fps) if fps and 0 < fps < 1000 else None
        self.frames: int | None = int(self._cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0) or None if self._file else None
        self._bad_in_a_row = 0

    lazy = False  # see the class doc; only a realtime file here
    _raw = False  # an MJPG file read as undecoded JPEG packets

    @staticmethod
    def _open_file(path: str, raw: bool = False) -> Any:
        cap = cv2.VideoCapture(path)
        if not cap.isOpened():
            raise SourceError(f"cannot read video file {path!r}: OpenCV found no decoder for it or "
                              "it is damaged. Check it plays (`ffprobe FILE`), or convert it to MP4/H.264.")
        area = cap.get(cv2.CAP_PROP_FRAME_WIDTH) * cap.get(cv2.CAP_PROP_FRAME_HEIGHT)
        threads_prop = getattr(cv2, "CAP_PROP_N_THREADS", None)  # OpenCV 4.7+; Debian bookworm has 4.6
        if 0 < area <= SINGLE_THREAD_DECODE_AREA and cap.getBackendName() == "FFMPEG" and threads_prop is not None:
            # Small frames decode with least CPU on one thread: FFmpeg's decoder threads cost more
            # than they save while the model keeps every core busy (640x480 MJPG: 1.23 against
            # 1.34-1.46 ms of CPU per frame). The setting only takes effect when opening; an
            # OpenCV without it decodes the same frames on FFmpeg's default threads.
            single = cv2.VideoCapture(path, cv2.CAP_FFMPEG, [threads_prop, 1])
            if single.isOpened():
                cap.release()
                cap = single
        if raw and not cap.set(cv2.CAP_PROP_FORMAT, -1):
            cap.release()
            return None
        return cap

    def _raw_jpeg_decodes(self, path: str) -> bool:
        """Open ``path`` a second time as undecoded packets and keep it if libjpeg decodes the first
        one (some MJPG files leave out the Huffman tables, which only FFmpeg fills in)."""
        raw = self._open_file(path, raw=True)
        if raw is None:
            return False
        ok, packet = raw.read()
        image = cv2.imdecode(packet, cv2.IMREAD_COLOR) if ok and packet is not None and packet.size else None
        if image is None:
            raw.release()
            return False
        raw.release()
        self._cap.release()
        self._cap = self._open_file(path, raw=True)
        return self._cap is not None

    def grab(self) -> bool:
        return bool(self._cap.grab())

    def retrieve(self) -> np.ndarray:
        ok, data = self._cap.retrieve()
        if not ok or data is None:
            raise BadFrame("the grabbed frame could not be retrieved")
        if self._raw:
            return _to_bgr(cv2.imdecode(data, cv2.IMREAD_COLOR))  # None if the JPEG does not decode
        return _to_bgr(data)

    def _request(self, spec: SourceSpec) -> None:
        for prop, value in ((cv2.CAP_PROP_FRAME_WIDTH, spec.width), (cv2.CAP_PROP_FRAME_HEIGHT, spec.height),
                            (cv2.CAP_PROP_FPS, spec.fps)):
            if value:
                self._cap.set(prop, float(value))
        # Our own thread drains the camera; a deep driver queue would only hold stale frames.
        self._cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)

    def read(self) -> np.ndarray | None:
        image: np.ndarray | None
        ok, image = self._cap.read()
        if ok and self._raw:
            image = cv2.imdecode(image, cv2.IMREAD_COLOR) if image is not None and image.size else None
            if image is None:
                raise BadFrame("a JPEG frame of the video could not be decoded")
        if not ok:
            pos = int(self._cap.get(cv2.CAP_PROP_POS_FRAMES) or 0)
            if self.frames and pos < self.frames - 1 and self._bad_in_a_row < MAX_BAD_IN_A_ROW:
                self._bad_in_a_row += 1
                raise BadFrame(f"frame {pos} of {self.frames} could not be decoded")
            return None
        self._bad_in_a_row = 0
        return _to_bgr(image)

    def skip(self) -> bool:
        return bool(self._cap.grab())

    def close(self) -> None:
        self._cap.release()


class ImageFilesReader:
    """The images of an IMAGES source, one frame each (RGB); an unreadable image is a BadFrame."""

    fps: float | None = None
    bgr = False
    lazy = False

    def __init__(self, spec: SourceSpec) -> None:
        self._files = list(spec.images)
        self.frames: int | None = len(self._files)
        self._next = 0

    def read(self) -> np.ndarray | None:
        if self._next >= len(self._files):
            return None
        path = self._files[self._next]
        self._next += 1
        try:
            return load_image(path)
        except InputError as exc:
            raise BadFrame(str(exc)) from None

    def skip(self) -> bool:
        self._next += 1
        return self._next <= len(self._files)

    def close(self) -> None:
        self._next = len(self._files)


class PiCameraReader:
    """A Raspberry Pi camera module through picamera2 (imported only when asked for). Frames are RGB."""

    bgr = False
    lazy = False

    def __init__(self, spec: SourceSpec) -> None:
        try:
            from picamera2 import Picamera2
        except ImportError:
            raise SourceError("--picamera needs picamera2, which is not installed here. On Raspberry Pi OS: "
                              "`sudo apt install -y python3-picamera2` and create the virtualenv with "
                              "--system-site-packages. For a USB camera use --camera N.") from None
        size = (spec.width or 640, spec.height or 480)
        self.fps: float | None = spec.fps or 30.0
        self.frames: int | None = None
        try:
            self._cam = Picamera2()
            # libcamera names formats by word order: "BGR888" is R, G, B bytes in memory, i.e. RGB.
            config = self._cam.create_video_configuration(main={"size": size, "format": "BGR888"},
                                                          controls={"FrameRate": self.fps})
            self._cam.configure(config)
            self._cam.start()
        except Exception as exc:  # noqa: BLE001 - picamera2 raises RuntimeError/IndexError/OSError
            raise SourceError(f"cannot start the Pi camera: {exc}. Check the ribbon cable and that "
                              "`rpicam-hello --list-cameras` lists it.") from None

    def read(self) -> np.ndarray | None:
        try:
            image = self._cam.capture_array("main")
        except Exception:  # noqa: BLE001 - a lost camera: the source reopens it
            return None
        return np.ascontiguousarray(image[:, :, :3])

    def skip(self) -> bool:
        return self.read() is not None

    def close(self) -> None:
        try:
            self._cam.stop()
        finally:
            self._cam.close()


def _fourcc(cap: Any) -> str:
    code = int(cap.get(cv2.CAP_PROP_FOURCC) or 0)
    return code.to_bytes(4, "little").decode("ascii", "replace") if code > 0 else ""


def open_reader(spec: SourceSpec) -> Reader:
    """The reader for ``spec``, opened.

    Raises:
        SourceError: it cannot be opened.
    """
    if spec.kind is SourceKind.IMAGES:
        return ImageFilesReader(spec)
    if spec.kind is SourceKind.PICAMERA:
        return PiCameraReader(spec)
    if spec.kind is SourceKind.FILE and not os.path.isfile(str(spec.target)):
        raise SourceError(f"video file {spec.target!r} does not exist")
    return OpenCVReader(spec)
