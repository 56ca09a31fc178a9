"""The CLI's first moments: only the chosen command is loaded, argument errors are one line naming
the command's --help, Ctrl-C at any moment ends without a traceback, native INFO lines stay quiet."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgekit import cli

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data"
SMALL = DATA / "mobilenet_v1_0.25_128_quant.tflite"


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "edgekit", *argv], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=120)


def test_each_summary_is_its_modules_help() -> None:
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    helps = {c.dest: c.help for c in subs._choices_actions}  # noqa: SLF001
    assert helps == cli.COMMANDS


def test_only_the_chosen_command_is_imported() -> None:
    code = ("import sys; from edgekit.cli import build_parser; build_parser('classify'); "
            "print(sorted(m for m in sys.modules if m.startswith('edgekit.commands.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    loaded = eval(out.stdout)  # noqa: S307 - our own printout of a list of names
    assert "edgekit.commands.classify" in loaded
    assert not {"edgekit.commands.inspect", "edgekit.commands.detect", "edgekit.commands.convert"} & set(loaded)


def test_a_command_that_cannot_be_imported_is_an_error(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "edgekit.commands.keygen", None)  # import raises ImportError
    assert cli.main(["keygen", "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'keygen' command cannot be loaded" in err and "reinstall" in err


def test_a_ctrl_c_that_an_import_swallows_into_an_unchained_importerror_is_still_an_interrupt(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """numpy's import can turn a SIGINT into an ImportError that does not chain the KeyboardInterrupt:
    the CLI notes the signal while a command's modules import and ends 'interrupted', exit 130."""
    def swallowing_import(name: str) -> object:
        try:
            os.kill(os.getpid(), signal.SIGINT)  # Python's handler raises KeyboardInterrupt at once
            time.sleep(1)
        except KeyboardInterrupt:
            pass
        raise ImportError("numpy's message, with no cause")  # not `from` it: the chain is gone

    monkeypatch.setattr(cli.importlib, "import_module", swallowing_import)
    assert cli.main(["classify", "x"]) == 130
    assert capsys.readouterr().err.strip() == "edgekit classify: interrupted"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back after the import


def test_a_ctrl_c_before_main_runs_is_one_line_and_exit_130() -> None:
    """The console script imports edgekit._entry before main() runs: a SIGINT there ends at once."""
    code = "import os, signal, time, edgekit._entry; os.kill(os.getpid(), signal.SIGINT); time.sleep(5)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (out.returncode, out.stderr) == (130, "edgekit: interrupted\n")


@pytest.mark.parametrize("argv, head", [
    ([], "edgekit: error: give a command"),
    (["detct"], "edgekit: error: argument COMMAND: invalid choice: 'detct'"),
    (["classify", "-m", "m.tflite", "a.jpg", "--bogus"], "edgekit classify: error: unrecognized arguments: --bogus"),
    (["detect", "--source", "0", "-m", "m.tflite", "--threshold", "x"], "edgekit detect: error: argument"),
])
def test_argument_errors_are_one_line(argv: list[str], head: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    command = f"edgekit {argv[0]}" if argv and argv[0] in cli.COMMANDS else "edgekit"
    assert err.count("\n") == 1 and err.startswith(head) and err.rstrip().endswith(f"See `{command} --help`."), err


def test_interpreter_info_lines_are_dropped_through_the_api_and_kept_with_debug() -> None:
    code = ("import edgekit, sys; m = edgekit.load_model(sys.argv[1]); m.run(__import__('numpy').zeros("
            "m.inputs[0].shape, m.inputs[0].dtype)); print('ran')")
    quiet = subprocess.run([sys.executable, "-c", code, str(SMALL)], capture_output=True, text=True, cwd=ROOT,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert quiet.stdout.strip() == "ran" and "INFO:" not in quiet.stderr, quiet.stderr
    loud = subprocess.run([sys.executable, "-c", code, str(SMALL)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "EDGEKIT_DEBUG": "1"}, check=True)
    assert "INFO: Created TensorFlow Lite XNNPACK delegate" in loud.stderr
    quiet = _run("classify", "-m", str(SMALL), "-k", "1", str(DATA / "parrot.jpg"))
    assert quiet.returncode == 0 and "INFO:" not in quiet.stderr, quiet.stderr


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_command_with_native_logs_takes_verbose(command: str) -> None:
    parser = cli.build_parser(command)
    flags = {o for a in cli._subparser(parser, command)._actions for o in a.option_strings}  # noqa: SLF001
    assert ({"-v", "--verbose"} <= flags) == (command in cli.NATIVE_LOG_COMMANDS)


def test_verbose_brings_the_native_lines_back() -> None:
    loud = _run("classify", "-v", "-m", str(SMALL), "-k", "1", str(DATA / "parrot.jpg"))
    assert loud.returncode == 0 and "INFO: Created TensorFlow Lite XNNPACK delegate" in loud.stderr, loud.stderr
    code = ("import sys; from edgekit import cli; from edgekit.commands import _common; from edgekit.runtimes import "
            "native_log; seen = []; _common.quiet_native_logs = lambda: seen.append(native_log.native_logs_shown()) "
            "or True; cli.main(sys.argv[1:]); print(seen)")
    for flag, shown in (("-v", True), ("--verbose", True), (None, False)):  # one decision, read by the frame commands
        argv = ["detect", "-m", str(SMALL), "--source", str(DATA / "parrot.jpg"), "-q", *([flag] if flag else [])]
        out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "PYTHONPATH": str(ROOT), "EDGEKIT_DEBUG": ""}, timeout=120)
        assert out.stdout.strip().splitlines()[-1] == f"[{shown}]", (flag, out.stdout, out.stderr)


# What the console script runs (edgekit._entry), after a line that says Python's own start-up (site,
# .pth files) and the import of the entry point (the lazy edgekit package and edgekit/_entry.py: a
# few ms) are over; a SIGINT before that lands where no code of ours runs yet.
_CONSOLE = ("import sys; from edgekit._entry import main; print('started', file=sys.stderr, flush=True); "
            "sys.exit(main())")


@pytest.mark.parametrize("delay", [0.005, 0.02, 0.05, 0.15, 0.3, 0.6, 1.0])
def test_ctrl_c_at_any_moment_ends_without_a_traceback(delay: float) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _CONSOLE, "classify", "-m", str(SMALL), "-k", "1",
                             str(DATA / "parrot.jpg")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stderr is not None and proc.stderr.readline().strip() == "started"
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    # -SIGINT: it came as the process was ending, after main() returned (Python's own default then)
    assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, err)
    if proc.returncode == 130:  # said by the CLI, or by the entry point while the CLI was still loading
        assert err.strip().splitlines()[-1] in ("edgekit classify: interrupted", "edgekit: interrupted"), err


def test_main_leaves_the_environment_as_it_found_it(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "1")  # the user's own value wins and stays
    assert cli.main(["classify", "-m", str(SMALL), "-k", "1", str(DATA / "parrot.jpg")]) == 0
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "1"
