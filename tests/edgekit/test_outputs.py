"""Every output path a user gives is checked before any work starts: one sentence, exit 2."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pytest

from edgekit import cli
from edgekit.errors import InputError
from edgekit.outputs import output_file, output_folder

DATA = Path(__file__).resolve().parents[1] / "data"
SSD = str(DATA / "ssd_mobilenet_v1_coco_quant.tflite")


@pytest.fixture()
def afile(tmp_path: Path) -> Path:
    f = tmp_path / "afile"
    f.write_text("x")
    return f


@pytest.fixture()
def read_only(tmp_path: Path) -> Path:
    """A folder nobody here can write to: a 0555 folder for a normal user, /sys for root (who ignores modes)."""
    if os.geteuid() == 0:
        return Path("/sys")
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    return d


def _fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as exc:
        cli.main(list(argv))
    assert exc.value.code == 2
    assert time.perf_counter() - t0 < 5  # refused while parsing, before TensorFlow or a model loads
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err, err
    return err


def test_save_under_a_file_says_it_is_a_file(capsys: pytest.CaptureFixture[str], afile: Path) -> None:
    err = _fails(capsys, "detect", "-m", SSD, "--source", str(DATA / "parrot.jpg"), "--save", str(afile / "out.avi"))
    assert f"{str(afile)!r} is a file, not a folder" in err and "does not exist" not in err


@pytest.mark.parametrize("flag_args", [
    lambda bad: ["demo", "--out", str(bad / "demo")],
    lambda bad: ["convert", "model.keras", "-o", str(bad / "m.tflite")],
    lambda bad: ["convert", "model.keras", "-o", "m.tflite", "--report-dir", str(bad / "report")],
    lambda bad: ["detect", "-m", SSD, "--source", "0", "--summary-json", str(bad / "s.json")],
    lambda bad: ["segment", "-m", SSD, "--source", "0", "--save", str(bad / "s.avi")],
])
def test_a_read_only_folder_is_refused_at_once(capsys: pytest.CaptureFixture[str], read_only: Path, flag_args) -> None:
    err = _fails(capsys, *flag_args(read_only))
    assert "is not writable" in err and str(read_only) in err


def test_missing_folder_and_folder_for_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = _fails(capsys, "convert", "model.keras", "-o", str(tmp_path / "nope" / "m.tflite"))
    assert "does not exist" in err
    err = _fails(capsys, "detect", "-m", SSD, "--source", "0", "--summary-json", str(tmp_path))
    assert "it is a folder; give a file name" in err


def test_the_checks_themselves(tmp_path: Path, afile: Path) -> None:
    assert output_file(tmp_path / "a.json") == tmp_path / "a.json"
    assert output_folder(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"  # made later, by the work
    assert not (tmp_path / "new").exists() and not list(tmp_path.glob(".edgekit-probe-*"))
    with pytest.raises(InputError, match="is a file, not a folder"):
        output_folder(afile)
    with pytest.raises(InputError, match="is a file, not a folder"):
        output_folder(afile / "x" / "y")


def test_an_oserror_on_a_path_is_never_an_internal_error(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import edgekit.commands.info as info

    def run(_args: argparse.Namespace) -> int:
        raise PermissionError(13, "Permission denied", "/data/out/report.md")

    monkeypatch.setattr(info, "run", run)
    monkeypatch.setattr(cli, "build_parser", lambda command=None: _parser_with(run))
    assert cli.main(["info", "x.tflite"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'/data/out/report.md'" in err and "Permission denied" in err
    assert "internal error" not in err


def _parser_with(run) -> argparse.ArgumentParser:  # type: ignore[no-untyped-def]
    p = argparse.ArgumentParser(prog="edgekit")
    sub = p.add_subparsers(dest="command")
    s = sub.add_parser("info")
    s.add_argument("model")
    s.set_defaults(func=run)
    return p
