"""Print README's table of bad inputs: each row run through the CLI as a user would.

    python benchmarks/bad_inputs_table.py [--fast] [--only ID...]

Input -> command -> exit status -> first line of stderr (scratch paths shortened) ->
seconds and peak memory of that run. The rows, and what each must give, live in
tests/bad_inputs.py; tests/edgekit/test_bad_inputs.py asserts them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.bad_inputs import CASES, Missing, Workspace, run_cli  # noqa: E402
from tests.conftest import SHARED_IMAGES, SHARED_MODELS  # noqa: E402

MAX_MESSAGE = 150


def _cell(text: str, scratch: Path) -> str:
    text = text.replace(str(scratch) + "/", "").replace(str(scratch), ".").replace(str(ROOT.parent) + "/", "")
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE - 1] + "…"
    return text.replace("|", "\\|")


def _command(argv: list[str], scratch: Path) -> str:
    shown = []
    for a in argv:
        if a.startswith(str(scratch)):
            a = a[len(str(scratch)):].lstrip("/") or "."
        elif "/" in a and "://" not in a:
            a = Path(a).name
        shown.append(a)
    return "`edgekit " + " ".join(shown) + "`"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fast", action="store_true", help="skip the slow rows (the 100-megapixel image)")
    p.add_argument("--only", nargs="+", metavar="ID", help="run only rows whose id contains one of these")
    args = p.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="edgekit-bad-inputs-"))
    ws = Workspace(scratch, SHARED_MODELS, SHARED_IMAGES)
    print("| input | command | exit | first line of stderr | s | MB |")
    print("|---|---|---|---|---|---|")
    bad = ran = 0
    for case in CASES:
        if (args.fast and case.slow) or (args.only and not any(o in case.id for o in args.only)):
            continue
        try:
            argv = case.argv(ws)
        except Missing as exc:
            print(f"| {case.what} | - | skipped | {exc} | | |")
            continue
        env = "".join(f"{k}={v} " for k, v in case.env.items())
        r = run_cli(argv, env=case.env, timeout=case.timeout)
        ran += 1
        ok = r.exit == case.exit and case.matches(r) and not any("Traceback" in ln for ln in r.stderr)
        bad += not ok
        mark = "" if ok else " **(unexpected)**"
        print(f"| {case.what} | {env}{_command(argv, scratch)} | {r.exit}{mark} | "
              f"{_cell(r.first_line, scratch) or '(none)'} | {r.seconds:.1f} | {r.peak_mb:.0f} |", flush=True)
    print(f"\n{ran} rows run; {bad} unexpected", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
