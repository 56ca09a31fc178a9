"""How a wing above ``edgekit.inspect`` plugs into the cell without the cell importing it.

A wing declares entry points in its package metadata: a parser for its section of the inspection
file, and what opens its stage for a cell whose file has that section. ``edgekit.fleet`` (follow
a release channel) is one::

    [project.entry-points."edgekit.cell_sections"]
    fleet = "edgekit.fleet.settings:parse_fleet"
    [project.entry-points."edgekit.cell_followers"]
    fleet = "edgekit.fleet.cellhook:open_follower"

The config (:mod:`edgekit.inspect.config`) asks for the parser, the cell
(:mod:`edgekit.inspect.cell`, through :mod:`edgekit.inspect.stage`) for the follower; both find
them by the section's name, so ``edgekit.inspect`` never names the wing.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Protocol, cast

from edgekit.errors import ConfigError

if TYPE_CHECKING:
    from edgekit.inspect.tomlpos import Table

__all__ = ["SECTIONS", "FOLLOWERS", "ChannelSettings", "SectionParser", "register", "plugin", "section_parser"]

SECTIONS = "edgekit.cell_sections"
FOLLOWERS = "edgekit.cell_followers"



class ChannelSettings(Protocol):
    """What the inspection side reads of the [fleet] wing's settings (``edgekit.fleet``'s FleetSettings)."""

    @property
    def channel(self) -> str: ...


# ([model] table, the section's table or None, the [sinks.mqtt] broker or None) -> the section's
# settings (None: the file does not ask for the wing after all)
SectionParser = Callable[["Table", "Table | None", "tuple[str, int] | None"], "ChannelSettings | None"]

_REGISTERED: dict[tuple[str, str], object] = {}


def register(group: str, name: str, obj: object) -> None:
    """Make ``obj`` the plugin ``name`` of ``group`` in this process (installed entry points are
    found without this; tests and embedders use it)."""
    _REGISTERED[group, name] = obj


def plugin(group: str, name: str, asked_by: str) -> object:
    """The plugin ``name`` of ``group``: registered, or an installed package's entry point.

    Raises:
        ConfigError: no installed package provides it (``asked_by`` names what asked for it).
    """
    if (group, name) not in _REGISTERED:
        found = [ep for ep in metadata.entry_points(group=group) if ep.name == name]
        if not found:
            raise ConfigError(f"{asked_by} needs edgekit's {name!r} wing ({group} entry point), and no installed "
                              f"package provides it: reinstall edgekit (`pip install -e .` in a checkout)")
        _REGISTERED[group, name] = found[0].load()
    return _REGISTERED[group, name]


def callable_plugin(group: str, name: str, asked_by: str, noun: str) -> Callable[..., Any]:
    """The plugin ``name`` of ``group`` (see :func:`plugin`), which must be callable (``noun`` says as what).

    Raises:
        ConfigError: none is installed, or what is installed cannot be called.
    """
    obj = plugin(group, name, asked_by)
    if not callable(obj):
        raise ConfigError(f"{asked_by}: the {name!r} entry point of {group} is {obj!r}, not a {noun}")
    return obj


def section_parser(name: str, asked_by: str) -> SectionParser:
    """The parser of section ``name`` (see :func:`callable_plugin`)."""
    return cast(SectionParser, callable_plugin(SECTIONS, name, asked_by, "parser"))
