"""The former name of :mod:`edgekit.sources` (video sources and their frames), kept so code
written against it runs unchanged. New code imports from :mod:`edgekit.sources`."""

from __future__ import annotations

from edgekit.sources import (IMAGE_EXTENSIONS, BadFrame, Handoff, Frame, LazyReader, ReadMode, Reader, Reconnect,
                             SourceKind, SourceSpec, SourceStats, VideoSource, background_priority, open_reader,
                             parse_source)

__all__ = ["BadFrame", "Handoff", "Frame", "IMAGE_EXTENSIONS", "LazyReader", "ReadMode", "Reader", "Reconnect",
           "SourceKind", "SourceSpec", "SourceStats", "VideoSource", "background_priority", "open_reader",
           "parse_source"]
