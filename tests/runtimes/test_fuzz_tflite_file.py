"""Mutated flatbuffers never get past the reader with anything but a ModelError.

A short run is part of the suite; `benchmarks/fuzz_loader.py` runs the long one.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgekit.errors import ModelError
from edgekit.runtimes.tflite_file import parse_tflite
from tests.conftest import shared_model


@pytest.fixture(scope="module")
def model_bytes(shared_models) -> bytes:
    return shared_model(shared_models, "mobilenet_v1_0.25_128_quant.tflite").read_bytes()


def _mutate(data: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    buf = bytearray(data)
    for kind, pos, value in edits:
        pos %= len(buf) - 4
        if kind == 0:  # flip one bit
            buf[pos] ^= 1 << (value % 8)
        elif kind == 1:  # a huge count or offset where a u32 stood
            struct.pack_into("<I", buf, pos - pos % 4, (value | 0x10000000) & 0xFFFFFFFF)
        elif kind == 2:  # a small wrong index
            struct.pack_into("<I", buf, pos - pos % 4, value % 512)
        else:  # truncate
            del buf[max(8, pos):]
            break
    return bytes(buf)


edit = st.tuples(st.integers(0, 3), st.integers(0, 2**31), st.integers(0, 2**32 - 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(edit, min_size=1, max_size=6))
def test_mutated_models_raise_model_error_or_parse(model_bytes: bytes, edits) -> None:
    mutated = _mutate(model_bytes, edits)
    try:
        parsed = parse_tflite(mutated)
    except ModelError as exc:
        assert str(exc)  # a sentence, not an empty error
        return
    # What parses must be self-consistent: every index the reader returns is in range.
    for sg in parsed.subgraphs:
        for t in sg.tensors:
            assert t.buffer < max(len(parsed.buffers), 1)
        for op in sg.operators:
            assert all(-1 <= i < len(sg.tensors) for i in op.inputs + op.outputs)


@pytest.mark.parametrize("cut", [8, 12, 100, 1000, 0.5, 0.9, 0.999])
def test_truncations_are_refused(model_bytes: bytes, cut: float) -> None:
    n = int(cut if cut >= 1 else len(model_bytes) * cut)
    with pytest.raises(ModelError, match="truncated|outside the file|too few"):
        parse_tflite(model_bytes[:n])
