"""The help layout of `edgekit` and of every subcommand (defaults shown, descriptions kept as written)."""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["HelpFormatter"]


def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size() tells it (COLUMNS, else stdout's
    terminal, else 80), without importing shutil: argparse makes a formatter for every argument
    a parser adds, and shutil brings bz2 and lzma along (start-up time)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows defaults, except the empty ones ("(default: None)" tells nobody anything)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.default in (None, False) or action.default is argparse.SUPPRESS:
            return action.help or ""
        return super()._get_help_string(action) or ""
