"""`edgekit fleet status --broker HOST:PORT`: which device runs which model version, from the
retained status messages the devices publish."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from typing import Any

from edgekit.commands._defaults import FieldDefault

__all__ = ["register", "run", "status_table"]


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser("fleet", help="the fleet's model versions and rollout states (MQTT)",
                              description=__doc__, formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="fleet_command", metavar="ACTION")
    sub.required = True
    s = sub.add_parser("status", help="a table of every device's status", formatter_class=HelpFormatter)
    s.add_argument("--broker", required=True, metavar="HOST:PORT", help="the MQTT broker the devices report to")
    s.add_argument("--prefix", default=FieldDefault("edgekit.sinks.mqtt:MqttConfig", "topic_prefix"),
                   help="the devices' topic prefix")
    s.add_argument("--wait", type=float, default=1.0, metavar="S", help="listen this long after the last message")
    s.add_argument("--json", action="store_true", help="print JSON, one object per device")
    s.set_defaults(func=run)


def status_table(rows: list[Any], now: float | None = None) -> str:
    now = time.time() if now is None else now
    head = ("DEVICE", "STATE", "RUNNING", "PENDING", "SELFTEST", "FPS", "UPTIME", "SEEN", "LAST ERROR")
    lines = [head]
    for r in rows:
        seen = f"{max(0.0, now - r.updated):.0f}s ago" if r.updated else "-"
        lines.append((r.device, r.state, "-" if r.running is None else str(r.running),
                      "-" if r.pending is None else str(r.pending), _selftest(r.selftest),
                      "-" if r.fps is None else f"{r.fps:.1f}",
                      "-" if r.uptime_s is None else f"{r.uptime_s:.0f}s", seen, (r.last_error or "")[:60]))
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in lines)


def _selftest(t: dict[str, Any] | None) -> str:
    """'v3 2 ok' (version, golden cases, result) or 'v3 failed'."""
    if not t:
        return "-"
    return f"v{t.get('version')} {t.get('cases')} ok" if t.get("passed") else f"v{t.get('version')} failed"


def run(args: argparse.Namespace) -> int:
    from edgekit.fleet.settings import parse_broker
    from edgekit.fleet.status import read_fleet_status

    host, port = parse_broker(args.broker)
    rows = read_fleet_status(host, port, prefix=args.prefix, wait=args.wait)
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=1))
    elif not rows:
        print(f"no device has published a status under {args.prefix}/+/fleet on {host}:{port}")
    else:
        print(status_table(rows))
    return 0
