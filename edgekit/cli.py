"""The `edgekit` command line. Each subcommand lives in edgekit/commands/<name>.py.

Exit status: 0 success, 2 bad usage or bad input (one line on stderr), 3 an accuracy
gate failed, 130 interrupted. No Python traceback reaches the user unless
EDGEKIT_DEBUG=1 is set.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from typing import Callable, Iterator, NoReturn, Sequence

from edgekit.commands._help import HelpFormatter
from edgekit.errors import EdgekitError, interrupted_in

__all__ = ["main", "build_parser", "COMMANDS"]

# name -> one-line summary; the module is edgekit.commands.<name>, exposing register(subparsers) and
# run(args) -> int. Only the chosen command's module is imported (the others would cost start-up time
# on a small board); tests/edgekit/test_cli_startup.py checks each summary is its module's help.
COMMANDS: dict[str, str] = {
    "info": "describe a .tflite model (tensors, ops, Edge TPU, metadata)",
    "bench": "measure latency per delegate and thread count",
    "classify": "top-k classes of images with a classification model",
    "detect": "detect objects in a camera, stream, video or images in real time",
    "convert": "convert a Keras/SavedModel/ONNX/float .tflite model to a checked int8/float16 .tflite",
    "inspect": "run an inspection cell from a TOML config (rules, events, metrics, hot model updates)",
    "doctor": "check this machine: Python, numpy, interpreters, Edge TPU, cameras, OpenCV, disk",
    "demo": "train, quantize, check, benchmark and run a built-in inspection detector, offline",
    "segment": "segment frames: the class of every pixel, areas and regions",
    "pose": "find people's keypoints in frames (MoveNet-style pose models)",
    "meta": "write anchor options, task, output format or labels into a model's edgekit metadata",
    "keygen": "make an ed25519 key pair for signing model releases",
    "release": "publish a signed model release (staged rollout, halt)",
    "fleet": "the fleet's model versions and rollout states (MQTT)",
}


class Parser(argparse.ArgumentParser):
    """argparse with did-you-mean for misspelt choices and commands; a default that is an options
    dataclass's (commands/_defaults.FieldDefault) is looked up once the arguments are parsed."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        from edgekit.commands._defaults import resolve_defaults

        resolve_defaults(self)  # this parser's; a subcommand's parser resolves its own when it parses
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        hint = ""
        if "invalid choice" in message:
            try:
                bad = message.split("invalid choice: ")[1].split(" (choose")[0].strip("'\"")
                choices = message.split("choose from ")[1].rstrip(")").replace("'", "").split(", ")
                import difflib  # only for a misspelt choice (start-up time)

                close = difflib.get_close_matches(bad, [c.strip() for c in choices], n=1)
                if close:
                    hint = f" Did you mean {close[0]!r}?"
            except IndexError:
                pass
        message = message.rstrip(".")
        if message == "the following arguments are required: COMMAND":
            message = f"give a command ({', '.join(COMMANDS)})"
        self.exit(2, f"{self.prog}: error: {message}.{hint} See `{self.prog} --help`.\n")


def build_parser(command: str | None = None) -> Parser:
    """The parser of every command, or with `command` of that one only (the others are listed, not
    loaded; "" loads none, for `edgekit --version`, `--help` or a misspelt command).

    Raises:
        SetupError: a command's module cannot be imported (a broken install, not a missing feature).
    """
    from edgekit import __version__

    parser = Parser(prog="edgekit", formatter_class=HelpFormatter,
                    description="Quantized on-device inference: convert, check, benchmark and run TFLite models.")
    parser.add_argument("--version", action="version", version=f"edgekit {__version__}")
    # prog given: argparse would otherwise format the usage line to make it (and import shutil for the terminal)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser, prog=parser.prog)
    sub.required = True
    for name, summary in COMMANDS.items():
        if command is not None and name != command:
            if not command:  # listed in --help and in a misspelt command's choices; never parsed. With a
                sub.add_parser(name, help=summary, add_help=False)  # command chosen, the others are not built
            continue
        seen: list[int] = []
        try:
            with _noting_sigint(seen):
                mod = importlib.import_module(f"edgekit.commands.{name}")
        except ImportError as exc:
            if seen or interrupted_in(exc):  # Ctrl-C inside a library's import, which words it as an
                raise KeyboardInterrupt from None  # ImportError and may drop the KeyboardInterrupt (numpy)
            from edgekit.errors import SetupError

            raise SetupError(f"the {name!r} command cannot be loaded ({type(exc).__name__}: {exc}); this "
                             "installation of edgekit is incomplete or broken: reinstall it "
                             "(pip install --force-reinstall edgekit-tflite)") from None
        mod.register(sub)
        if name in NATIVE_LOG_COMMANDS:
            _add_verbose(sub.choices[name])
    return parser


# Commands that load a model, an interpreter, OpenCV or TensorFlow, whose native libraries write
# their own lines to stderr: edgekit keeps those quiet, and each of these commands takes -v/--verbose
# to bring them back (edgekit.runtimes.native_log decides, from -v or EDGEKIT_DEBUG=1).
NATIVE_LOG_COMMANDS = frozenset({"info", "bench", "classify", "detect", "convert", "inspect", "doctor", "demo",
                                 "segment", "pose", "meta"})


def _add_verbose(p: argparse.ArgumentParser) -> None:
    """-v/--verbose on a command's parser, unless its module words its own (convert: the converter's log)."""
    if any("-v" in a.option_strings for a in p._actions):  # noqa: SLF001
        return
    from edgekit.commands._common import add_verbose_argument

    add_verbose_argument(p)


@contextlib.contextmanager
def _noting_sigint(seen: list[int]) -> Iterator[None]:
    """While the body runs, a SIGINT is noted in ``seen`` as well as raised as KeyboardInterrupt,
    where Python's own handler is the one installed (else nothing changes): numpy's import turns an
    interrupt into an ImportError that does not always chain it."""
    import _signal

    previous = _signal.getsignal(_signal.SIGINT)
    if previous is not _signal.default_int_handler:
        yield
        return

    def note(signum: int, frame: object) -> None:
        seen.append(signum)
        raise KeyboardInterrupt

    try:
        _signal.signal(_signal.SIGINT, note)
    except ValueError:  # not the main thread: signals are not ours to handle
        yield
        return
    try:
        yield
    finally:
        _signal.signal(_signal.SIGINT, previous)


def _command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` names (its first word that is not an option), if it is one of COMMANDS."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def _subparser(parser: Parser, command: str) -> argparse.ArgumentParser:
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    found: argparse.ArgumentParser = subs.choices[command]
    return found


def _wants_native_logs(argv: Sequence[str]) -> bool:
    """Before parsing (TensorFlow reads its log level when it loads): whether -v may be asked for."""
    from edgekit.runtimes.native_log import native_logs_wanted

    return native_logs_wanted(any(a in ("-v", "--verbose") for a in argv))


_QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3"}


def _quiet_native_logs() -> dict[str, str | None]:
    """TensorFlow's C++ INFO/WARNING/ERROR lines (cuInit on a machine without a GPU, oneDNN, cpu
    features) say nothing to a user of a command; `-v` (or EDGEKIT_DEBUG=1) keeps them. A value the
    user set wins. Returns what to put back when main() ends (it also runs inside user code)."""
    before = {k: os.environ.get(k) for k in _QUIET_ENV}
    for k, v in _QUIET_ENV.items():
        os.environ.setdefault(k, v)
    return before


def _restore(env: dict[str, str | None]) -> None:
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


# Commands that load a model a user may have just copied onto the device try it once in a child
# process first (0.3-0.5 s), so a malicious or corrupt file ends in an error, not a segfault or a
# hang of the process. `bench` does not: it measures init time. EDGEKIT_ISOLATE=0 turns it off.
# The choice reaches the command as args.isolate, and from there load_model(isolate=...).
ISOLATED_COMMANDS = frozenset({"classify", "detect", "inspect", "segment", "pose"})


def main(argv: Sequence[str] | None = None, *, loaded: Callable[[], None] | None = None) -> int:
    """Run ``edgekit ARGV``; the exit status. ``loaded`` is called once the command's modules are
    imported, before its arguments are parsed (the console script settles the heap there: see
    edgekit._entry)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(argv)
    prog = f"edgekit {command}" if command else "edgekit"
    debug = os.environ.get("EDGEKIT_DEBUG") == "1"
    restore: dict[str, str | None] = {}
    try:
        if not _wants_native_logs(argv):
            restore = _quiet_native_logs()
        parser = build_parser(command or "")
        if loaded is not None:
            loaded()
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the command's own parser, so the hint names its --help
            _subparser(parser, args.command).error(f"unrecognized arguments: {' '.join(extra)}")
        from edgekit.runtimes.native_log import native_logs_wanted, show_native_logs

        if native_logs_wanted(bool(getattr(args, "verbose", False))):
            show_native_logs(True)
        from edgekit.runtimes.isolation import isolate_default

        args.isolate = isolate_default(default=args.command in ISOLATED_COMMANDS)
        return int(args.func(args) or 0)
    except EdgekitError as exc:
        if debug:
            raise
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `edgekit ... --json | head`: the reader left; not an error of ours.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return 0
    except OSError as exc:
        if not exc.filename or debug:
            return _internal_error(prog, exc, debug)
        # A path the user gave (an output folder that went read-only, a full disk): not a bug of ours.
        print(f"{prog}: error: cannot use {str(exc.filename)!r}: {exc.strerror or exc}; check the path, its "
              "permissions and the free space", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"{prog}: error: out of memory; use a smaller model or input", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        return _internal_error(prog, exc, debug)
    finally:
        _restore(restore)


def _internal_error(prog: str, exc: Exception, debug: bool) -> int:
    if debug:
        raise exc
    print(f"{prog}: internal error: {type(exc).__name__}: {exc}. "
          "This is a bug in edgekit; run again with EDGEKIT_DEBUG=1 for the traceback and report it.",
          file=sys.stderr)
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
