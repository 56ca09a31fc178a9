"""An inspection program of your own, on the library cell that `edgekit inspect` runs.

    python app.py --config inspection.toml --state-dir app-state                  # the configured source
    python app.py --config inspection.toml --state-dir app-state --image part.jpg # one photo, one verdict

``edgekit.inspect.Cell`` is the whole cell: the model (a versioned folder with hot updates, or
one file), the config's source (camera, camera module at the config's width, height and fps,
file or stream), zones checked against the first frame, the rules with their own ``min_score``,
triggers, numbered events to the config's sinks, and metrics. `edgekit inspect` is this same
cell behind a command line, so both give the same verdicts for the same frames. What is yours
is the loop body: here it prints each published decision; yours might drive a reject gate.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from edgekit.errors import EdgekitError
from edgekit.inspect import Cell, InspectionConfig, PublishMode, TriggerMode, load_config
from edgekit.inspect.config import SourceConfig


def with_state_dir(config: InspectionConfig, state_dir: str) -> InspectionConfig:
    """The config with its sequence number, event files and queues in `state_dir` (so this
    program and the service never write each other's files)."""
    state = Path(state_dir).resolve()
    s = config.sinks
    sinks = dataclasses.replace(
        s,
        jsonl=s.jsonl and dataclasses.replace(s.jsonl, directory=str(state / "events")),
        mqtt=s.mqtt and dataclasses.replace(s.mqtt, queue_path=str(state / "mqtt-queue.db")),
        webhook=s.webhook and dataclasses.replace(s.webhook, queue_path=str(state / "webhook-queue.db")))
    return dataclasses.replace(config, state_dir=str(state), sinks=sinks)


def for_one_photo(config: InspectionConfig, image: str) -> InspectionConfig:
    """The config with `image` as its source and a verdict for every frame (whatever the
    trigger mode), for a look at one photo of a part."""
    trigger = dataclasses.replace(config.trigger, mode=TriggerMode.CONTINUOUS, publish=PublishMode.EVERY,
                                  file=None, http_port=None)
    return dataclasses.replace(config, source=SourceConfig(path=str(Path(image).resolve())), trigger=trigger)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="the inspection TOML (model, source, zones, rules, sinks)")
    parser.add_argument("--state-dir", help="keep this program's sequence number, events and queues here "
                                            "instead of the config's state_dir")
    parser.add_argument("--image", help="inspect this one photo and print its verdict as JSON")
    parser.add_argument("--max-frames", type=int, help="stop after this many processed frames")
    parser.add_argument("--json", action="store_true", help="print each published decision as a JSON line")
    args = parser.parse_args(argv)

    try:
        config = load_config(args.config)
        if args.state_dir:
            config = with_state_dir(config, args.state_dir)
        if args.image:
            config = for_one_photo(config, args.image)
        with Cell.from_config(config) as cell:
            for decision in cell.run(max_frames=1 if args.image else args.max_frames):
                payload = decision.to_payload()
                if args.image:
                    print(json.dumps({"image": args.image, **payload}, indent=2))
                elif args.json:
                    print(json.dumps(payload), flush=True)
                else:
                    failed = [r.rule.describe() for r in decision.verdict.failed] if decision.verdict else []
                    print(f"frame {decision.frame}: {payload['verdict'] or decision.error}"
                          + (f"  failed: {'; '.join(failed)}" if failed else ""), flush=True)
    except EdgekitError as exc:
        print(f"app.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
