"""`edgekit inspect --config inspection.toml`: an inspection cell, headless, as a service runs it.

The cell (:class:`edgekit.inspect.Cell`) runs the detection loop on the configured source,
applies the zones and rules per frame (continuous) or per trigger (on-demand), publishes every
verdict as an event to the configured sinks (rotating files, MQTT, webhook), serves Prometheus
metrics, takes new model versions from a model folder without stopping, and talks to systemd
(READY=1, watchdog pings from the loop, STOPPING=1). This command parses the arguments, opens
the cell, prints its decisions, and turns SIGTERM/SIGINT into a clean stop with every sink flushed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

from edgekit.commands._common import native_stderr_filtered, positive_float, positive_int
from edgekit.errors import ConfigError, ModelError
from edgekit.inspect.cell import Cell
from edgekit.inspect.check import check_config
from edgekit.inspect.config import load_config
from edgekit.inspect.inspector import Decision
from edgekit.inspect.parts import PartVerdict

__all__ = ["register", "run"]

log = logging.getLogger("edgekit")


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser(
        "inspect", help="run an inspection cell from a TOML config (rules, events, metrics, hot model updates)",
        description="Detect, apply the config's zones and rules, and publish PASS/FAIL events to files, MQTT "
                    "or a webhook; serve Prometheus metrics; pick up new model versions from the model folder "
                    "while running; serve the operator's web page when the config has [dashboard]. Made to run "
                    "headless under systemd (see examples/raspberrypi).",
        formatter_class=HelpFormatter)
    p.add_argument("-c", "--config", required=True, help="the inspection TOML file")
    p.add_argument("--check", action="store_true", help="validate the config (and the model, if present), then exit")
    p.add_argument("--model-dir", help="serve this versioned model folder instead of the config's model")
    p.add_argument("--metrics-port", type=_port, metavar="PORT",
                   help="serve Prometheus metrics on this port (overrides [metrics] port, and turns metrics on)")
    p.add_argument("--max-frames", type=positive_int, help="stop after this many processed frames")
    p.add_argument("--duration", type=positive_float, metavar="SECONDS", help="stop after this long")
    p.add_argument("--json", action="store_true", help="print each published decision as a JSON line")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-decision lines on stdout")
    p.set_defaults(func=run)


@contextlib.contextmanager
def _signals(cell: Cell, received: list[str]) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        cell.stop(received[-1])

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {text!r}")
    return port


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    if args.metrics_port is not None:
        config = dataclasses.replace(config, metrics=dataclasses.replace(config.metrics, enabled=True,
                                                                         port=args.metrics_port))
    if args.model_dir and not Path(args.model_dir).is_dir():
        raise ConfigError(f"--model-dir {args.model_dir!r} is not a folder (expected NAME/1/model.tflite inside)")
    if args.check:
        with native_stderr_filtered():
            check = check_config(config, args.model_dir, isolate=getattr(args, "isolate", None))
        print(f"edgekit inspect: {check.line()}")
        return 0
    if not (args.model_dir or config.model.dir or config.model.path):
        raise ModelError("no model: set [model] path or dir in the config, or pass --model-dir")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("edgekit inspect: %(levelname)s: %(message)s"))
    logging.getLogger("edgekit").addHandler(handler)
    logging.getLogger("edgekit").setLevel(logging.INFO)
    received: list[str] = []

    def show(decision: Decision | PartVerdict) -> None:
        if isinstance(decision, PartVerdict):  # per-part mode
            if args.json:
                print(json.dumps({"kind": "part", **decision.to_dict()}), flush=True)
            elif not args.quiet:
                why = f"  {', '.join(decision.reasons)}" if decision.reasons else ""
                print(f"part {decision.sequence} (track {decision.track_id}, frames {decision.first_frame}-"
                      f"{decision.last_frame}): {decision.outcome.value}{why}", flush=True)
            return
        if args.json:
            print(json.dumps(decision.to_payload()), flush=True)
        elif not args.quiet:
            what = decision.verdict.label if decision.verdict else f"ERROR {decision.error}"
            failed = ", ".join(r.rule.describe() + f" (got {r.count})" for r in decision.verdict.failed) \
                if decision.verdict else ""
            trig = f" trigger {decision.trigger_id}" if decision.trigger_id else ""
            print(f"frame {decision.frame}{trig}: {what}" + (f"  {failed}" if failed else ""), flush=True)

    cell = Cell.from_config(config, model_dir=args.model_dir, isolate=getattr(args, "isolate", None))
    try:
        with native_stderr_filtered():  # the interpreter's INFO lines while the model loads
            cell.open()
        with cell, _signals(cell, received):
            for decision in cell.run(args.max_frames, args.duration):
                show(decision)
    finally:
        logging.getLogger("edgekit").removeHandler(handler)
    if not args.quiet and cell.summary is not None:
        print(f"edgekit inspect: {cell.published} decision(s); {cell.summary.line()}", file=sys.stderr)
    return 130 if "SIGINT" in received else 0
