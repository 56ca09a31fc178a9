"""The ranges of settings, declared once on the dataclass field they bound.

A dataclass anywhere in edgekit (a sink's config below the inspection cell, the cell's own) says a
field's range where it declares the field, and its ``__post_init__`` checks them all with one call::

    @dataclass(frozen=True)
    class MqttConfig:
        port: int = ranged(1883, PORT)

        def __post_init__(self) -> None:
            check_ranges(self, "mqtt")      # "mqtt port: expected a port number 1-65535, got 0"

The inspection file's schema (:mod:`edgekit.inspect.schema`) reads the same declaration, so a
value out of range in the file is refused with the same "expected ..." at its line, and a range
is never written twice (a section that declares one for a field that has its own is a TypeError).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

from edgekit.errors import ConfigError

__all__ = ["RANGE", "Constraint", "between", "ranged", "range_of", "declared", "check_ranges", "out_of_range",
           "POS_INT", "NONNEG_INT", "POS_NUM", "NONNEG_NUM", "FRACTION", "PORT"]

RANGE = "edgekit.range"  # the dataclass field metadata key that holds its Constraint


class Constraint(NamedTuple):
    """A range or rule a value must meet, and how the error says what was expected."""

    test: Callable[[Any], bool]
    expect: str


def between(lo: float, hi: float, expect: str) -> Constraint:
    """``lo <= value <= hi``."""
    return Constraint(lambda v: lo <= v <= hi, expect)


POS_INT = Constraint(lambda v: v > 0, "an integer > 0")
NONNEG_INT = Constraint(lambda v: v >= 0, "an integer >= 0")
POS_NUM = Constraint(lambda v: v > 0, "a number > 0")
NONNEG_NUM = Constraint(lambda v: v >= 0, "a number >= 0")
FRACTION = between(0, 1, "a number in 0..1")
PORT = Constraint(lambda v: 0 < v < 65536, "a port number 1-65535")


def ranged(default: Any, check: Constraint) -> Any:
    """A dataclass field with ``default`` whose value must meet ``check`` (None always passes: not set)."""
    return dataclasses.field(default=default, metadata={RANGE: check})


def range_of(f: dataclasses.Field[Any]) -> Constraint | None:
    """The range a field declares (None: any value of its type)."""
    check = f.metadata.get(RANGE)
    return check if isinstance(check, Constraint) else None


def declared(cls: type, name: str) -> Constraint:
    """The range the dataclass ``cls`` declares for its field ``name`` (for a file's key that is not the field's).

    Raises:
        TypeError: the field declares none.
    """
    for f in dataclasses.fields(cls):
        if f.name == name and (check := range_of(f)) is not None:
            return check
    raise TypeError(f"{cls.__name__}.{name} declares no range")


def out_of_range(what: str, name: str, check: Constraint, value: Any) -> ConfigError:
    """The one sentence for a value built in Python outside its range."""
    return ConfigError(f"{what + ' ' if what else ''}{name}: expected {check.expect}, got {value!r}")


def check_ranges(obj: Any, what: str = "", skip: tuple[str, ...] = ()) -> None:
    """Check each field of the dataclass ``obj`` that declares a range (``skip``: fields checked
    otherwise); ``what`` names it in the error.

    Raises:
        ConfigError: "mqtt port: expected a port number 1-65535, got 0".
    """
    for f in dataclasses.fields(obj):
        check, value = range_of(f), getattr(obj, f.name)
        if check is not None and f.name not in skip and value is not None and not check.test(value):
            raise out_of_range(what, f.name, check, value)
