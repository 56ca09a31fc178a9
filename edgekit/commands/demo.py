"""`edgekit demo [--out DIR] [--quick]`: the whole pipeline offline on the built-in inspection example."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from edgekit.commands._defaults import FieldDefault
from edgekit.outputs import output_folder_arg

__all__ = ["register", "run"]


OPTIONS = "edgekit.demo.options:DemoOptions"  # the flags' defaults are its own


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser(
        "demo", help="train, quantize, check, benchmark and run a built-in inspection detector, offline",
        description="Generates a conveyor-belt inspection data set and video, trains a small Keras detector, "
                    "converts it to int8 with the accuracy gate, benchmarks float32 against int8, runs "
                    "`edgekit detect --realtime` and `edgekit inspect` on the video, and writes DIR/summary.md. "
                    "Needs the convert extra (TensorFlow): pip install 'edgekit-tflite[convert]'.",
        formatter_class=HelpFormatter)
    p.add_argument("--out", default=FieldDefault(OPTIONS, "out"), metavar="DIR", type=output_folder_arg, help="folder for everything the demo writes")
    p.add_argument("--quick", action="store_true", help="a reduced run (small data, 45 training steps): about a minute")
    p.add_argument("--seed", type=int, default=FieldDefault(OPTIONS, "seed"), help="seed for the data and the training")
    p.add_argument("--max-drop", type=float, default=None, metavar="POINTS",
                   help="mAP points int8 may lose against float (default 3; 25 with --quick, whose model is weak)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edgekit.demo.pipeline import DemoOptions, run_demo

    changes: dict[str, Any] = {"seed": args.seed, "quiet": args.quiet}
    if args.max_drop is not None:
        changes["max_drop"] = args.max_drop
    out = Path(args.out)
    options = DemoOptions.quick(out, **changes) if args.quick else DemoOptions(out=out, **changes)
    result = run_demo(options)
    print(result.summary_path.read_text(encoding="utf-8") if result.summary_path else "")
    if not args.quiet:
        total = sum(result.steps.values())
        print(f"edgekit demo: done in {total:.0f} s; everything is in {out}/ (summary.md, annotated.avi, ...)",
              file=sys.stderr)
    return 0 if result.gate_passed else 3
