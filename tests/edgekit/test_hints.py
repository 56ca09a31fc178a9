"""Every hint and error message the code can print names flags and config keys that exist.

Reads each string literal of edgekit (edgekit/, runtimes/, converters/), takes every `--flag` and
every `[section] key` it names, and checks the flag against the options of all `edgekit` commands
and the key against the keys the config parsers allow (their `.allow(...)` calls)."""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

from edgekit import cli

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p for d in ("edgekit", "runtimes", "converters") for p in sorted((ROOT / d).rglob("*.py"))]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
KEY = re.compile(r"\[([a-z_.]+)\]\s+([a-z_]+)\b")

# Flags of other programs that messages quote with their program (file: flag -> the program).
OTHER_PROGRAMS = {
    "--force-reinstall": "pip", "--system-site-packages": "python -m venv", "--vacuum-size": "journalctl",
    "--list-cameras": "rpicam-hello", "--min": "edgetpu_compiler", "--num": "edgetpu_compiler",
    "--ops": "ai-edge-quantizer's report", "--extra-index-url": "pip",
}
# Modules with their own small argv (a child process, a helper server): their flags are their own parser's.
OWN_PARSERS = {"runtimes/_probe.py", "edgekit/fleet/serve.py"}
# Prose after a bracketed section name ("the [model] table", "[line] start and end").
PROSE = {"table", "tables", "and", "of", "names", "need", "start", "or", "is", "with", "wing"}


def _literals(path: Path) -> list[str]:
    return [n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)]


def _cli_flags() -> set[str]:
    flags: set[str] = set()

    def walk(parser: argparse.ArgumentParser) -> None:
        for a in parser._actions:  # noqa: SLF001
            flags.update(a.option_strings)
            if isinstance(a, argparse._SubParsersAction):  # noqa: SLF001
                for sub in a.choices.values():
                    walk(sub)

    walk(cli.build_parser())
    return flags


def _config_keys() -> set[str]:
    """The keys the parsers' `.allow(...)` calls name: string arguments, and `*NAMES` where NAMES is a
    module-level tuple of strings (e.g. the [model] keys the fleet wing adds)."""
    keys: set[str] = set()
    for path in SOURCES:
        tree = ast.parse(path.read_text())
        tuples = {t.id: [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                  for node in tree.body if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple)
                  for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "allow":
                for a in node.args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str):
                        keys.add(a.value)
                    elif isinstance(a, ast.Starred) and isinstance(a.value, ast.Name):
                        keys.update(tuples.get(a.value.id, ()))
    return keys | _schema_keys()


def _schema_keys() -> set[str]:
    """The keys the file's one schema declares (edgekit.inspect.schema.Section), in every module that
    declares a section of it."""
    import importlib

    from edgekit.inspect.schema import Section

    keys: set[str] = set()
    for name in ("edgekit.inspect.config", "edgekit.inspect.sinkconfig", "edgekit.inspect.parts.config",
                 "edgekit.inspect.dashboard.config", "edgekit.fleet.settings"):
        for value in vars(importlib.import_module(name)).values():
            if isinstance(value, Section):
                keys.update(value.keys)
    return keys


def test_every_flag_a_message_names_exists() -> None:
    flags, bad = _cli_flags(), []
    for path in SOURCES:
        rel = str(path.relative_to(ROOT))
        if rel in OWN_PARSERS:
            continue
        for text in _literals(path):
            for flag in FLAG.findall(text):
                if flag not in flags and flag not in OTHER_PROGRAMS:
                    bad.append(f"{rel}: {flag} in {text[:80]!r}")
    assert not bad, "messages name flags no edgekit command has:\n" + "\n".join(bad)


def test_every_config_key_a_message_names_exists() -> None:
    keys, bad, seen = _config_keys(), [], 0
    for path in SOURCES:
        for text in _literals(path):
            for section, key in KEY.findall(text):
                if key in PROSE:
                    continue
                seen += 1
                if key not in keys:
                    bad.append(f"{path.relative_to(ROOT)}: [{section}] {key}")
    assert seen >= 10 and not bad, bad


def test_the_check_sees_a_wrong_flag() -> None:
    assert FLAG.findall("choose another port (--metrics-port or --serve [HOST:]PORT)") == ["--metrics-port", "--serve"]
    assert "--metrics-port" in _cli_flags() and "--nonsense-flag" not in _cli_flags()
