"""annotated.avi of ``edgekit demo``: what the inspection cell decided, frame by frame, where one can see it.

A stage of the cell (:class:`edgekit.inspect.stage.Stage`): each judged frame is drawn with the counting
line, the tracked parts with their track ids ("#3 part 0.91"), the defects the detector found and, from
the frame a part crosses the line, its verdict ("#3 FAIL missing_hole", green or red) on the part for
``hold`` frames. Everything comes from what the cell hands its stages (the tracked parts and the
verdicts of the judged frame, :class:`~edgekit.inspect.stage.JudgedFrame`), so the video shows
the verdicts of the table in summary.md.
Drawing is :mod:`edgekit.drawing`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.drawing import draw, draw_counting_line, draw_verdict
from edgekit.errors import InputError
from edgekit.inspect.verdict import Verdict
from edgekit.sinks.video_writer import VideoWriterSink
from edgekit.track import CountingLine

if TYPE_CHECKING:
    from edgekit.inspect.parts import PartsFrame, PartVerdict
    from edgekit.inspect.stage import JudgedFrame, StageContext
    from edgekit.results import FrameResult

__all__ = ["VerdictVideo", "verdict_text"]

HOLD_SECONDS = 1.5  # a verdict stays on its part this long after the crossing


def verdict_text(verdict: PartVerdict) -> str:
    """What is written on a judged part: "#3 PASS" or "#3 FAIL missing_hole, dent"."""
    reasons = f" {', '.join(verdict.reasons)}" if verdict.reasons else ""
    return f"#{verdict.track_id} {verdict.outcome.value}{reasons}"


class VerdictVideo:
    """Writes the cell's judged frames, annotated, to ``path`` (MJPG .avi); a stage of the cell
    (``Cell(config, stages=[VerdictVideo(path, fps)])``). The file is made when the cell opens it.

    Args:
        path: the video file.
        fps: the source's frame rate (frames the loop dropped are filled with the last one).

    Raises:
        InputError: (on open) the path cannot take a video (see :class:`~edgekit.sinks.VideoWriterSink`).
    """

    def __init__(self, path: str | Path, fps: float) -> None:
        self.path, self.fps = Path(path), fps
        self.line: CountingLine | None = None
        self.hold = max(1, round(HOLD_SECONDS * fps))
        self.shown: dict[int, tuple[PartVerdict, int]] = {}  # track id -> verdict, last frame to show it
        self.judged = 0  # verdicts drawn
        self._parts: PartsFrame | None = None
        self._verdicts: tuple[PartVerdict, ...] = ()
        self.writer: VideoWriterSink | None = None

    def open(self, context: StageContext) -> None:
        parts = context.config.parts
        self.line = parts.line if parts is not None and isinstance(parts.line, CountingLine) else None  # not a zone
        if not context.checking:
            self.writer = VideoWriterSink(self.path, self.fps, annotate=self._draw)

    def process(self, frame: JudgedFrame) -> None:
        self._parts = frame.tracked  # the parts stage's tracked parts of this frame (per-part mode)
        self._verdicts = tuple(frame.parts)
        if self.writer is not None:
            self.writer.write(frame.result)

    def _draw(self, result: FrameResult) -> np.ndarray:
        image = result.frame_bgr
        if image is None:  # the loop attaches every frame; a result made by hand may not carry one
            raise InputError(f"frame {result.index} carries no image to draw on")
        out = image.copy()
        thick = max(1, round(2 * out.shape[1] / 640))
        line = self.line
        if line is not None:
            draw_counting_line(out, line.start.tolist(), line.end.tolist(), line.name,
                               axis=line.direction.axis.tolist(), thickness=thick + 1, bgr=True)
        boxes: dict[int, Any] = {}
        if self._parts is not None:
            tracked = self._parts.parts.confirmed()
            for layer in (self._parts.defects, tracked.as_detections()):
                if len(layer):
                    draw(out, layer, bgr=True, copy=False, thickness=thick)
            boxes = {int(t): box for t, box in zip(tracked.track_ids.tolist(), tracked.detections.xyxy)}
        for verdict in self._verdicts:
            self.shown[verdict.track_id] = (verdict, result.index + self.hold)
            self.judged += 1
        for tid, (verdict, until) in list(self.shown.items()):
            if result.index > until:
                del self.shown[tid]
                continue
            box = boxes.get(tid, verdict.box) if tid in boxes or result.index == verdict.judged_frame else None
            if box is not None:  # on the part while it is tracked (and at its crossing in any case)
                draw_verdict(out, box, verdict_text(verdict), passed=verdict.outcome is Verdict.PASS,
                             thickness=thick, bgr=True)
        return out

    def close(self) -> None:
        """Finish the file. Safe twice."""
        if self.writer is not None:
            self.writer.close()
