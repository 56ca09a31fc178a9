"""Bounds-checked access to the tables, vectors and strings of one flatbuffer.

The primitive layer under :mod:`edgekit.runtimes.tflite_file`: every read is checked
against the file's size before it happens, vectors are measured before they are
iterated, and the bytes decoded in total are capped, so a malformed file costs a
:class:`~edgekit.errors.ModelError`, never memory or a crash. Pure Python.
"""

from __future__ import annotations

import struct
from typing import Callable

from edgekit.errors import ModelError

__all__ = ["FlatReader"]

_I8, _U16, _I32, _U32, _U64 = (struct.Struct(f).unpack_from for f in ("<b", "<H", "<i", "<I", "<Q"))


class FlatReader:
    """Bounds-checked access to flatbuffer tables and vectors in one bytes object."""

    def __init__(self, data: bytes, label: str) -> None:
        self.data = data
        self.n = len(data)
        self.label = label
        self.max_end = 0  # the furthest byte any checked read reached: where the flatbuffer ends
        # Bytes of vectors and strings decoded so far may not exceed this. Offsets may alias,
        # so a small file can name one large vector from a million places (a memory bomb);
        # a file a converter wrote decodes each byte about once.
        self.budget = 2 * len(data) + 65536
        self._vtable_of = (-1, 0, 0)  # (table, its vtable, the vtable's size) of the last field_pos

    def fail(self, what: str) -> ModelError:
        return ModelError(
            f"{self.label} is corrupt or truncated: {what}. Copy the file again from its source "
            "(check its size and checksum), or re-export it."
        )

    def check(self, pos: int, size: int, what: str) -> None:
        """Check a region lies in the file, and count it as part of the flatbuffer (see max_end)."""
        end = pos + size
        if pos < 0 or size < 0 or end > self.n:
            raise self.fail(f"{what} lies outside the file (byte {pos}, {size} bytes, file has {self.n})")
        if end > self.max_end:
            self.max_end = end

    def within(self, pos: int, size: int, what: str) -> None:
        """Check a region lies in the file without counting it as part of the flatbuffer."""
        if pos < 0 or size < 0 or pos + size > self.n:
            raise self.fail(f"{what} lies outside the file (byte {pos}, {size} bytes, file has {self.n})")

    def u8(self, pos: int) -> int:
        self.check(pos, 1, "a byte field")
        return self.data[pos]

    def i8(self, pos: int) -> int:
        self.check(pos, 1, "a byte field")
        return int(_I8(self.data, pos)[0])

    def u16(self, pos: int) -> int:
        self.check(pos, 2, "a vtable entry")
        return int(_U16(self.data, pos)[0])

    def i32(self, pos: int) -> int:
        self.check(pos, 4, "an int field")
        return int(_I32(self.data, pos)[0])

    def u32(self, pos: int) -> int:
        self.check(pos, 4, "an offset")
        return int(_U32(self.data, pos)[0])

    def u64(self, pos: int) -> int:
        self.check(pos, 8, "a 64-bit field")
        return int(_U64(self.data, pos)[0])

    # --- tables -------------------------------------------------------------------------
    def field_pos(self, table: int, index: int) -> int:
        """Absolute position of field `index` of the table at `table`, or 0 if absent.

        The checks of i32, check and u16 written out (same order, same messages): this runs for
        every field of every table, ~20,000 times for an SSD, where a method call per read was
        most of the parse's time. Once the vtable's extent is checked, its entries need no check,
        and the fields of one table are read one after another: its vtable is checked once.
        """
        data = self.data
        if table == self._vtable_of[0]:  # the table asked before: its vtable passed these checks (the bytes do not change)
            vtable, vsize = self._vtable_of[1], self._vtable_of[2]
        else:
            n = self.n
            if table < 0 or table + 4 > n:
                raise self.fail(f"an int field lies outside the file (byte {table}, 4 bytes, file has {n})")
            vtable = table - _I32(data, table)[0]
            if vtable < 0 or vtable + 4 > n:
                raise self.fail(f"a vtable lies outside the file (byte {vtable}, 4 bytes, file has {n})")
            vsize = _U16(data, vtable)[0]
            if vsize < 4 or vsize % 2:
                raise self.fail(f"a vtable has an impossible size {vsize}")
            end = vtable + vsize
            if end > n:
                raise self.fail(f"a vtable lies outside the file (byte {vtable}, {vsize} bytes, file has {n})")
            if table + 4 > end:
                end = table + 4
            if end > self.max_end:
                self.max_end = end
            self._vtable_of = (table, vtable, vsize)
        slot = 4 + 2 * index
        if slot >= vsize:
            return 0
        off = int(_U16(data, vtable + slot)[0])
        if off == 0:
            return 0
        if off >= _U16(data, vtable + 2)[0]:
            raise self.fail("a table field points past its table")
        return table + off

    def deref(self, pos: int) -> int:
        """The table or vector the offset at `pos` points to: u32 and check written out (same order,
        same messages), as field_pos is; ~800 calls for a small model."""
        n = self.n
        if pos < 0 or pos + 4 > n:
            raise self.fail(f"an offset lies outside the file (byte {pos}, 4 bytes, file has {n})")
        target: int = pos + _U32(self.data, pos)[0]
        end = target + 4
        if end > n:
            raise self.fail(f"a referenced table or vector lies outside the file (byte {target}, 4 bytes, file has {n})")
        if end > self.max_end:  # target > pos: it also covers the offset's own bytes
            self.max_end = end
        return target

    def table(self, table: int, index: int) -> int:
        pos = self.field_pos(table, index)
        return self.deref(pos) if pos else 0

    def scalar(self, table: int, index: int, kind: str, default: int = 0) -> int:
        pos = self.field_pos(table, index)
        if not pos:
            return default
        read: Callable[[FlatReader, int], int] = _SCALARS[kind]  # a table of functions, not a dict per call
        return read(self, pos)

    def vector(self, table: int, index: int, elem_size: int) -> tuple[int, int]:
        """(start, length) of a vector field; (0, 0) when absent."""
        pos = self.field_pos(table, index)
        if not pos:
            return 0, 0
        vec = self.deref(pos)
        length = int(_U32(self.data, vec)[0])  # deref checked these 4 bytes
        # Check the whole extent before anyone iterates: a huge count fails here (check written out:
        # its message is made only for a failure).
        size = length * elem_size
        end = vec + 4 + size
        if end > self.n:
            raise self.fail(f"a vector of {length} elements lies outside the file (byte {vec + 4}, {size} bytes, "
                            f"file has {self.n})")
        if end > self.max_end:
            self.max_end = end
        return vec + 4, length

    def spend(self, nbytes: int) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            raise self.fail(f"its tables refer to the same data over and over (more than {2 * self.n + 65536:,} "
                            "bytes of vectors decoded from a file this size)")

    def string(self, table: int, index: int, what: str = "") -> str:
        """A string field; with `what`, one that must be UTF-8 (interpreters decode it strictly)."""
        start, length = self.vector(table, index, 1)
        if not start:
            return ""
        self.spend(length)
        raw = self.data[start:start + length]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            if what:
                raise self.fail(f"{what} is not UTF-8 text ({raw[:16]!r})") from None
            return raw.decode("utf-8", errors="replace")

    def ints(self, table: int, index: int, fmt: str = "i", limit: int | None = None,
             what: str = "a vector") -> tuple[int, ...]:
        """A vector of numbers; with `limit`, refused before decoding when longer."""
        size = _SIZES.get(fmt) or struct.calcsize("<" + fmt)
        start, length = self.vector(table, index, size)
        if limit is not None and length > limit:
            raise self.fail(f"{what} has {length:,} entries, at most {limit} make sense")
        self.spend(length * size)
        return struct.unpack_from(f"<{length}{fmt}", self.data, start) if length else ()

    def tables(self, table: int, index: int) -> list[int]:
        start, length = self.vector(table, index, 4)
        self.spend(16 * length)  # the offsets, and the fields read from each table
        return [self.deref(start + 4 * i) for i in range(length)]


_SCALARS: dict[str, Callable[[FlatReader, int], int]] = {
    "u8": FlatReader.u8, "i8": FlatReader.i8, "i32": FlatReader.i32, "u32": FlatReader.u32, "u64": FlatReader.u64}
_SIZES = {f: struct.calcsize("<" + f) for f in ("i", "f", "q", "b", "B", "h", "H", "I", "Q")}
