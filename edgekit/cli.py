"""The `edgekit` command line. Each subcommand lives in edgekit/commands/<name>.py.

Exit status: 0 success, 2 bad usage or bad input (one line on stderr), 3 an accuracy
gate failed, 130 interrupted. No Python traceback reaches the user unless
EDGEKIT_DEBUG=1 is set.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from typing import Sequence

from edgekit.commands._help import HelpFormatter
from edgekit.errors import EdgekitError

__all__ = ["main", "build_parser", "COMMANDS"]

# name -> module in edgekit.commands exposing register(subparsers) and run(args) -> int
COMMANDS: dict[str, str] = {
    "info": "info",
    "bench": "bench",
    "classify": "classify",
    "detect": "detect",
    "convert": "convert",
    "inspect": "inspect",
    "doctor": "doctor",
    "demo": "demo",
    "segment": "segment",
    "pose": "pose",
    "meta": "meta",
    "keygen": "keygen",
    "release": "release",
    "fleet": "fleet",
}


class Parser(argparse.ArgumentParser):
    """argparse with did-you-mean for misspelt choices and commands."""

    def error(self, message: str) -> None:  # type: ignore[override]
        hint = ""
        if "invalid choice" in message:
            try:
                bad = message.split("invalid choice: ")[1].split(" (choose")[0].strip("'\"")
                choices = message.split("choose from ")[1].rstrip(")").replace("'", "").split(", ")
                close = difflib.get_close_matches(bad, [c.strip() for c in choices], n=1)
                if close:
                    hint = f" Did you mean {close[0]!r}?"
            except IndexError:
                pass
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}.{hint}\n")


def build_parser() -> Parser:
    from edgekit import __version__

    parser = Parser(prog="edgekit", formatter_class=HelpFormatter,
                    description="Quantized on-device inference: convert, check, benchmark and run TFLite models.")
    parser.add_argument("--version", action="version", version=f"edgekit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name, module in COMMANDS.items():
        try:
            mod = importlib.import_module(f"edgekit.commands.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"edgekit.commands.{module}":
                continue  # not built yet in this version
            raise
        mod.register(sub)
    return parser


# Commands that load a model a user may have just copied onto the device try it once in a child
# process first (0.3-0.5 s), so a malicious or corrupt file ends in an error, not a segfault or a
# hang of the process. `bench` does not: it measures init time. EDGEKIT_ISOLATE=0 turns it off.
# The choice reaches the command as args.isolate, and from there load_model(isolate=...).
ISOLATED_COMMANDS = frozenset({"classify", "detect", "inspect", "segment", "pose"})


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = os.environ.get("EDGEKIT_DEBUG") == "1"
    try:
        from edgekit.runtimes.isolation import isolate_default

        args.isolate = isolate_default(default=args.command in ISOLATED_COMMANDS)
        return int(args.func(args) or 0)
    except EdgekitError as exc:
        if debug:
            raise
        print(f"edgekit {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"edgekit {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `edgekit ... --json | head`: the reader left; not an error of ours.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return 0
    except MemoryError:
        print(f"edgekit {args.command}: error: out of memory; use a smaller model or input", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if debug:
            raise
        print(f"edgekit {args.command}: internal error: {type(exc).__name__}: {exc}. "
              "This is a bug in edgekit; run again with EDGEKIT_DEBUG=1 for the traceback and report it.",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
