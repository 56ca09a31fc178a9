"""`edgekit keygen --out signing.key`: an ed25519 key pair for signing model releases."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    from edgekit.commands._help import HelpFormatter

    p = subparsers.add_parser("keygen", help="make an ed25519 key pair for signing model releases",
                              description="Write a private signing key (mode 0600; keep it on the workstation) "
                                          "and beside it NAME.pub, the line devices take as [model] public_key.",
                              formatter_class=HelpFormatter)
    p.add_argument("--out", required=True, metavar="FILE", help="the private key file to write (never overwritten)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from edgekit.fleet.keys import generate_key

    private, public_file, public = generate_key(args.out)
    print(f"wrote {private} (private: keep it off the devices) and {public_file}")
    print(f"key id {public.id}; in each device's config: [model] public_key = \"{public.text}\"")
    return 0
