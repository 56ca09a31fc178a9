"""`edgekit demo --quick`, run once for the tests that read its files or use its model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    pytest.importorskip("tensorflow", reason="the demo trains a model: needs the convert extra")
    out = tmp_path_factory.mktemp("demo")
    proc = subprocess.run([sys.executable, "-m", "edgekit", "demo", "--quick", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=out)
    return out, proc
