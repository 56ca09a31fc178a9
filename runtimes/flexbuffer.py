"""A bounds-checked reader of the one FlexBuffer shape TFLite custom ops use: a flat map of scalars.

TFLite's built-in custom ops (TFLite_Detection_PostProcess, Mfcc, AudioSpectrogram,
NumericVerify) parse their options with ``flexbuffers::GetRoot(...).AsMap()``, which
trusts every offset in the buffer: garbage options crash the interpreter while it is
created, before any check of its own runs. This reader accepts only a map whose keys,
values and type bytes all lie inside the buffer, with scalar values, and returns it as a
dict, so the interpreter never sees options that would make it read outside them.
"""

from __future__ import annotations

import math
import struct

__all__ = ["FlexBufferError", "read_flat_map"]

# FlexBuffer value types (flexbuffers.h)
_NULL, _INT, _UINT, _FLOAT, _KEY, _STRING = 0, 1, 2, 3, 4, 5
_INDIRECT_INT, _INDIRECT_UINT, _INDIRECT_FLOAT, _MAP, _BOOL = 6, 7, 8, 9, 26
_MAX_KEYS = 256


class FlexBufferError(ValueError):
    """The bytes are not a flat FlexBuffer map that lies wholly inside them."""


def _uint(data: bytes, pos: int, width: int) -> int:
    if width not in (1, 2, 4, 8):
        raise FlexBufferError(f"byte width {width} is not 1, 2, 4 or 8")
    if pos < 0 or pos + width > len(data):
        raise FlexBufferError(f"a {width}-byte field at {pos} lies outside the {len(data)} bytes")
    return int.from_bytes(data[pos:pos + width], "little")


def _back(data: bytes, pos: int, width: int, what: str) -> int:
    """Follow an offset stored at `pos`: flexbuffer offsets point backwards."""
    target = pos - _uint(data, pos, width)
    if target < 0 or target >= len(data):
        raise FlexBufferError(f"{what} points outside the buffer")
    return target


def _key(data: bytes, pos: int) -> str:
    end = data.find(b"\0", pos)
    if end < 0:
        raise FlexBufferError("a key has no terminating NUL inside the buffer")
    return data[pos:end].decode("utf-8", errors="replace")


def _scalar(data: bytes, pos: int, width: int, packed: int) -> int | float | bool | None:
    vtype, child_width = packed >> 2, 1 << (packed & 3)
    if vtype == _NULL:
        return None
    if vtype in (_INT, _UINT, _BOOL):
        raw = _uint(data, pos, width)
        if vtype == _BOOL:
            return bool(raw)
        return raw - (1 << (8 * width)) if vtype == _INT and raw >> (8 * width - 1) else raw
    if vtype == _FLOAT:
        if width not in (4, 8) or pos < 0 or pos + width > len(data):
            raise FlexBufferError(f"a float value of {width} bytes at {pos} does not fit the buffer")
        return float(struct.unpack_from("<f" if width == 4 else "<d", data, pos)[0])
    if vtype in (_INDIRECT_INT, _INDIRECT_UINT, _INDIRECT_FLOAT):
        target = _back(data, pos, width, "an indirect value")
        return _scalar(data, target, child_width, ((vtype - 5) << 2) | (packed & 3))
    raise FlexBufferError(f"a value of type {vtype} (only numbers and booleans are expected)")


def read_flat_map(data: bytes) -> dict[str, int | float | bool | None]:
    """The map at the root of a FlexBuffer, every key and value checked to lie inside `data`.

    Raises:
        FlexBufferError: the buffer is empty, its root is not a map, an offset or size
            points outside it, or a value is not a number or boolean.
    """
    n = len(data)
    if n < 3:
        raise FlexBufferError(f"{n} bytes are too few for a FlexBuffer")
    root_width = data[-1]
    packed = data[-2]
    root_pos = n - 2 - root_width
    if packed >> 2 != _MAP:
        raise FlexBufferError(f"the root is of type {packed >> 2}, not a map")
    map_pos = _back(data, root_pos, root_width, "the root map")
    width = 1 << (packed & 3)
    size = _uint(data, map_pos - width, width)
    if size > _MAX_KEYS:
        raise FlexBufferError(f"a map of {size} entries")
    types_pos = map_pos + size * width
    if types_pos + size > n:
        raise FlexBufferError("the map's values or their types lie outside the buffer")
    keys_width = _uint(data, map_pos - 2 * width, width)
    keys_pos = _back(data, map_pos - 3 * width, width, "the map's keys")
    if _uint(data, keys_pos - keys_width, keys_width) != size:
        raise FlexBufferError("the map has a different number of keys and values")
    if keys_pos + size * keys_width > n:
        raise FlexBufferError("the map's keys lie outside the buffer")
    out: dict[str, int | float | bool | None] = {}
    for i in range(size):
        key = _key(data, _back(data, keys_pos + i * keys_width, keys_width, "a key"))
        value = _scalar(data, map_pos + i * width, width, data[types_pos + i])
        if isinstance(value, float) and not math.isfinite(value):
            raise FlexBufferError(f"option {key!r} is {value}")
        out[key] = value
    if list(out) != sorted(out, key=lambda k: k.encode()):
        # The C++ lookup is a binary search: unsorted keys would silently read as absent.
        raise FlexBufferError("the map's keys are not sorted")
    return out
