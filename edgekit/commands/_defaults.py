"""A flag's default that is an options dataclass's own, written once, in the dataclass.

``default=FieldDefault("edgekit.converters.options:ConvertOptions", "max_fallback_layers")``: the
module is imported only when the value is needed (``--help`` shows it, or the flag was not given and
the parsed arguments hold it), so building a command's parser stays light, and the command line and
the library cannot drift apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
from typing import Any

__all__ = ["FieldDefault", "resolve_defaults"]


class FieldDefault:
    """The default of field ``name`` of the dataclass ``where`` ("module:Class")."""

    def __init__(self, where: str, name: str) -> None:
        self.where, self.name = where, name

    @property
    def value(self) -> Any:
        module, cls_name = self.where.split(":")
        cls = getattr(importlib.import_module(module), cls_name)
        for f in dataclasses.fields(cls):
            if f.name == self.name and f.default is not dataclasses.MISSING:
                return f.default
        raise TypeError(f"{self.where}.{self.name} has no plain default")

    def __str__(self) -> str:  # what --help shows: "(default: 8)"
        try:
            value = self.value
        except ImportError:  # a part this installation lacks (the converter on a device): its command says so
            return f"{self.where.split(':')[1]}.{self.name}"
        return str(value.value if isinstance(value, enum.Enum) else value)

    def __repr__(self) -> str:
        return f"FieldDefault({self.where!r}, {self.name!r})"


def resolve_defaults(parser: argparse.ArgumentParser) -> None:
    """Replace each :class:`FieldDefault` of ``parser``'s flags by its value, as the flag would have
    read it written out (through its ``type``; an enum's value string, as its choices spell it)."""
    for action in parser._actions:  # noqa: SLF001 - argparse keeps no public list of a parser's actions
        if isinstance(action.default, FieldDefault):
            try:
                value = action.default.value
            except ImportError:  # the command's run() names what to install before it reads the value
                continue
            if isinstance(value, enum.Enum):
                value = value.value
            elif callable(action.type):
                value = action.type(str(value))
            action.default = value
