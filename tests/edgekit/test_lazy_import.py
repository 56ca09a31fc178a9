"""`import edgekit.runtimes` and `import edgekit.contract` load numpy (and the interpreter's
Python side) only: no OpenCV, no video loop, no TensorFlow. Run in a fresh interpreter whose
current directory is not the checkout, as a device would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("cv2", "edgekit.loop", "edgekit.tasks", "edgekit.video", "edgekit.sources", "tensorflow")
INTERPRETERS = ("ai_edge_litert", "tflite_runtime", "tensorflow")


def _loaded(tmp_path: Path, statement: str, names: tuple[str, ...]) -> list[str]:
    code = f"import json, sys; {statement}; print(json.dumps([m for m in {list(names)!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("statement, names", [
    ("import edgekit.runtimes", HEAVY),
    ("import edgekit.contract", HEAVY + INTERPRETERS),
    ("from edgekit.contract import make_decoder, map50, Normalization", HEAVY + INTERPRETERS),
    ("import edgekit; edgekit.Detections; edgekit.InputError", HEAVY),
])
def test_light_imports_stay_light(tmp_path: Path, statement: str, names: tuple[str, ...]) -> None:
    assert _loaded(tmp_path, statement, names) == []


def test_the_public_names_still_resolve(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, "import edgekit; [getattr(edgekit, n) for n in edgekit.__all__]",
                     ("cv2", "edgekit.tasks"))
    assert loaded == ["cv2", "edgekit.tasks"]  # Detector and friends load on first use


def test_unknown_names_raise_attribute_error() -> None:
    import edgekit

    with pytest.raises(AttributeError, match="no attribute 'Dtector'"):
        edgekit.Dtector  # noqa: B018
    assert "Detector" in dir(edgekit)
