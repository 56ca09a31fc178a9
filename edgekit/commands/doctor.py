"""`edgekit doctor [--json]`: is this machine ready to run edgekit, and what fixes it if not.

Checks Python, numpy against each TFLite interpreter installed (tflite-runtime needs
numpy<2), the interpreters and XNNPACK, the numpy, Pillow and OpenCV really imported against
the floors pyproject.toml declares (Debian's, through --system-site-packages, can be older), the Edge TPU runtime and devices, cameras and
picamera2, OpenCV's GUI support, the optional extras, power on a Raspberry Pi and free
disk. Every problem comes with the command that fixes it. Exits 0 whatever it finds: it
reports, the JSON says ok/warn/fail per check.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from edgekit.doctor import Status
from edgekit.doctor.probes import gather

__all__ = ["register", "run"]


# --- CLI ----------------------------------------------------------------------------------

_MARK = {Status.OK: "ok  ", Status.WARN: "WARN", Status.FAIL: "FAIL"}


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser(
        "doctor", help="check this machine: Python, numpy, interpreters, Edge TPU, cameras, OpenCV, disk",
        description="Check that this machine can run edgekit and print the command that fixes each problem. "
                    "Exits 0 whatever it finds; --json gives one object with a list of checks "
                    "(name, status ok/warn/fail, detail, fix).",
        formatter_class=HelpFormatter)
    p.add_argument("--json", action="store_true", help="print JSON instead of a report")
    p.add_argument("-m", "--model", help="also load this .tflite and run it once")
    p.add_argument("--path", default=".", help="where free disk space matters (the state_dir of a service)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edgekit import __version__

    checks = gather(args.path, args.model)
    counts = {s.value: sum(c.status is s for c in checks) for s in Status}
    if args.json:
        print(json.dumps({"edgekit": __version__, "checks": [c.to_dict() for c in checks], "summary": counts},
                         indent=2))
        return 0
    width = max(len(c.name) for c in checks)
    for c in checks:
        print(f"[{_MARK[c.status]}] {c.name:<{width}}  {c.detail}")
        if c.fix:
            print(f"        {'':<{width}}  fix: {c.fix}")
    print(f"\n{counts['ok']} ok, {counts['warn']} warning(s), {counts['fail']} failure(s)")
    return 0
