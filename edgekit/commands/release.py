"""`edgekit release MODEL --version V --to DIR --key signing.key`: publish a signed model release.

Writes DIR/versions/V/ (the model, golden inputs and outputs, a signed manifest) and a signed
DIR/channel.json rolling V out to --rollout of the fleet. Without MODEL it changes the channel of
the version it rolls out: `--rollout 100%` widens, `--halt` withdraws it; with only --mqtt it
notifies the devices of the channel DIR holds. Upload DIR first, notify after (a device woken
before the server has the new channel.json looks again after 1, 2, 4 ... s until it finds it).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser("release", help="publish a signed model release (staged rollout, halt)",
                              description=__doc__.split("\n\n", 1)[1], formatter_class=HelpFormatter)
    p.add_argument("model", nargs="?", metavar="MODEL", help="the .tflite file to release (leave out to widen or halt)")
    p.add_argument("--version", type=int, required=True, metavar="V", help="the version number (whole, growing)")
    p.add_argument("--to", required=True, metavar="DIR", help="the release folder a file server or bucket serves")
    p.add_argument("--key", required=True, metavar="FILE", help="the private key from edgekit keygen")
    p.add_argument("--rollout", metavar="FRACTION", help="share of the fleet, e.g. 10%% or 0.1 "
                                                         "(new release: 100%%; else unchanged)")
    p.add_argument("--golden", metavar="FILE.npz", help="golden inputs (arrays of an .npz); their outputs are "
                                                        "computed here and every device must reproduce them")
    p.add_argument("--report", metavar="DIR", help="the conversion's --report-dir, whose report.json's summary the "
                                                   "manifest keeps (default: the model's folder)")
    p.add_argument("--halt", action="store_true", help="withdraw the version: devices running it roll back")
    p.add_argument("--channel", metavar="NAME", help="the channel's name (default: the folder's name)")
    p.add_argument("--mqtt", metavar="HOST:PORT", help="publish a retained notification (with the channel's serial) "
                                                       "that wakes the devices; after the upload")
    p.add_argument("--topic", metavar="TOPIC", help="the notification topic (default: edgekit/channel/NAME)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edgekit.errors import InputError
    from edgekit.fleet.keys import load_signing_key
    from edgekit.fleet.release import parse_fraction, read_channel_file, set_rollout, write_release

    key = load_signing_key(args.key)
    rollout = parse_fraction(args.rollout) if args.rollout is not None else None
    if args.model is not None:
        if args.halt:
            raise InputError("--halt withdraws the version the channel rolls out; give it without MODEL")
        result = write_release(args.model, args.version, args.to, key, rollout=1.0 if rollout is None else rollout,
                               golden=args.golden, channel_name=args.channel,
                               report_dir=args.report)
        channel = result.channel
        what = "wrote" if result.created else "exists with this model; channel updated for"
        print(f"{what} {result.folder}/versions/{args.version} ({result.manifest.total_size} bytes, "
              f"{len(result.manifest.files)} files)")
    elif rollout is None and not args.halt:
        if not args.mqtt:
            raise InputError("without MODEL, give --rollout to widen, --halt to withdraw the version, or --mqtt "
                             "to notify the devices of the channel DIR holds (once it is uploaded)")
        held = read_channel_file(Path(args.to))
        if held is None or held.version != args.version:
            raise InputError(f"{args.to} holds no channel rolling out version {args.version}; release it first")
        channel = held
    else:
        channel = set_rollout(args.to, args.version, key, rollout=rollout, halted=True if args.halt else None)
    state = "halted" if channel.halted else f"rolled out to {channel.rollout:.0%}"
    print(f"channel {channel.name!r} serial {channel.serial}: version {channel.version} {state}; "
          f"signed by key {key.public.id}")
    if args.mqtt:
        from edgekit.fleet.settings import channel_topic, parse_broker
        from edgekit.fleet.status import publish_notification

        host, port = parse_broker(args.mqtt)
        topic = args.topic or channel_topic(channel.name)
        publish_notification(host, port, topic, {"channel": channel.name, "serial": channel.serial,
                                                 "version": channel.version, "rollout": channel.rollout,
                                                 "halted": channel.halted})
        print(f"notified {host}:{port} {topic} (retained)")
    return 0
