"""Coral's edgetpu_compiler: its command line, running it, and reading its log.

The compiler is a closed-source x86_64 Linux program from Coral's apt repository (not
in Debian, not on PyPI). It maps a fully int8 model's ops onto the Edge TPU and leaves
the rest on the CPU; its log says which, and why, per operator type.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.errors import ConversionError

__all__ = [
    "COMPILER",
    "INSTALL_HINT",
    "OpStatus",
    "CompilerReport",
    "EdgeTPUCompilation",
    "compiler_command",
    "find_compiler",
    "parse_compiler_log",
    "compile_for_edgetpu",
]

COMPILER = "edgetpu_compiler"
INSTALL_HINT = (
    "edgetpu_compiler is not installed (it is not on PATH). It runs on x86_64 Debian/Ubuntu only and comes from "
    "Coral's apt repository: `curl https://packages.cloud.google.com/apt/doc/apt-key.gpg | sudo apt-key add -`, "
    "`echo 'deb https://packages.cloud.google.com/apt coral-edgetpu-stable main' | "
    "sudo tee /etc/apt/sources.list.d/coral-edgetpu.list`, `sudo apt-get update && sudo apt-get install "
    "edgetpu-compiler`. Elsewhere, use Coral's Colab notebook (compile_for_edgetpu.ipynb) on the uint8 model."
)
MAPPED = "Mapped to Edge TPU"


@dataclass(frozen=True)
class OpStatus:
    """One row of the compiler's operator table."""

    op: str
    count: int
    status: str

    @property
    def on_edgetpu(self) -> bool:
        return self.status.strip().lower() == MAPPED.lower()


@dataclass(frozen=True)
class CompilerReport:
    """What edgetpu_compiler said about one model."""

    version: str | None
    compiled: bool
    output_model: str | None
    subgraphs: int | None
    total_ops: int | None
    ops_on_edgetpu: int
    ops_on_cpu: int
    operations: tuple[OpStatus, ...]
    on_chip_memory: str | None = None
    off_chip_memory: str | None = None
    compile_ms: int | None = None
    errors: tuple[str, ...] = ()

    @property
    def cpu_operations(self) -> list[OpStatus]:
        """The rows left on the CPU, with the compiler's reason as status."""
        return [o for o in self.operations if not o.on_edgetpu]

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "compiled": self.compiled, "output_model": self.output_model,
                "subgraphs": self.subgraphs, "total_ops": self.total_ops, "ops_on_edgetpu": self.ops_on_edgetpu,
                "ops_on_cpu": self.ops_on_cpu, "on_chip_memory": self.on_chip_memory,
                "off_chip_memory": self.off_chip_memory, "compile_ms": self.compile_ms,
                "operations": [{"op": o.op, "count": o.count, "status": o.status, "on_edgetpu": o.on_edgetpu}
                               for o in self.operations], "errors": list(self.errors)}


_FIELDS = {
    "version": re.compile(r"^Edge TPU Compiler version\s+(\S+)"),
    "compile_ms": re.compile(r"^Model compiled successfully in\s+(\d+)\s*ms"),
    "output_model": re.compile(r"^Output(?: model)?:\s*(.+)$"),
    "subgraphs": re.compile(r"^Number of Edge TPU subgraphs:\s*(\d+)"),
    "total_ops": re.compile(r"^Total number of operations:\s*(\d+)"),
    "on_tpu": re.compile(r"^Number of operations that will run on Edge TPU:\s*(\d+)"),
    "on_cpu": re.compile(r"^Number of operations that will run on CPU:\s*(\d+)"),
    "on_chip": re.compile(r"^On-chip memory used for caching model parameters:\s*(\S+)"),
    "off_chip": re.compile(r"^Off-chip memory used for streaming uncached model parameters:\s*(\S+)"),
}
_ROW = re.compile(r"^([A-Za-z][\w-]*)\s+(\d+)\s+(\S.*?)\s*$")
_ERROR = re.compile(
    r"^(ERROR:.*|Internal compiler error.*|Model not compiled.*|Compilation failed.*|.*[Ff]ailed to .*)$")


def parse_compiler_log(text: str) -> CompilerReport:
    """Read edgetpu_compiler's console output and/or its .log file (both hold the operator table)."""
    found: dict[str, str] = {}
    rows: list[OpStatus] = []
    errors: list[str] = []
    in_table = False
    for raw in text.splitlines():
        line = raw.strip()
        if re.match(r"^Operator\s+Count\s+Status$", line):
            in_table, rows = True, []  # a second table (console + log file) replaces the first
            continue
        for key, rx in _FIELDS.items():
            m = rx.match(line)
            if m and key not in found:
                found[key] = m.group(1).strip()
        row = _ROW.match(line) if in_table else None
        if row:
            rows.append(OpStatus(row.group(1), int(row.group(2)), row.group(3)))
        elif _ERROR.match(line):
            errors.append(line)
    on_tpu = _int(found.get("on_tpu"))
    on_cpu = _int(found.get("on_cpu"))
    if on_tpu is None:  # all ops mapped: the compiler prints no per-device counts
        on_tpu = sum(r.count for r in rows if r.on_edgetpu)
        on_cpu = sum(r.count for r in rows if not r.on_edgetpu)
    compiled = "compile_ms" in found and not any(e.startswith("Model not compiled") for e in errors)
    return CompilerReport(version=found.get("version"), compiled=compiled, output_model=found.get("output_model"),
                          subgraphs=_int(found.get("subgraphs")), total_ops=_int(found.get("total_ops")),
                          ops_on_edgetpu=on_tpu, ops_on_cpu=on_cpu or 0, operations=tuple(rows),
                          on_chip_memory=found.get("on_chip"), off_chip_memory=found.get("off_chip"),
                          compile_ms=_int(found.get("compile_ms")), errors=tuple(errors))


def _int(value: str | None) -> int | None:
    return int(value) if value is not None else None


def find_compiler(name: str | None = None) -> str | None:
    """The compiler's path: `name`, else $EDGEKIT_EDGETPU_COMPILER, else edgetpu_compiler on PATH."""
    return shutil.which(name or os.environ.get("EDGEKIT_EDGETPU_COMPILER") or COMPILER)


def compiler_command(model: Path, out_dir: Path, *, compiler: str = COMPILER, timeout_sec: int = 180,
                     min_runtime_version: int | None = None, num_segments: int | None = None) -> list[str]:
    """The edgetpu_compiler command line: show the op table (-s), write into `out_dir`."""
    cmd = [compiler, "--show_operations", "--out_dir", str(out_dir), "--timeout_sec", str(timeout_sec)]
    if min_runtime_version is not None:
        cmd += ["--min_runtime_version", str(min_runtime_version)]
    if num_segments is not None:
        cmd += ["--num_segments", str(num_segments)]
    return cmd + [str(model)]


@dataclass(frozen=True)
class EdgeTPUCompilation:
    model: Path  # the compiled <stem>_edgetpu.tflite
    log: Path | None  # the compiler's operation log, when it wrote one
    report: CompilerReport
    command: tuple[str, ...]


def compile_for_edgetpu(model: Path, out_dir: Path | None = None, *, compiler: str | None = None,
                        timeout_sec: int = 180) -> EdgeTPUCompilation:
    """Run edgetpu_compiler on a uint8/int8 .tflite; the result is ``<stem>_edgetpu.tflite`` beside it.

    Raises:
        ConversionError: the compiler is not installed (with how to install it), it failed,
            or it wrote no model.
    """
    exe = find_compiler(compiler)
    if exe is None:
        raise ConversionError(INSTALL_HINT)
    out_dir = out_dir or model.parent
    cmd = compiler_command(model, out_dir, compiler=exe, timeout_sec=timeout_sec)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_sec + 30, check=False)
    except subprocess.TimeoutExpired:
        raise ConversionError(f"edgetpu_compiler did not finish within {timeout_sec + 30} s") from None
    except OSError as exc:
        raise ConversionError(f"cannot run {exe}: {exc.strerror or exc}") from None
    compiled = out_dir / f"{model.stem}_edgetpu.tflite"
    log = out_dir / f"{model.stem}_edgetpu.log"
    text = proc.stdout + "\n" + proc.stderr + ("\n" + log.read_text(errors="replace") if log.exists() else "")
    report = parse_compiler_log(text)
    if proc.returncode != 0 or not compiled.exists():
        why = "; ".join(report.errors) or (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConversionError(f"edgetpu_compiler failed (exit {proc.returncode}): {why}. The uint8 model "
                              f"{str(model)!r} is written; every op of it runs on the CPU")
    return EdgeTPUCompilation(compiled, log if log.exists() else None, report, tuple(cmd))
