"""One model reading, made once (issue 23, item 1), checked on the code itself: format recognition
has one caller (:mod:`edgekit.contract.modelreading`), and outside the contract no module reads the
edgekit metadata's keys; they read :class:`~edgekit.contract.modelreading.ModelReading` or
:class:`~edgekit.contract.metadata.ModelMetadata`. The writers of the document are the exceptions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_structure import MODULES

RECOGNIZERS = {"detect_format", "recognize_format", "read_outputs", "candidates"}
# The recognizer's own modules: readings weighs the evidence, recognize's wrappers are for users.
RECOGNIZER_HOMES = {"edgekit.contract.readings", "edgekit.contract.recognize"}
THE_READER = "edgekit.contract.modelreading"
# Where the document is parsed from bytes, or written: the flatbuffer's metadata tables (named
# buffers), the JSON reader, the converter's writer and `edgekit meta`'s.
WRITERS_AND_BYTES = {"edgekit.runtimes.metadata", "edgekit.runtimes.support_metadata", "edgekit.runtimes.tflite_file",
                     "edgekit.converters.metadata_writer", "edgekit.commands.meta"}
METADATA_NAMES = {"meta", "metadata"}
READS = {"get", "keys", "items", "values", "__getitem__", "setdefault"}


def _calls(tree: ast.AST, names: set[str]) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in names:
                found.append(name)
    return found


def _is_metadata(node: ast.AST) -> bool:
    """``x.metadata``, a name ``meta``/``metadata``, or ``(x.metadata or {})``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "metadata"
    if isinstance(node, ast.Name):
        return node.id in METADATA_NAMES
    if isinstance(node, ast.BoolOp):
        return any(_is_metadata(v) for v in node.values)
    return False


def _named_key(node: ast.AST | None) -> bool:
    """A key written as a string: a document's key (``meta["labels"]``), not a dataclass field's
    own metadata read by a module constant (``f.metadata.get(_META)``)."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _key_reads(tree: ast.AST) -> list[int]:
    """Line numbers where a metadata document's keys are read."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_metadata(node.value) \
                and _named_key(node.slice):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in READS \
                and _is_metadata(node.func.value) and _named_key(node.args[0] if node.args else None):
            lines.append(node.lineno)
    return lines


def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def test_format_recognition_has_one_caller() -> None:
    callers = {m for m in MODULES if m not in RECOGNIZER_HOMES and _calls(_tree(m), RECOGNIZERS)}
    assert callers == {THE_READER}, f"format recognition called outside {THE_READER}: {sorted(callers - {THE_READER})}"


def test_no_module_outside_the_contract_reads_metadata_keys() -> None:
    outside = [m for m in MODULES if not m.startswith("edgekit.contract") and m not in WRITERS_AND_BYTES]
    reads = {m: lines for m in outside if (lines := _key_reads(_tree(m)))}
    assert not reads, f"metadata keys read outside edgekit.contract (read the model's reading instead): {reads}"


@pytest.mark.parametrize("source, reads, calls", [
    ("x = model.metadata['labels']", [1], []),
    ("x = (model.metadata or {}).get('task')", [1], []),
    ("x = meta.get('detection')", [1], []),
    ("x = detect_format(model.outputs, None)", [], ["detect_format"]),
    ("x = model.reading().labels\ny = contract.read_outputs(a)", [], ["read_outputs"]),
    ("x = config.get('model')\ndoc['task'] = 'detect'", [], []),
])
def test_the_checks_can_fail(tmp_path: Path, source: str, reads: list[int], calls: list[str]) -> None:
    tree = ast.parse(source)
    assert _key_reads(tree) == reads
    assert _calls(tree, RECOGNIZERS) == calls
