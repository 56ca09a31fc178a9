"""The Reader protocol declares everything the sources use of a reader, and each reader edgekit
ships provides it: no attribute is read past the protocol (as ``getattr(reader, "bgr", False)`` was)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from edgekit.sources import LazyReader, Reader, readers
from tests.conftest import FakeReader

SOURCES = Path(readers.__file__).parent


def _members(protocol: type) -> set[str]:
    names = set()
    for klass in protocol.__mro__:
        if klass.__module__ == readers.__name__:
            names |= {n for n in vars(klass) if not n.startswith("_")} | set(getattr(klass, "__annotations__", {}))
    return names


def _reader_uses(tree: ast.AST) -> tuple[set[str], list[str]]:
    """Attributes read from anything called `reader` (or `self.reader`), and getattr() calls on one."""
    used, dodges = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base = node.value
            if (isinstance(base, ast.Name) and base.id == "reader") or (
                    isinstance(base, ast.Attribute) and base.attr == "reader"):
                used.add(node.attr)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            if "reader" in ast.unparse(node.args[0]):
                dodges.append(ast.unparse(node))
    return used, dodges


def test_the_sources_use_only_what_the_protocol_declares() -> None:
    declared = _members(LazyReader)
    assert {"fps", "frames", "bgr", "lazy", "read", "skip", "close"} <= _members(Reader)
    for path in sorted(SOURCES.glob("*.py")):
        if path.name == "readers.py":
            continue  # the readers themselves
        used, dodges = _reader_uses(ast.parse(path.read_text()))
        assert used <= declared, f"{path.name} uses {sorted(used - declared)} of a reader, not in the protocol"
        assert not dodges, f"{path.name} reads a reader around its protocol: {dodges}"


@pytest.mark.parametrize("klass", [readers.OpenCVReader, readers.ImageFilesReader, readers.PiCameraReader,
                                   FakeReader])
def test_every_reader_declares_the_protocol(klass: type) -> None:
    missing = [n for n in _members(Reader) if not hasattr(klass, n) and n not in ("fps", "frames")]
    assert not missing, f"{klass.__name__} lacks {missing}"


def test_a_lazy_reader_can_grab_and_retrieve() -> None:
    assert {"grab", "retrieve"} <= set(vars(readers.OpenCVReader)) and readers.OpenCVReader.lazy is False
