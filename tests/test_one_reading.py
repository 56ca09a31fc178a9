"""One model reading, made once (issue 23, item 1), checked on the code itself: format recognition
has one caller (:mod:`edgekit.contract.modelreading`), and outside the contract no module reads the
edgekit metadata's keys; they read :class:`~edgekit.contract.modelreading.ModelReading` or
:class:`~edgekit.contract.metadata.ModelMetadata`. Nor does any write them: the document has one
writer, :meth:`~edgekit.contract.metadata.ModelMetadata.to_document` (the converter and ``edgekit meta``
build the typed value and call it)."""

from __future__ import annotations

import ast

import pytest

from edgekit.contract.metadata import DOCUMENT_KEYS
from tests.test_structure import MODULES

RECOGNIZERS = {"detect_format", "recognize_format", "read_outputs", "candidates"}
# The recognizer's own modules: readings weighs the evidence, recognize's wrappers are for users.
RECOGNIZER_HOMES = {"edgekit.contract.readings", "edgekit.contract.recognize"}
THE_READER = "edgekit.contract.modelreading"
# Where the document is turned from bytes to JSON and back: the flatbuffer's metadata tables (named
# buffers), the JSON reader, and the writer of the bytes (it stores what ModelMetadata.to_document gives).
BYTES = {"edgekit.runtimes.metadata", "edgekit.runtimes.support_metadata", "edgekit.runtimes.tflite_file",
         "edgekit.converters.metadata_writer"}
METADATA_NAMES = {"meta", "metadata"}
DOCUMENT_NAMES = {"doc", "document"}  # what a module calls a JSON document it builds
READS = {"get", "keys", "items", "values", "__getitem__", "setdefault", "pop"}
WRITES = {"update", "setdefault", "__setitem__", "pop"}


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


def _constants(tree: ast.AST) -> dict[str, object]:
    """The module's constants: ``NAME = <literal>`` at its top level."""
    body = tree.body if isinstance(tree, ast.Module) else []
    return {node.targets[0].id: node.value.value for node in body if isinstance(node, ast.Assign)
            and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)}


def _named_key(node: ast.AST | None, constants: dict[str, object]) -> bool:
    """A key that may be a document's: a string (``meta["labels"]``) or a name (``meta.get(KEY)``), except a
    name the module binds to a string no document key spells (a dataclass field's own metadata read by
    a module constant: ``f.metadata.get(_META)``, ``_META = "edgekit.schema"``)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Name):
        value = constants.get(node.id)
        return not (isinstance(value, str) and value not in DOCUMENT_KEYS)
    return isinstance(node, ast.Attribute)  # a constant of another module's


def _key_reads(tree: ast.AST) -> list[int]:
    """Line numbers where a metadata document's keys are read."""
    constants, lines = _constants(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_metadata(node.value) \
                and _named_key(node.slice, constants):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in READS \
                and _is_metadata(node.func.value) and _named_key(node.args[0] if node.args else None, constants):
            lines.append(node.lineno)
    return lines


def _document_keys(keys: list[str | None]) -> bool:
    """Keys of a document literal: some written out, each a metadata document's (``**other`` aside)."""
    named = [k for k in keys if k is not None]
    return bool(named) and all(k in DOCUMENT_KEYS for k in named)


def _key_writes(tree: ast.AST) -> list[int]:
    """Line numbers where a metadata document is written: a literal whose keys are all the document's
    (``{"task": ..., "labels": ...}``, ``dict(task=...)``, ``{**doc, "edgetpu": ...}``), an item stored
    into a metadata document (``meta[k] = ...``) or under its key into a document (``doc["labels"] = ...``),
    or a metadata document updated in place."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [k.value if isinstance(k, ast.Constant) and isinstance(k.value, str) else "" if k else None
                    for k in node.keys]
            if _document_keys(keys):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
                and _document_keys([k.arg for k in node.keywords]):
            lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and (_is_metadata(node.value) or (
                isinstance(node.value, ast.Name) and node.value.id in DOCUMENT_NAMES
                and isinstance(node.slice, ast.Constant) and node.slice.value in DOCUMENT_KEYS)):
            lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES \
                and _is_metadata(node.func.value):
            lines.append(node.lineno)
    return sorted(set(lines))


def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(encoding="utf-8"))


def test_format_recognition_has_one_caller() -> None:
    callers = {m for m in MODULES if m not in RECOGNIZER_HOMES and _calls(_tree(m), RECOGNIZERS)}
    assert callers == {THE_READER}, f"format recognition called outside {THE_READER}: {sorted(callers - {THE_READER})}"


def _outside() -> list[str]:
    return [m for m in MODULES if not m.startswith("edgekit.contract") and m not in BYTES]


def test_no_module_outside_the_contract_reads_metadata_keys() -> None:
    reads = {m: lines for m in _outside() if (lines := _key_reads(_tree(m)))}
    assert not reads, f"metadata keys read outside edgekit.contract (read the model's reading instead): {reads}"


def test_the_metadata_document_has_one_writer() -> None:
    writes = {m: lines for m in _outside() if (lines := _key_writes(_tree(m)))}
    assert not writes, ("the edgekit metadata written outside edgekit.contract (build a ModelMetadata and "
                        f"write its to_document()): {writes}")


@pytest.mark.parametrize("source, reads, writes, calls", [
    ("x = model.metadata['labels']", [1], [], []),
    ("x = (model.metadata or {}).get('task')", [1], [], []),
    ("x = meta.get('detection')", [1], [], []),
    ("KEY = 'labels'\nx = meta.get(KEY)", [2], [], []),
    ("from edgekit.keys import KEY\nx = metadata[KEY]", [2], [], []),
    ("x = meta.get(contract.LABELS)", [1], [], []),
    ("_META = 'edgekit.schema'\nx = f.metadata.get(_META)", [], [], []),
    ("x = detect_format(model.outputs, None)", [], [], ["detect_format"]),
    ("x = model.reading().labels\ny = contract.read_outputs(a)", [], [], ["read_outputs"]),
    ("x = config.get('model')\ny = {'task': t, 'why': w}", [], [], []),
    ("doc = {'task': 'detect',\n       'labels': names}", [], [1], []),
    ("doc = {**res.metadata, 'edgetpu': report}", [], [1], []),
    ("doc = dict(output_format='yolo')", [], [1], []),
    ("doc['task'] = 'detect'", [], [1], []),
    ("meta[key] = value\nmetadata.update(other)", [], [1, 2], []),
])
def test_the_checks_can_fail(source: str, reads: list[int], writes: list[int], calls: list[str]) -> None:
    tree = ast.parse(source)
    assert _key_reads(tree) == reads
    assert _key_writes(tree) == writes
    assert _calls(tree, RECOGNIZERS) == calls
