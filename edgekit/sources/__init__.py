"""Video sources (camera, file, stream, images, Pi camera), read in the way chosen when made.

Frames stay in the order the decoder gave them (OpenCV's BGR) until someone reads them as
RGB (``frame.image``). A live source (camera, stream, or a file played with
``realtime=True``) keeps only the newest frame, so the model never works on a stale one; a
file otherwise yields every frame::

    with VideoSource(parse_source("clip.mp4", realtime=True)) as src:
        while (frame := src.get()) is not None:
            ...  # frame.image, frame.index, frame.capture_ts

The modules, each depending only on those above it: ``spec`` (what a source is), ``frames``
(Frame, Handoff), ``readers`` (the Reader protocol and the OpenCV, image and picamera2
readers), ``reading`` / ``capture`` / ``lazy`` (the three ways of reading), ``source``
(VideoSource and ReadMode).
"""

from __future__ import annotations

from edgekit.sources.frames import BACKGROUND_NICE, Handoff, Frame, SourceStats, background_priority
from edgekit.sources.readers import BadFrame, LazyReader, Reader, is_lazy, open_reader, video_devices
from edgekit.sources.source import ReadMode, VideoSource
from edgekit.sources.spec import IMAGE_EXTENSIONS, Reconnect, SourceKind, SourceSpec, parse_source

__all__ = ["BACKGROUND_NICE", "BadFrame", "Handoff", "Frame", "IMAGE_EXTENSIONS", "LazyReader", "ReadMode", "Reader",
           "Reconnect", "SourceKind", "SourceSpec", "SourceStats", "VideoSource", "background_priority", "is_lazy",
           "open_reader", "parse_source", "video_devices"]
