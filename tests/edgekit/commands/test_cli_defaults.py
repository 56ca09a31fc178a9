"""A flag's default is its options dataclass's, written once there (commands/_defaults.FieldDefault):
no flag writes out a literal that an options dataclass of its command already holds, and each flag
not given parses to the dataclass's value."""

from __future__ import annotations

import argparse
import dataclasses
import enum
from typing import Any

import pytest

from edgekit import cli
from edgekit.commands._defaults import FieldDefault

# command -> the options dataclasses its flags feed ("module:Class"), and flags named unlike their field
OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "convert": (("edgekit.converters.options:ConvertOptions",), {}),
    "classify": (("edgekit.tasks:ClassifierOptions",), {}),
    "detect": (("edgekit.tasks:ClassifierOptions", "edgekit.tasks:DetectorOptions"), {}),
    "segment": (("edgekit.tasks_vision:SegmenterOptions",), {}),
    "pose": (("edgekit.tasks_vision:PoseEstimatorOptions",), {}),
    "demo": (("edgekit.demo.options:DemoOptions",), {}),
    "fleet": (("edgekit.sinks.mqtt:MqttConfig",), {"prefix": "topic_prefix"}),
}
# the flags whose defaults the dataclasses hold, as each command parses them without the flag
PARSED = [
    ("convert", ["convert", "m.keras", "-o", "m.tflite"], {"mode": "int8", "num_calibration": 300,
                                                        "num_validation": 500, "seed": 0, "max_fallback_layers": 8}),
    ("classify", ["classify", "-m", "m.tflite", "a.jpg"], {"top_k": 5, "threshold": 0.0}),
    ("segment", ["segment", "-m", "m.tflite", "--source", "a.jpg"], {"threshold": 0.5, "min_area": 1}),
    ("pose", ["pose", "-m", "m.tflite", "--source", "a.jpg"], {"threshold": 0.2}),
    ("demo", ["demo"], {"seed": 0}),
    ("fleet", ["fleet", "status", "--broker", "h:1883"], {"prefix": "edgekit"}),
]


def _defaults(where: str) -> dict[str, Any]:
    import importlib

    module, name = where.split(":")
    fields = dataclasses.fields(getattr(importlib.import_module(module), name))
    return {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    out = []
    for a in parser._actions:  # noqa: SLF001 - argparse keeps no public list
        if isinstance(a, argparse._SubParsersAction):  # noqa: SLF001
            for sub in a.choices.values():
                out.extend(_actions(sub))
        else:
            out.append(a)
    return out


def _written_twice(parser: argparse.ArgumentParser, classes: tuple[str, ...], renamed: dict[str, str]) -> list[str]:
    """Flags whose literal default equals the same field's default in one of ``classes``."""
    found = []
    for a in _actions(parser):
        if a.default is None or isinstance(a.default, (bool, FieldDefault)) or a.default is argparse.SUPPRESS:
            continue
        name = renamed.get(a.dest, a.dest)
        for where in classes:
            d = _defaults(where)
            if name in d and not isinstance(d[name], bool):
                value = d[name].value if isinstance(d[name], enum.Enum) else d[name]
                if a.default == value or str(a.default) == str(value):
                    found.append(f"{'/'.join(a.option_strings)} = {a.default!r} (also {where}.{name})")
    return found


@pytest.mark.parametrize("command", sorted(OPTIONS))
def test_no_flag_writes_out_its_dataclass_default(command: str) -> None:
    classes, renamed = OPTIONS[command]
    assert not _written_twice(cli.build_parser(command), classes, renamed)


@pytest.mark.parametrize("command, argv, expected", PARSED, ids=[p[0] for p in PARSED])
def test_a_flag_not_given_parses_to_the_dataclass_default(command: str, argv: list[str],
                                                          expected: dict[str, Any]) -> None:
    args = cli.build_parser(command).parse_args(argv)
    got = {k: getattr(args, k) for k in expected}
    assert got == expected
    classes, renamed = OPTIONS[command]
    defaults = {k: v for where in classes for k, v in _defaults(where).items()}
    for flag, value in got.items():
        field = defaults[renamed.get(flag, flag)]
        assert value == (field.value if isinstance(field, enum.Enum) else field)


def test_help_shows_the_dataclass_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.build_parser("convert").parse_args(["convert", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "at most this many layers kept in float (default: 8)" in out and "quantization mode (default: int8)" in out


def test_the_check_can_fail() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--max-fallback-layers", type=int, default=8)
    p.add_argument("--seed", type=int, default=FieldDefault("edgekit.converters.options:ConvertOptions", "seed"))
    p.add_argument("--num-validation", type=int, default=499)
    assert _written_twice(p, OPTIONS["convert"][0], {}) == [
        "--max-fallback-layers = 8 (also edgekit.converters.options:ConvertOptions.max_fallback_layers)"]
