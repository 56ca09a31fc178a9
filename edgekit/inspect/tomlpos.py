"""Where each key of a TOML file is written, and typed reads whose errors name key and line.

tomllib returns plain dicts without positions; this scanner reads the text once more and
maps key paths such as ``("rules", 2, "count")`` to line numbers. It follows table headers,
arrays of tables, dotted keys, and skips multi-line strings and arrays, which is all a
hand-written config uses.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Callable, Union

from edgekit.errors import ConfigError

__all__ = ["Context", "KeyLines", "KeyPath", "Table", "format_path"]

Part = Union[str, int]
KeyPath = tuple[Part, ...]

_REQUIRED: Any = object()

_BARE = r"[A-Za-z0-9_-]+"
_KEY = rf'(?:{_BARE}|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_DOTTED = re.compile(rf"\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*")
_PIECE = re.compile(_KEY)


def format_path(path: KeyPath) -> str:
    """("rules", 2, "count") -> "rules[2].count"."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _split_key(text: str) -> tuple[str, ...]:
    return tuple(p.strip("\"'") for p in _PIECE.findall(text))


class KeyLines:
    """Line numbers (1-based) of the keys and table headers of one TOML text."""

    def __init__(self, text: str) -> None:
        self.lines: dict[KeyPath, int] = {}
        self._aot_count: dict[tuple[str, ...], int] = {}
        self._scan(text)

    def line_of(self, path: KeyPath) -> int | None:
        """The line of `path`, or of its nearest enclosing key or table that is written."""
        for n in range(len(path), 0, -1):
            line = self.lines.get(tuple(path[:n]))
            if line is not None:
                return line
        return None

    # --- scanning ------------------------------------------------------------------------
    def _scan(self, text: str) -> None:
        table: KeyPath = ()
        open_string: str | None = None  # the delimiter of a multi-line string being skipped
        depth = 0  # open [ and { of a value spanning lines
        for lineno, line in enumerate(text.splitlines(), start=1):
            if open_string is not None or depth > 0:
                open_string, depth = _scan_value(line, open_string, depth)
                continue
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            if stripped.startswith("[["):
                table = self._header(stripped[2:].split("]]")[0], lineno, array=True)
            elif stripped.startswith("["):
                table = self._header(stripped[1:].split("]")[0], lineno, array=False)
            else:
                m = _DOTTED.match(line)
                if m and line[m.end():].startswith("="):
                    self.lines[table + _split_key(m.group(1))] = lineno
                    open_string, depth = _scan_value(line[m.end() + 1:], None, 0)

    def _header(self, inner: str, lineno: int, *, array: bool) -> KeyPath:
        keys = _split_key(inner)
        path: list[Part] = []
        # A header inside an array of tables ([fruit.variety] after [[fruit]]) refers to its last element.
        for i, key in enumerate(keys):
            path.append(key)
            prefix = keys[: i + 1]
            if prefix in self._aot_count and (i < len(keys) - 1 or not array):
                path.append(self._aot_count[prefix] - 1)
        if array:
            index = self._aot_count.get(keys, 0)
            self._aot_count[keys] = index + 1
            path.append(index)
        self.lines.setdefault(tuple(path), lineno)
        return tuple(path)


def _scan_value(text: str, open_string: str | None, depth: int) -> tuple[str | None, int]:
    """Carry string and bracket state across one line of a value."""
    i, n = 0, len(text)
    while i < n:
        if open_string is not None:
            end = text.find(open_string, i)
            if open_string == '"""':
                while end > 0 and text[end - 1] == "\\":
                    end = text.find(open_string, end + 1)
            if end < 0:
                return open_string, depth
            i, open_string = end + len(open_string), None
            continue
        c = text[i]
        if c == "#":
            break
        if text.startswith('"""', i) or text.startswith("'''", i):
            open_string, i = text[i:i + 3], i + 3
        elif c in "\"'":
            i = _end_of_string(text, i)
        else:
            depth += 1 if c in "[{" else -1 if c in "]}" else 0
            i += 1
    return open_string, depth


def _end_of_string(text: str, start: int) -> int:
    quote, i = text[start], start + 1
    while i < len(text):
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return i


class Context:
    """The file being read: its name for messages, where its keys are, the folder relative
    paths start from, and the environment (for *_env keys)."""

    def __init__(self, name: str, lines: KeyLines, base: Path, env: Any) -> None:
        self.name, self.lines, self.base, self.env = name, lines, base, env

    def where(self, path: tuple[Any, ...]) -> str:
        line = self.lines.line_of(path)
        return f"{self.name}:{line}" if line else self.name

    def error(self, path: tuple[Any, ...], message: str) -> ConfigError:
        return ConfigError(f"{self.where(path)}: {format_path(path) or '(top level)'}: {message}")


def _describe(value: Any) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)
    return f"{value!r} ({kind})"


class Table:
    """One TOML table: typed reads that name the key and line of a mistake, and a check
    that no unknown (misspelt) key is in it."""

    def __init__(self, data: dict[str, Any], path: tuple[Any, ...], ctx: Context) -> None:
        self.data, self.path, self.ctx = data, path, ctx

    def error(self, key: str | None, message: str) -> ConfigError:
        return self.ctx.error(self.path + ((key,) if key else ()), message)

    def where(self, key: str | None = None) -> str:
        return self.ctx.where(self.path + ((key,) if key else ()))

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, kind: type, default: Any = _REQUIRED, *,
            check: Callable[[Any], bool] | None = None, expect: str = "") -> Any:
        if key not in self.data:
            if default is _REQUIRED:
                raise self.error(key, f"missing; expected {expect or kind.__name__}")
            return default
        value = self.data[key]
        ok = (isinstance(value, kind) and not (kind is int and isinstance(value, bool))) or (
            kind is float and isinstance(value, int) and not isinstance(value, bool))
        if not ok or (check is not None and not check(value)):
            raise self.error(key, f"expected {expect or kind.__name__}, got {_describe(value)}")
        return float(value) if kind is float else value

    def table(self, key: str) -> Table | None:
        value = self.get(key, dict, None, expect="a table")
        return None if value is None else Table(value, self.path + (key,), self.ctx)

    def tables(self, key: str) -> list[Table]:
        value = self.get(key, list, [], check=lambda v: all(isinstance(x, dict) for x in v),
                         expect=f"an array of tables ([[{key}]])")
        return [Table(v, self.path + (key, i), self.ctx) for i, v in enumerate(value)]

    def allow(self, *known: str) -> None:
        """Reject a key not in `known` (a typo would otherwise be silently ignored)."""
        for key in self.data:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
                raise self.error(key, f"unknown key{hint}")

