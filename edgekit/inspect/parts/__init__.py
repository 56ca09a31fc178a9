"""Per-part inspection: parts tracked over the frames, defects attached to them, one verdict per
part at a counting line, and what a cell does with each verdict.

``options`` (which classes are parts and defects, how evidence adds up, :class:`PartVerdict`),
``inspector`` (:class:`PartInspector`: tracking, defects, the verdict at the line), ``stage``
(:class:`~edgekit.inspect.parts.stage.PartsStage`: the cell's per-part stage, with events,
metrics, crops and PLC rejects) and ``report`` (verdicts against a belt's ground truth). The
``[parts]``, ``[line]`` and ``[plc]`` tables are read by :mod:`edgekit.inspect.parts.config`, with
the rest of the inspection file.

What a library user needs is here::

    from edgekit.inspect.parts import PartInspector, PartsOptions
"""

from __future__ import annotations

from edgekit.inspect.parts.inspector import PartInspector, PartsFrame
from edgekit.inspect.parts.options import DefectEvidence, Evidence, PartsOptions, PartVerdict, belt_tracker

__all__ = ["DefectEvidence", "Evidence", "PartInspector", "PartVerdict", "PartsFrame", "PartsOptions",
           "belt_tracker"]
