"""`edgekit pose -m MODEL --source ...`: people's keypoints (MoveNet single or multi pose).

One line per frame (people and their scores), or one JSON object per frame with --json (each
person's keypoints by name, in frame pixels); --save draws the skeletons.
"""

from __future__ import annotations

import argparse
from typing import Any

from edgekit.commands._common import fraction
from edgekit.commands._defaults import FieldDefault
from edgekit.commands.segment import add_common_arguments, run_vision
from edgekit.results import FrameResult

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser(
        "pose", help="find people's keypoints in frames (MoveNet-style pose models)",
        description="Run a pose model (MoveNet single pose [1, 1, K, 3] or multi pose [1, P, 56]) on frames; "
                    "keypoints come back in the frame's own pixels.",
        formatter_class=HelpFormatter)
    add_common_arguments(p)
    p.add_argument("-t", "--threshold", type=fraction,
                   default=FieldDefault("edgekit.tasks_vision:PoseEstimatorOptions", "threshold"),
                   help="minimum person score (single pose: the mean keypoint score)")
    p.set_defaults(func=run)


def _line(result: FrameResult) -> str:
    people = ", ".join(f"person {p.score:.2f}" for p in result.poses)
    return f"frame {result.index}  {result.latency_ms:.1f} ms  {people or '-'}"


def run(args: argparse.Namespace) -> int:
    from edgekit.tasks_vision import PoseEstimator, PoseEstimatorOptions

    def make() -> PoseEstimator:
        return PoseEstimator(PoseEstimatorOptions(model=args.model, resize=args.resize, delegate=args.delegate,
                                                  num_threads=args.threads, warmup=args.warmup,
                                                  isolate=getattr(args, "isolate", None), threshold=args.threshold))

    return run_vision(args, "pose", make, _line)
