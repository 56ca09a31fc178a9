"""The inspection file's schema: each key's type, range and default written once, read by one reader.

A section of the file is a dataclass whose fields say how the file spells them::

    @dataclass(frozen=True)
    class MetricsConfig:
        enabled: bool = setting(bool, True)
        port: int = setting(int, 9100, PORT)

    MetricsConfig = Section(MetricsConfig).read(table)     # a tomlpos Table: keys with their lines

The default is the dataclass's (one place: the file's absent key and Python's omitted argument
agree), the range a :class:`~edgekit.ranges.Constraint` (its ``expect`` is the sentence a user reads,
"inspection.toml:27: rules[1].count: expected an integer >= 0, got 'four' (a string)"), and an
unknown key is refused with a did-you-mean. A wing whose dataclass lives below ``edgekit.inspect``
(the sinks' configs) declares its settings beside the section instead of on the fields, and its
ranges on the fields with :func:`edgekit.ranges.ranged`; the defaults stay the dataclass's, and a
range is declared once (a section's setting and its field both giving one is a TypeError). The one reader is :meth:`Section.read`; the one scanner of key
positions is :mod:`edgekit.inspect.tomlpos`.

Why not a library. We weighed the three that turn a TOML tree into typed objects (the line numbers
are the test: tomllib returns plain dicts, so no library can know them):

* pydantic (v2): the richest validation (``Field(gt=0)``, ``extra="forbid"``), and Frigate's single
  config tree is the shape we follow. Its errors carry the key path (``rules.1.count``) and no line,
  so this position scanner would still be needed beside it to translate every error; its messages
  ("Input should be greater than 0") would replace ours, which say what to write; and it needs
  pydantic-core, a compiled Rust extension of several MB that a Pi without a matching wheel builds
  from source with a Rust toolchain.
* msgspec: small and fast (a C extension), ``msgspec.toml.decode(text, type=Config)`` with
  ``Meta(gt=0)`` ranges and ``forbid_unknown_fields``; errors are one line with a JSON path and no
  line ("Expected `int`, got `str` - at `$.rules[1].count`"), unknown keys come without a suggestion.
* cattrs: structures attrs classes and dataclasses from dicts, pure Python; it has no ranges
  (validators come from attrs, a second dependency) and reports a ClassValidationError group that
  would need flattening into one sentence.

Each would add a dependency to a device that installs numpy, OpenCV and an interpreter and still
need this scanner for the line numbers users get today; the reader here is about 100 lines over it.
"""

from __future__ import annotations

import dataclasses
import enum
from pathlib import Path
from typing import Any, Callable, Mapping

from edgekit.errors import ConfigError
from edgekit.inspect.tomlpos import Table
from edgekit.ranges import (FRACTION, NONNEG_INT, NONNEG_NUM, PORT, POS_INT, POS_NUM, RANGE, Constraint, between,
                            out_of_range)
from edgekit.ranges import range_of as _range_of

__all__ = ["REQUIRED", "Constraint", "Setting", "Section", "setting", "between", "one_of", "written", "check_values",
           "POS_INT", "NONNEG_INT", "POS_NUM", "NONNEG_NUM", "FRACTION", "PORT"]

_META = "edgekit.schema"


def written(values: Mapping[str, Any]) -> dict[str, Any]:
    """The values the file wrote: settings declared with ``default=None`` for a class that keeps its
    own defaults (``CountingLine(direction=...)``) leave them to it."""
    return {k: v for k, v in values.items() if v is not None}


def one_of(names: set[str], expect: str) -> Constraint:
    """A name the file defines elsewhere (a zone of [[zones]]); the error lists them."""
    return Constraint(lambda v: v in names, f"{expect} ({', '.join(sorted(names)) or 'none defined'})")



class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # a setting without a default: the key must be written


@dataclasses.dataclass(frozen=True)
class Setting:
    """How one key of the file is read.

    Attributes:
        kind: the TOML type (bool, int, float (ints accepted), str, list, dict, object: any), or an
            Enum, whose values are the file's choices.
        check: the range or rule (None: any value of the kind).
        key: the file's key when it is not the field's name.
        path: a path, made absolute from the config file's folder.
        convert: the file's value -> the field's (e.g. megabytes -> bytes).
        only: for an Enum kind, the members the file may name (default: all).
        doc: what the value is, as an error says it ("a zone name"); default: the check's, else the kind's.
        default: the value when the key is absent (dataclass sections take the field's default);
            REQUIRED: the key must be written.
    """

    kind: Any
    check: Constraint | None = None
    key: str | None = None
    path: bool = False
    convert: Callable[[Any], Any] | None = None
    only: tuple[Any, ...] | None = None
    doc: str = ""
    default: Any = REQUIRED

    @property
    def expect(self) -> str:
        if self.check is not None:
            return self.check.expect
        if self.doc:
            return self.doc
        if self.path:
            return "a path"
        if isinstance(self.kind, type) and issubclass(self.kind, enum.Enum):
            return "one of " + ", ".join(repr(m.value) for m in self.choices)
        return str(self.kind.__name__)  # "expected bool, got 1 (an integer)", as the file's errors always said

    @property
    def choices(self) -> tuple[enum.Enum, ...]:
        return tuple(self.only) if self.only is not None else tuple(self.kind)

    def read(self, t: Table, key: str, check: Constraint | None = None) -> Any:
        """The value of ``t[key]`` (present), typed, checked and converted.

        Raises:
            ConfigError: naming the file, line and key, what was expected and what arrived.
        """
        check = check or self.check
        if isinstance(self.kind, type) and issubclass(self.kind, enum.Enum):
            values = [m.value for m in self.choices]
            return self.kind(t.get(key, str, check=lambda v: v in values, expect=self.expect))
        value = t.get(key, str if self.path else self.kind, check=check.test if check else None,
                      expect=check.expect if check else self.expect)
        if self.path:
            value = str(t.ctx.base / Path(value).expanduser())
        if self.convert is None:
            return value
        try:
            return self.convert(value)
        except ConfigError as exc:
            raise t.error(key, str(exc)) from None


def setting(kind: Any, default: Any = dataclasses.MISSING, check: Constraint | None = None, *,
            factory: Callable[[], Any] | None = None, **how: Any) -> Any:
    """A dataclass field read from the file as :class:`Setting` ``(kind, check, **how)`` says;
    ``default`` (or ``factory``) is both Python's default and the file's."""
    declared: dict[str, Any] = {_META: Setting(kind, check, **how)}  # the default lives on the field
    if check is not None and "convert" not in how:  # a converted setting's check is of the file's spelling
        declared[RANGE] = check
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=declared)
    return dataclasses.field(default=default, metadata=declared)


class Section:
    """One table of the file (or the keys of one dataclass within it): its settings and the one reader.

    ``target`` is a dataclass (settings from its fields' :func:`setting` and ``settings``, defaults
    from its fields) or None (``read_values`` only; defaults in the settings).
    """

    def __init__(self, target: type | None, settings: Mapping[str, Setting] | None = None, *,
                 extra_keys: tuple[str, ...] = ()) -> None:
        self.target = target
        found: dict[str, Setting] = {}
        if target is not None:
            for f in dataclasses.fields(target):
                s = (settings or {}).get(f.name) or f.metadata.get(_META)
                if s is not None and s.default is not REQUIRED:
                    raise TypeError(f"{target.__name__}.{f.name}: the default is the dataclass field's, not the "
                                    "setting's (one default per key)")
                field_range = _range_of(f)
                if s is not None and field_range is not None and s.check is not None and s.check is not field_range:
                    raise TypeError(f"{target.__name__}.{f.name}: the range is the dataclass field's, not the "
                                    "setting's (one range per key)")
                if s is not None:
                    found[f.name] = dataclasses.replace(s, default=_default_of(f), check=s.check or field_range)
        for name, s in (settings or {}).items():
            found.setdefault(name, s)
        self.settings: dict[str, Setting] = found
        self.extra_keys = extra_keys  # keys of the table that another section reads

    @property
    def keys(self) -> tuple[str, ...]:
        """The file's keys of this section."""
        return tuple(s.key or name for name, s in self.settings.items()) + self.extra_keys

    def read_values(self, t: Table, *, allow: tuple[str, ...] | None = (),
                    checks: Mapping[str, Constraint] | None = None,
                    defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every setting's value (the default for an absent key), by field name.

        ``allow``: more keys the table may hold (other sections' keys); None: do not check for
        unknown keys here (the caller checks the union). ``checks`` replace settings' checks for
        this read (a zone name must be one the file defines); ``defaults`` replace settings' defaults
        (those that depend on the rest of the file: the queue under ``state_dir``).

        Raises:
            ConfigError: an unknown key (with a did-you-mean), a missing required key or a value of the
                wrong type or out of range; naming the file, line and key.
        """
        if allow is not None:
            t.allow(*self.keys, *allow)
        out: dict[str, Any] = {}
        for name, s in self.settings.items():
            key = s.key or name
            if t.has(key):
                out[name] = s.read(t, key, (checks or {}).get(name))
            elif defaults is not None and name in defaults:
                out[name] = defaults[name]
            elif s.default is REQUIRED:
                raise t.error(key, f"missing; expected {s.expect}")
            elif s.default is not _FACTORY:
                out[name] = s.default
        return out

    def check(self, obj: Any, what: str, skip: tuple[str, ...] = ()) -> None:
        """Check ``obj``, made in Python, against this section's ranges (see :func:`check_values`)."""
        for name, s in self.settings.items():
            value = getattr(obj, name, None)
            # a converted setting's check is of the file's spelling ("06:00"), not of the field's value
            if name in skip or s.check is None or s.convert is not None or value is None:
                continue
            if not s.check.test(value):
                raise out_of_range(what, name, s.check, value)

    def read(self, t: Table, given: Mapping[str, Any] | None = None, **how: Any) -> Any:
        """The section's dataclass from the table; ``given`` fields are not the file's (computed).

        Raises:
            ConfigError: see :meth:`read_values`; the dataclass's own checks raise theirs.
        """
        if self.target is None:
            raise TypeError("a section without a dataclass is read with read_values()")
        values = self.read_values(t, **how)
        return self.target(**{**values, **(given or {})})


_FACTORY: Any = object()  # a default made by a factory: the dataclass makes it


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return _FACTORY if f.default_factory is not dataclasses.MISSING else REQUIRED


def check_values(obj: Any, what: str, skip: tuple[str, ...] = ()) -> None:
    """Check a dataclass made in Python (not read from a file) against the ranges of its fields'
    settings (``skip``: fields whose Python range is wider than the file's, checked by the caller).

    Raises:
        ConfigError: "<what> max_fps: expected frames per second in (0, 60], got 100".
    """
    Section(type(obj)).check(obj, what, skip)
