"""Names a package exports, imported when first used (PEP 562): the one lookup behind the
``__getattr__`` of ``edgekit``, ``edgekit.contract`` and ``edgekit.runtimes``, so that importing a
package loads only what its caller uses (`edgekit --version` loads neither numpy nor an interpreter).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing not imported at run time: edgekit's package loads before the CLI's Ctrl-C handling
if TYPE_CHECKING:
    from typing import Any, Iterable, Mapping, MutableMapping

__all__ = ["load_export", "exported_names"]


def load_export(package: str, exports: Mapping[str, str], namespace: MutableMapping[str, Any], name: str, *,
                submodules: bool = False) -> Any:
    """``name`` from the module ``exports`` maps it to, kept in the package's ``namespace`` (a plain
    attribute once imported). ``submodules``: an unlisted name may be a submodule not imported yet.

    Raises:
        AttributeError: the package has no such name.
    """
    module = exports.get(name)
    if module is None:
        if submodules:
            try:
                return importlib.import_module(f"{package}.{name}")
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value


def exported_names(namespace: Mapping[str, Any], exported: Iterable[str]) -> list[str]:
    """The package's ``dir()``: what is loaded and what it exports."""
    return sorted(set(namespace) | set(exported))
