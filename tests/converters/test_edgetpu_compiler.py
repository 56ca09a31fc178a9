"""edgetpu_compiler: command line, log parsing on captured logs, and running it (a stand-in here).

The real compiler is not installed on this machine (nor in Debian): the logs under
tests/converters/data/edgetpu are in its output format, and a small script plays the compiler to
test the subprocess path. No TensorFlow needed.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from edgekit.converters.edgetpu import (
    INSTALL_HINT,
    OpStatus,
    compile_for_edgetpu,
    compiler_command,
    parse_compiler_log,
)
from edgekit.errors import ConversionError

DATA = Path(__file__).parent / "data" / "edgetpu"


def _log(*names: str) -> str:
    return "\n".join((DATA / n).read_text() for n in names)


@pytest.mark.parametrize(
    ("files", "compiled", "on_tpu", "on_cpu", "total", "rows", "version"),
    [
        (("partial_stdout.txt",), True, 7, 3, 10, 7, "16.0.384591198"),
        (("partial_stdout.txt", "partial_operation.log"), True, 7, 3, 10, 7, "16.0.384591198"),
        # every op mapped: the compiler prints no per-device counts, they come from the table
        (("all_mapped_stdout.txt", "all_mapped_operation.log"), True, 31, 0, 31, 5, "16.0.384591198"),
        (("float_model_stdout.txt",), False, 0, 0, None, 0, "16.0.384591198"),
    ],
)
def test_parse_compiler_log(files: tuple[str, ...], compiled: bool, on_tpu: int, on_cpu: int,
                            total: int | None, rows: int, version: str) -> None:
    report = parse_compiler_log(_log(*files))
    assert report.compiled is compiled
    assert (report.ops_on_edgetpu, report.ops_on_cpu, report.total_ops) == (on_tpu, on_cpu, total)
    assert len(report.operations) == rows
    assert report.version == version


def test_partial_log_names_the_cpu_ops_and_their_reasons() -> None:
    report = parse_compiler_log(_log("partial_stdout.txt"))
    assert report.cpu_operations == [
        OpStatus("FULLY_CONNECTED", 1, "Operation is working on an unsupported data type"),
        OpStatus("SOFTMAX", 1, "More than one subgraph is not supported"),
        OpStatus("DEQUANTIZE", 1, "Operation is working on an unsupported data type"),
    ]
    assert OpStatus("CONV_2D", 3, "Mapped to Edge TPU") in report.operations
    assert report.subgraphs == 1
    assert report.compile_ms == 412
    assert report.on_chip_memory == "21.25KiB"
    assert report.off_chip_memory == "0.00B"
    assert report.output_model == "shapes_uint8_edgetpu.tflite"
    assert report.to_dict()["operations"][0] == {"op": "CONV_2D", "count": 3, "status": "Mapped to Edge TPU",
                                                 "on_edgetpu": True}


def test_failed_log_keeps_the_compilers_errors() -> None:
    report = parse_compiler_log(_log("float_model_stdout.txt"))
    assert report.compiled is False
    assert any(e.startswith("Model not compiled. Model is not fully quantized") for e in report.errors)
    assert any(e.startswith("ERROR: Attempting to use a delegate") for e in report.errors)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, ["edgetpu_compiler", "--show_operations", "--out_dir", "out", "--timeout_sec", "180", "m.tflite"]),
        ({"timeout_sec": 30, "min_runtime_version": 13},
         ["edgetpu_compiler", "--show_operations", "--out_dir", "out", "--timeout_sec", "30",
          "--min_runtime_version", "13", "m.tflite"]),
        ({"compiler": "/opt/bin/edgetpu_compiler", "num_segments": 2},
         ["/opt/bin/edgetpu_compiler", "--show_operations", "--out_dir", "out", "--timeout_sec", "180",
          "--num_segments", "2", "m.tflite"]),
    ],
)
def test_compiler_command(kwargs: dict, expected: list[str]) -> None:
    assert compiler_command(Path("m.tflite"), Path("out"), **kwargs) == expected


def test_missing_compiler_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("EDGEKIT_EDGETPU_COMPILER", raising=False)
    model = tmp_path / "m.tflite"
    model.write_bytes(b"\0" * 16)
    with pytest.raises(ConversionError) as err:
        compile_for_edgetpu(model)
    text = str(err.value)
    assert text == INSTALL_HINT
    for needle in ("edgetpu-compiler", "coral-edgetpu-stable", "apt-get install", "x86_64"):
        assert needle in text


def _fake_compiler(bin_dir: Path, stdout_file: str, exit_code: int = 0, write_model: bool = True) -> Path:
    """A shell script with edgetpu_compiler's command line: prints a captured log, writes the outputs."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "edgetpu_compiler"
    make = ('cp "$model" "$out/$(basename "$model" .tflite)_edgetpu.tflite"\n'
            f'cp "{DATA / "partial_operation.log"}" "$out/$(basename "$model" .tflite)_edgetpu.log"\n'
            if write_model else "")
    script.write_text(
        "#!/bin/sh\n"
        'out=.; model=""\n'
        'while [ $# -gt 0 ]; do case "$1" in --out_dir) out="$2"; shift 2;; --timeout_sec) shift 2;; '
        '--show_operations) shift;; *) model="$1"; shift;; esac; done\n'
        f'cat "{DATA / stdout_file}"\n' + make + f"exit {exit_code}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs /bin/sh for the stand-in compiler")
def test_compile_runs_the_compiler_and_parses_its_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_compiler(tmp_path / "bin", "partial_stdout.txt")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    model = tmp_path / "models" / "shapes_uint8.tflite"
    model.parent.mkdir()
    model.write_bytes(b"TFL3-stand-in")
    result = compile_for_edgetpu(model)
    assert result.model == model.parent / "shapes_uint8_edgetpu.tflite"
    assert result.model.read_bytes() == b"TFL3-stand-in"
    assert result.log == model.parent / "shapes_uint8_edgetpu.log"
    assert result.command[1:] == ("--show_operations", "--out_dir", str(model.parent), "--timeout_sec", "180",
                                  str(model))
    assert (result.report.ops_on_edgetpu, result.report.ops_on_cpu) == (7, 3)


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs /bin/sh for the stand-in compiler")
def test_compiler_failure_is_a_conversion_error_with_its_reason(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    script = _fake_compiler(tmp_path / "bin", "float_model_stdout.txt", exit_code=1, write_model=False)
    monkeypatch.setenv("EDGEKIT_EDGETPU_COMPILER", str(script))
    model = tmp_path / "float.tflite"
    model.write_bytes(b"x")
    with pytest.raises(ConversionError, match=r"exit 1\): .*Model not compiled"):
        compile_for_edgetpu(model)
