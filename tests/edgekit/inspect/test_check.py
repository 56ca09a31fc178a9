"""`edgekit inspect --check` refuses what the run refuses at start, with the same sentence and exit 2:
it runs the run's own opening path (Cell.check) and stops before the first frame is judged."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from typing import Callable

import pytest

from edgekit.cli import main
from tests.edgekit.inspect.test_inspect_command import PASSING, free_port, models, video, write_config  # noqa: F401

Edit = Callable[[str, Path], str]


def _both(capsys: pytest.CaptureFixture[str], cfg: Path) -> tuple[str, str]:
    """The last stderr line of --check and of the run; both must exit 2."""
    assert main(["inspect", "--config", str(cfg), "--check"]) == 2
    check = capsys.readouterr().err.strip().splitlines()[-1]
    assert main(["inspect", "--config", str(cfg), "--max-frames", "2", "-q"]) == 2
    run = capsys.readouterr().err.strip().splitlines()[-1]
    return check, run


def test_a_good_config_passes_and_names_the_real_frame(tmp_path: Path, video: Path, models: Path,
                                                        shared_models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, video, models, shared_models / "coco_labels.txt", PASSING, free_port())
    assert main(["inspect", "--config", str(cfg), "--check"]) == 0
    out = capsys.readouterr().out
    assert "config OK: 1 zone(s), 2 rule(s), continuous; model coco/1; first frame 640x426" in out
    assert not (tmp_path / "events").exists() or not list((tmp_path / "events").glob("*.jsonl")) or \
        all("starting" not in f.read_text() for f in (tmp_path / "events").glob("*.jsonl"))  # nothing published


@pytest.mark.parametrize("case", ["missing source file", "model folder with no version", "missing trigger folder",
                                  "zones outside the real frame", "metrics and dashboard on one port"])
def test_check_refuses_what_the_run_refuses(case: str, tmp_path: Path, video: Path, models: Path,
                                            shared_models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    cfg = write_config(tmp_path, video, models, shared_models / "coco_labels.txt", PASSING, port)
    text = cfg.read_text()
    if case == "missing source file":
        text = text.replace(str(video), str(tmp_path / "gone.avi"))
        expected = "gone.avi"
    elif case == "model folder with no version":
        shutil.rmtree(models / "1")
        expected = "has no version"
    elif case == "missing trigger folder":
        text += f'[trigger]\nmode = "on-demand"\nfile = "{tmp_path / "run" / "edgekit" / "trigger"}"\n'
        expected = "does not exist"
    elif case == "zones outside the real frame":
        # width/height say 1920x1080, but a file source delivers its own 640x426 frames
        text = text.replace(f'path = "{video}"', f'path = "{video}"\nwidth = 1920\nheight = 1080')
        text = text.replace("[[0, 0], [640, 0], [640, 200], [0, 200]]", "[[0, 0], [1500, 0], [1500, 900], [0, 900]]")
        expected = "640x426"
    else:
        text += f"[dashboard]\nport = {port}\n"
        expected = str(port)
    cfg.write_text(text)
    check, run = _both(capsys, cfg)
    assert check == run, (check, run)
    assert check.startswith("edgekit inspect: error:") and expected in check, check


def test_check_releases_the_ports(tmp_path: Path, video: Path, models: Path, shared_models: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    cfg = write_config(tmp_path, video, models, shared_models / "coco_labels.txt", PASSING, port)
    assert main(["inspect", "--config", str(cfg), "--check"]) == 0
    with socket.socket() as s:  # free again: the check bound it and let it go
        s.bind(("127.0.0.1", port))
