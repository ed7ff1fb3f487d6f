"""LEB128 numbers, as DWARF (DWARF 5, 7.6) and ``.eh_frame`` write them: the one reader of the DWARF decoder
(``symbols/dwarf``) and of the unwind tables (``symbols/ehframe.py``). Standard library only: the agent inside
gdb reads unwind tables with it.

A number cut off by the end of its bytes raises ``IndexError`` (the read past them); one longer than any
producer writes raises ``LebTooLong``, a ``ValueError``: decoding damaged bytes on would build ever larger
integers, quadratically.
"""
from __future__ import annotations

# Longer than any LEB128 a producer writes (10 bytes hold 64 bits): beyond it the bytes are not a number.
_MAX_SHIFT = 70


class LebTooLong(ValueError):
    """Bytes that keep their continuation bit past 10 bytes: not a LEB128 number."""


def uleb(data, pos: int) -> tuple[int, int]:
    """An unsigned LEB128 at ``pos``: (value, position after it)."""
    b = data[pos]
    if b < 0x80:  # most numbers in DWARF and CFI are one byte
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > _MAX_SHIFT:
            raise LebTooLong(f"LEB128 number longer than 10 bytes at {pos - 11:#x}")


def sleb(data, pos: int) -> tuple[int, int]:
    """A signed LEB128 at ``pos``: (value, position after it)."""
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            if b & 0x40:
                result -= 1 << shift
            return result, pos
        if shift > _MAX_SHIFT:
            raise LebTooLong(f"LEB128 number longer than 10 bytes at {pos - 11:#x}")
