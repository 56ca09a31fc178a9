"""The house's shape, drawn from the code's own files and imports (issues 11, 23): small modules,
no import circle and no import running back up a floor (an import inside a function or under
`if TYPE_CHECKING:` is an edge too), the inspection service in one folder, `edgekit.inspect`
never importing `edgekit.fleet`, and a device side that never imports TensorFlow, not even
through another module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Import name -> source folder, as pyproject's package-dir maps them.
PACKAGES = {"edgekit": ROOT / "edgekit", "edgekit.converters": ROOT / "converters",
            "edgekit.runtimes": ROOT / "runtimes"}
MAX_LINES = 450
INSPECT_WING = ("cell", "hotswap", "modelwatch", "selftest", "events", "sequence", "metrics", "systemd")
DEVICE_SIDE = ("edgekit.runtimes", "edgekit.contract", "edgekit.sources", "edgekit.inspect", "edgekit.track",
               "edgekit.fleet")
TENSORFLOW = ("tensorflow", "keras", "tf_keras")
# The floors of the house, ground first: a module imports only modules on its own floor or below
# (the longest name that prefixes a module places it). Results sit under the decoders that build
# them and drawing sits above both; the cell (inspect) under the wings that plug into it (fleet).
FLOORS = (
    ("edgekit.errors", "edgekit._lazy", "edgekit.ranges"),
    ("edgekit.results", "edgekit.labels", "edgekit.outputs"),
    ("edgekit.contract",),
    ("edgekit.runtimes",),
    ("edgekit.drawing", "edgekit.preprocess", "edgekit.resample", "edgekit.doctor"),
    ("edgekit.segment", "edgekit.sources", "edgekit.sinks", "edgekit.track", "edgekit.engine", "edgekit.video"),
    ("edgekit.loop",),
    ("edgekit.tasks",),
    ("edgekit.tasks_vision",),
    ("edgekit",),  # the package's face: edgekit/__init__.py
    ("edgekit.inspect",),
    ("edgekit.fleet",),
    ("edgekit.converters",),
    ("edgekit.demo",),
    ("edgekit.commands",),
    ("edgekit.cli", "edgekit.__main__", "edgekit._entry"),
)
# Circles that another open issue removes with the files it reshapes (none left: the model reading's
# readings <-> recognize circle went with issue 23's one reading).
KNOWN_CIRCLES: list[list[str]] = []


def _modules() -> dict[str, Path]:
    """Every module of the three packages by its import name."""
    mods: dict[str, Path] = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([pkg, *parts])] = path
    return mods


MODULES = _modules()


def _every_import(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import a module names, wherever it stands: at the top, in a function body (a lazy
    import is still a dependency) or under `if TYPE_CHECKING:` (a type is one too)."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def _import_time_nodes(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported: its top level, including inside top-level
    `try`, `if` and `with` blocks and class bodies, but not `if TYPE_CHECKING:` blocks nor
    function bodies (those import lazily, on purpose)."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name != "TYPE_CHECKING":
                found += _import_time_nodes(node.body)
            found += _import_time_nodes(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                found += _import_time_nodes(block)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            found += _import_time_nodes(node.body)
    return found


def _imported_names(module: str, path: Path, *, lazy: bool = False) -> set[str]:
    """Absolute dotted names a module imports at import time (``lazy``: anywhere in it)."""
    is_pkg = path.name == "__init__.py"
    names: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in _every_import(tree) if lazy else _import_time_nodes(tree.body):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = module.split(".") if is_pkg else module.split(".")[:-1]
            parts = parts[:len(parts) - (node.level - 1)]
            base = ".".join(parts + ([base] if base else []))
        names.add(base)
        names.update(f"{base}.{a.name}" for a in node.names)
    return names


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _graph(lazy: bool = False) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(edges between our modules, the names outside them each module imports); ``lazy``: the
    imports inside functions and under `if TYPE_CHECKING:` too."""
    edges: dict[str, set[str]] = {}
    foreign: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        names = _imported_names(module, path, lazy=lazy)
        edges[module] = {r for n in names if (r := _resolve(n)) and r != module}
        foreign[module] = {n for n in names if _resolve(n) is None}
    return edges, foreign


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _floor(module: str) -> int:
    """The floor of ``module``: the index in FLOORS of the longest name that prefixes it."""
    placed = [(len(name), i) for i, names in enumerate(FLOORS) for name in names
              if module == name or module.startswith(name + ".")]
    if not placed:
        raise AssertionError(f"{module} stands on no floor: add it to FLOORS in tests/test_structure.py")
    return max(placed)[1]


def _arrows_up(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} (floor {_floor(a)}) -> {b} (floor {_floor(b)})"
                  for a, bs in edges.items() for b in bs if _floor(a) < _floor(b))


def _is_device(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in DEVICE_SIDE)


def _imports_tensorflow(names: set[str]) -> set[str]:
    return {n for n in names if n.split(".")[0] in TENSORFLOW}


def test_the_module_list_is_complete() -> None:
    assert {"edgekit.cli", "edgekit.runtimes.loader", "edgekit.converters.engines.tflite_converter", "edgekit.inspect.cell"} \
        <= set(MODULES)


def test_no_module_above_450_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules above {MAX_LINES} lines (split them along a real seam): {long}"


def test_no_import_cycle() -> None:
    """Counting every import: lazy ones and `TYPE_CHECKING` ones are dependencies too."""
    edges, _ = _graph(lazy=True)
    found = [c for c in _cycles(edges) if c not in KNOWN_CIRCLES]
    assert not found, f"modules importing each other (lazy and TYPE_CHECKING imports included): {found}"


def test_no_import_runs_back_up() -> None:
    edges, _ = _graph(lazy=True)
    assert not _arrows_up(edges), f"imports from a lower floor to a higher one: {_arrows_up(edges)}"


def test_the_cell_never_imports_the_fleet() -> None:
    """The fleet plugs into the cell (edgekit.inspect.plugins), never the other way round."""
    edges, _ = _graph(lazy=True)
    back = {m: sorted(w for w in edges[m] if w.startswith("edgekit.fleet")) for m in edges
            if m.startswith("edgekit.inspect")}
    assert not {m: w for m, w in back.items() if w}


def test_the_floor_check_can_fail() -> None:
    """A made-up arrow from the results up to drawing, and one that goes down."""
    assert _arrows_up({"edgekit.results": {"edgekit.drawing"}, "edgekit.drawing": {"edgekit.results"}}) == \
        ["edgekit.results (floor 1) -> edgekit.drawing (floor 4)"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The check above can fail: a made-up circle of three and a self-standing pair."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": set()}) == [["a", "b", "c"]]


@pytest.mark.parametrize("source, expected", [
    ("import tensorflow as tf", {"tensorflow"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import keras\n", {"typing", "typing.TYPE_CHECKING"}),
    ("def f():\n    import tensorflow\n", set()),
    ("try:\n    import keras\nexcept ImportError:\n    keras = None\n", {"keras"}),
    ("from . import results", {"edgekit", "edgekit.results"}),
])
def test_import_time_imports(tmp_path: Path, source: str, expected: set[str]) -> None:
    path = tmp_path / "mod.py"
    path.write_text(source)
    assert _imported_names("edgekit.mod", path) == expected


@pytest.mark.parametrize("source, expected", [
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import keras\n",
     {"typing", "typing.TYPE_CHECKING", "keras"}),
    ("def f():\n    import tensorflow\n", {"tensorflow"}),
    ("class C:\n    def m(self):\n        from .results import Detections\n",
     {"edgekit.results", "edgekit.results.Detections"}),
])
def test_every_import_counts_as_an_edge(tmp_path: Path, source: str, expected: set[str]) -> None:
    path = tmp_path / "mod.py"
    path.write_text(source)
    assert _imported_names("edgekit.mod", path, lazy=True) == expected


def test_the_inspection_service_lives_in_one_folder() -> None:
    wing = ROOT / "edgekit" / "inspect"
    assert [m for m in INSPECT_WING if not (wing / f"{m}.py").is_file()] == []
    assert [m for m in INSPECT_WING if (ROOT / "edgekit" / f"{m}.py").exists()] == []


def test_the_device_side_imports_no_tensorflow() -> None:
    """Neither directly nor through another of our modules it imports at import time."""
    edges, foreign = _graph()
    direct = {m: sorted(tf) for m in MODULES if _is_device(m) and (tf := _imports_tensorflow(foreign[m]))}
    assert not direct, f"device-side modules importing TensorFlow: {direct}"
    tf_modules = {m for m in MODULES if _imports_tensorflow(foreign[m])}
    indirect = {}
    for start in (m for m in MODULES if _is_device(m)):
        seen, todo, parent = {start}, [start], {start: ""}
        while todo:
            v = todo.pop()
            for w in edges[v]:
                if w not in seen:
                    seen.add(w)
                    parent[w] = v
                    todo.append(w)
        hit = sorted(seen & tf_modules)
        if hit:
            chain, v = [], hit[0]
            while v:
                chain.append(v)
                v = parent[v]
            indirect[start] = " <- ".join(chain)
    assert not indirect, f"device-side modules reaching TensorFlow through our own imports: {indirect}"


def test_the_inspection_package_lists_what_it_hands_on() -> None:
    """edgekit.inspect's __all__ is written out for the tools; it names exactly what __getattr__ serves."""
    import edgekit.inspect as inspect_package

    assert inspect_package.__all__ == sorted(inspect_package._WHERE)


def test_no_class_name_is_used_twice() -> None:
    """One spelling per idea, and one idea per spelling: a public class name is defined in one module."""
    defined: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                defined.setdefault(node.name, []).append(module)
    assert not {name: where for name, where in defined.items() if len(where) > 1}
