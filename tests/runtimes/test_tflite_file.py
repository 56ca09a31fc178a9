"""The bounds-checked TFLite reader: real models parse; every kind of bad file is a ModelError."""

from __future__ import annotations

import io
import struct
import tracemalloc
import zipfile
from pathlib import Path
from typing import Callable

import pytest

from edgekit.errors import ModelError
from edgekit.runtimes import inspect_model, parse_tflite, validate_model_file
from tests.conftest import shared_model

SMALL = "mobilenet_v1_0.25_128_quant.tflite"
SSD = "ssd_mobilenet_v1_coco_quant.tflite"
V2 = "mobilenet_v2_1.0_224_quant.tflite"
EDGETPU = "mobilenet_v1_0.25_128_quant_edgetpu.tflite"


# --- a minimal flatbuffer walker, independent of the reader under test, to craft bad files ---
def _u32(b: bytes | bytearray, pos: int) -> int:
    return struct.unpack_from("<I", b, pos)[0]


def _field(b: bytes | bytearray, table: int, index: int) -> int:
    """Absolute position of field `index` of a table, 0 when absent."""
    vtable = table - struct.unpack_from("<i", b, table)[0]
    vsize = struct.unpack_from("<H", b, vtable)[0]
    slot = 4 + 2 * index
    off = struct.unpack_from("<H", b, vtable + slot)[0] if slot < vsize else 0
    return table + off if off else 0


def _vector(b: bytes | bytearray, table: int, index: int) -> int:
    """Position of the length word of a vector field."""
    pos = _field(b, table, index)
    assert pos, f"field {index} absent"  # test-data sanity, not input validation
    return pos + _u32(b, pos)


def _tables(b: bytes | bytearray, table: int, index: int) -> list[int]:
    vec = _vector(b, table, index)
    return [vec + 4 + 4 * i + _u32(b, vec + 4 + 4 * i) for i in range(_u32(b, vec))]


def _root(b: bytes | bytearray) -> int:
    return _u32(b, 0)


# Model: 1 operator_codes, 2 subgraphs, 4 buffers. SubGraph: 0 tensors, 3 operators.
# Tensor: 0 shape, 2 buffer. Operator: 0 opcode_index, 1 inputs, 5 custom_options. Model 0: version.
def _huge_subgraphs(b: bytearray) -> None:
    struct.pack_into("<I", b, _vector(b, _root(b), 2), 0x7FFFFFFF)


def _huge_buffers(b: bytearray) -> None:
    struct.pack_into("<I", b, _vector(b, _root(b), 4), 0x7FFFFFFF)


def _huge_shape(b: bytearray) -> None:
    tensor = _tables(b, _tables(b, _root(b), 2)[0], 0)[0]
    struct.pack_into("<I", b, _vector(b, tensor, 0), 0x7FFFFFFF)


def _first_present(b: bytearray, tables: list[int], index: int) -> int:
    """Position of field `index` in the first table that stores it (absent = default value)."""
    return next(_field(b, t, index) for t in tables if _field(b, t, index))


def _tensor_to_missing_buffer(b: bytearray) -> None:
    tensors = _tables(b, _tables(b, _root(b), 2)[0], 0)
    struct.pack_into("<I", b, _first_present(b, tensors, 2), 31337)


def _operator_to_missing_opcode(b: bytearray) -> None:
    ops = _tables(b, _tables(b, _root(b), 2)[0], 3)
    struct.pack_into("<I", b, _first_present(b, ops, 0), 999)


def _operator_to_missing_tensor(b: bytearray) -> None:
    op = _tables(b, _tables(b, _root(b), 2)[0], 3)[0]
    struct.pack_into("<i", b, _vector(b, op, 1) + 4, 123456)


def _huge_custom_options(b: bytearray) -> None:
    ops = _tables(b, _tables(b, _root(b), 2)[0], 3)
    op = next(o for o in ops if _field(b, o, 5))  # SSD's post-processing op keeps its settings there
    struct.pack_into("<I", b, _vector(b, op, 5), 0x7FFFFFFF)


def _schema_version_4(b: bytearray) -> None:
    struct.pack_into("<I", b, _field(b, _root(b), 0), 4)


def _wrong_identifier(b: bytearray) -> None:
    b[4:8] = b"TFL2"


def _bad_vtable(b: bytearray) -> None:
    root = _root(b)
    vtable = root - struct.unpack_from("<i", b, root)[0]
    struct.pack_into("<H", b, vtable, 3)


def _truncate(fraction: float) -> Callable[[bytes], bytes]:
    return lambda data: data[:int(len(data) * fraction)]


PATCHES = [
    pytest.param(_huge_subgraphs, "a vector of 2147483647 elements", id="subgraphs-0x7fffffff"),
    pytest.param(_huge_buffers, "a vector of 2147483647 elements", id="buffers-0x7fffffff"),
    pytest.param(_huge_shape, "a vector of 2147483647 elements", id="shape-0x7fffffff"),
    pytest.param(_tensor_to_missing_buffer, "points at buffer 31337", id="tensor-missing-buffer"),
    pytest.param(_operator_to_missing_opcode, "uses opcode 999", id="operator-missing-opcode"),
    pytest.param(_operator_to_missing_tensor, "refers to tensor 123456", id="operator-missing-tensor"),
    pytest.param(_huge_custom_options, "a vector of 2147483647 elements", id="custom-options-0x7fffffff"),
    pytest.param(_schema_version_4, "schema version 4", id="schema-version-4"),
    pytest.param(_wrong_identifier, "lacks the 'TFL3' file identifier", id="wrong-identifier"),
    pytest.param(_bad_vtable, "impossible size 3", id="odd-vtable-size"),
]


@pytest.mark.parametrize("name", [SMALL, SSD, V2, EDGETPU])
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.99])
def test_truncated_real_model_is_model_error(shared_models: Path, name: str, fraction: float) -> None:
    data = shared_model(shared_models, name).read_bytes()
    with pytest.raises(ModelError, match="corrupt or truncated"):
        parse_tflite(_truncate(fraction)(data))


@pytest.mark.parametrize(("patch", "fragment"), PATCHES)
def test_patched_real_model_is_model_error(shared_models: Path, patch: Callable[[bytearray], None],
                                           fragment: str) -> None:
    data = bytearray(shared_model(shared_models, SSD).read_bytes())
    patch(data)
    tracemalloc.start()
    try:
        with pytest.raises(ModelError) as err:
            parse_tflite(bytes(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert fragment in str(err.value)
    assert peak < 64 * 1024**2, f"parsing a malformed file allocated {peak / 1e6:.0f} MB"


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 4), (1, 2, 3)).save(buf, "PNG")
    return buf.getvalue()


def _jpeg() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 10, 10)).save(buf, "JPEG")
    return buf.getvalue()


def _zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("model.tflite", b"not really")
    return buf.getvalue()


def _random() -> bytes:
    import random

    return bytes(random.Random(0).getrandbits(8) for _ in range(4096))


BAD_FILES = [
    pytest.param(lambda p: p.write_bytes(b""), "is empty (0 bytes)", id="empty"),
    pytest.param(lambda p: p.write_bytes(b"TFL"), "only 3 bytes", id="3-bytes"),
    pytest.param(lambda p: p.write_bytes(_random()), "lacks the 'TFL3' file identifier", id="random-bytes"),
    pytest.param(lambda p: p.write_bytes(_png()), "a PNG image", id="png-renamed"),
    pytest.param(lambda p: p.write_bytes(_jpeg()), "a JPEG image", id="jpeg-renamed"),
    pytest.param(lambda p: p.write_bytes(_zip()), "a zip archive", id="zip"),
    pytest.param(lambda p: p.write_bytes(b'{"model": 1}'), "a JSON or text file", id="json"),
    pytest.param(lambda p: p.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(64)), "HDF5", id="keras-h5"),
    pytest.param(lambda p: p.mkdir(), "is a directory", id="directory"),
    pytest.param(lambda p: None, "does not exist", id="missing"),
    pytest.param(lambda p: p.write_bytes(b"\x00\x00\x00\x00TFL3" + bytes(8)), "a vtable has an impossible size 0",
                 id="identifier-only"),
    pytest.param(lambda p: p.write_bytes(b"\xff\xff\xff\x7fTFL3" + bytes(8)), "lies outside the file",
                 id="root-offset-past-end"),
]


@pytest.mark.parametrize(("make", "fragment"), BAD_FILES)
def test_bad_file_is_model_error(tmp_path: Path, make: Callable[[Path], None], fragment: str) -> None:
    path = tmp_path / "model.tflite"
    make(path)
    with pytest.raises(ModelError) as err:
        validate_model_file(path)
    assert fragment in str(err.value)
    with pytest.raises(ModelError):
        inspect_model(path)


def test_saved_model_directory_gets_convert_hint(tmp_path: Path) -> None:
    (tmp_path / "saved_model.pb").write_bytes(b"\x08\x01")
    with pytest.raises(ModelError, match="SavedModel: convert it first"):
        validate_model_file(tmp_path)


def test_missing_file_lists_nearby_models(tmp_path: Path) -> None:
    (tmp_path / "detector.tflite").write_bytes(b"x")
    with pytest.raises(ModelError, match="detector.tflite"):
        validate_model_file(tmp_path / "detectr.tflite")


@pytest.mark.parametrize(("name", "ops", "edgetpu", "input_shape", "input_dtype", "custom"), [
    (SSD, {"CONV_2D": 34, "DEPTHWISE_CONV_2D": 13}, False, (1, 300, 300, 3), "uint8",
     ("TFLite_Detection_PostProcess",)),
    (V2, {"CONV_2D": 36, "DEPTHWISE_CONV_2D": 17}, False, (1, 224, 224, 3), "uint8", ()),
    (SMALL, {"CONV_2D": 15, "DEPTHWISE_CONV_2D": 13}, False, (1, 128, 128, 3), "uint8", ()),
    (EDGETPU, {"edgetpu-custom-op": 1}, True, (1, 128, 128, 3), "uint8", ("edgetpu-custom-op",)),
])
def test_real_model_parses(shared_models: Path, name: str, ops: dict[str, int], edgetpu: bool,
                           input_shape: tuple[int, ...], input_dtype: str, custom: tuple[str, ...]) -> None:
    info = inspect_model(shared_model(shared_models, name))
    assert {k: info.ops.get(k) for k in ops} == ops
    assert info.edgetpu_compiled is edgetpu
    assert info.inputs[0].shape == input_shape
    assert info.inputs[0].dtype.name == input_dtype
    assert info.inputs[0].quantized
    assert info.custom_ops == custom
    assert info.metadata is None  # third-party models carry no edgekit metadata


def test_real_model_quantization_read_from_file(shared_models: Path) -> None:
    info = inspect_model(shared_model(shared_models, V2))
    (inp,), (out,) = info.inputs, info.outputs
    assert (inp.scale, inp.zero_point) == (0.0078125, 128)
    assert (out.shape, out.scale, out.zero_point) == ((1, 1001), 0.00390625, 0)
    assert "TFLITE_METADATA" in info.other_metadata


def test_random_mutations_never_escape_as_other_errors(shared_models: Path) -> None:
    """Flip bytes all over a real model: parsing either succeeds or raises ModelError."""
    import random

    data = shared_model(shared_models, SMALL).read_bytes()
    rng = random.Random(1234)
    outcomes = {"ok": 0, "ModelError": 0}
    for _ in range(300):
        b = bytearray(data)
        # Most of the file is weights; aim half the flips at the flatbuffer's tables (head and tail).
        for _ in range(rng.randint(1, 8)):
            region = rng.choice([(0, 2048), (len(b) - 30000, len(b)), (0, len(b))])
            b[rng.randrange(*region)] = rng.randrange(256)
        try:
            parse_tflite(bytes(b))
            outcomes["ok"] += 1
        except ModelError:
            outcomes["ModelError"] += 1
    assert outcomes["ModelError"] > 0 and sum(outcomes.values()) == 300
