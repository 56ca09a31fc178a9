"""No file in the repository tells users to install the bare name `edgekit`: on PyPI that is another
project (a Cloudflare Workers SDK). The distribution is `edgekit-tflite`; installs from a clone say `.`."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_BARE = "edge" + "kit"  # spelt apart so this file does not match itself
_PROSE = {"and", "then", "or", "to", "for", "if", "with", "in"}
_SKIP_DIRS = {".git", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis", "demo-out", "edgekit-demo",
              "fuzz-findings"}


def _bare_installs(text: str) -> list[str]:
    """The `pip install` lines of `text` that name the bare distribution (a requirement, not a path)."""
    found = []
    for line in text.splitlines():
        _, sep, rest = line.partition("pip install")
        if not sep:
            continue
        rest = re.split(r"[#`;|&]|\$\(", rest)[0]  # it ends at a comment, a code span's end, the next command
        for token in rest.split():
            if token in _PROSE:
                break
            req = token.strip("'\"(),\\")
            if re.fullmatch(re.escape(_BARE) + r"(\\?\[.*|[<>=!~].*)?", req):
                found.append(line.strip())
                break
    return found


@pytest.mark.parametrize("line, bare", [
    ("pip install 'XX[convert]'", True),
    ('pip install "numpy<2" "XX[mqtt,metrics]"', True),
    ("pip install XX==0.1", True),
    ("run: pip install XX", True),
    ("pip install 'XX-tflite[convert]'", False),
    ("pip install ./XX   # a checkout", False),
    ("pip install '.[convert]' XX_tflite-0.1.0-py3-none-any.whl", False),
    ("pip install numpy  # then import XX", False),
    ("`pip install numpy` and run XX", False),
    ("pip install numpy then XX demo", False),
    ('"pip install \\$(requirements of the installed XX distribution)"', False),
    ("INSTALL = \"pip install 'XX[convert]'\"", True),
])
def test_the_bare_name_finder(line: str, bare: bool) -> None:
    assert bool(_bare_installs(line.replace("XX", _BARE))) is bare


def test_no_file_tells_users_to_install_the_bare_name() -> None:
    """Whoever follows an install line, a hint in an error message or a doc gets this project, not
    the unrelated `edgekit` on PyPI."""
    offenders = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".venv") and not d.endswith(".egg-info")]
        for name in files:
            path = Path(folder) / name
            try:
                text = path.read_text(encoding="utf-8") if path.stat().st_size < 2_000_000 else ""
            except (UnicodeDecodeError, OSError):
                continue  # a model, an image
            offenders += [f"{path.relative_to(ROOT)}: {line}" for line in _bare_installs(text)]
    assert not offenders, "install by the distribution's own name (edgekit-tflite) or from a clone:\n" + "\n".join(
        offenders)
