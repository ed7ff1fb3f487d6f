"""CPython 3.11+ ``co_linetable`` decoding: which source line an instruction offset belongs to.

Pure logic (no gdb), used by the agent on tables read from the target's memory, and tested against
CPython's own ``code.co_lines()``. The format is described in CPython's Objects/locations.md: a
sequence of entries, each covering 1-8 code units, whose first byte has the high bit set, a 4-bit
code and a 3-bit length.
"""
from __future__ import annotations


def _varint(table: bytes, i: int) -> tuple[int, int]:
    b = table[i]
    i += 1
    val = b & 63
    shift = 0
    while b & 64:
        b = table[i]
        i += 1
        shift += 6
        val |= (b & 63) << shift
    return val, i


def _svarint(table: bytes, i: int) -> tuple[int, int]:
    val, i = _varint(table, i)
    return (-(val >> 1) if val & 1 else val >> 1), i


def line_ranges(table: bytes, firstlineno: int) -> list[tuple[int, int, int | None]]:
    """Decode a 3.11 ``co_linetable`` into (start_unit, end_unit, line) ranges."""
    out: list[tuple[int, int, int | None]] = []
    line = firstlineno
    unit = 0
    i = 0
    n = len(table)
    try:
        _decode(table, n, out, line, unit, i)
    except IndexError:
        pass  # a table cut short (a torn read from the target): keep what decoded cleanly
    return out


def _decode(table: bytes, n: int, out: list, line: int, unit: int, i: int) -> None:
    while i < n:
        first = table[i]
        i += 1
        if not first & 0x80:
            break  # not at an entry start: the table is not what we expect
        code = (first >> 3) & 15
        length = (first & 7) + 1
        entry_line: int | None
        if code == 15:  # no location
            entry_line = None
        elif code == 14:  # long form
            delta, i = _svarint(table, i)
            line += delta
            entry_line = line
            _, i = _varint(table, i)  # end line delta
            _, i = _varint(table, i)  # start column
            _, i = _varint(table, i)  # end column
        elif code == 13:  # no column info
            delta, i = _svarint(table, i)
            line += delta
            entry_line = line
        elif code >= 10:  # one-line form: delta in the code, two column bytes
            line += code - 10
            entry_line = line
            i += 2
        else:  # short form: same line, one column byte
            entry_line = line
            i += 1
        out.append((unit, unit + length, entry_line))
        unit += length


def line_at(ranges: list[tuple[int, int, int | None]], unit: int) -> int | None:
    """The line of the instruction at code-unit offset ``unit`` (None: no location)."""
    for start, end, line in ranges:
        if start <= unit < end:
            return line
    return None
