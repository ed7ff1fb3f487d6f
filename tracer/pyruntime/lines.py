"""Which source line a code object's instruction belongs to, from its ``co_linetable``, per version.

Ranges are (start, end, line) in code units (2 bytes); line None means no location. 3.11+ tables are
decoded by ``linetable.py``; 3.10's are pairs of bytes (offset delta in bytes, signed line
delta; -128: no line), described in 3.10's Objects/lnotab_notes.txt. Both are checked against
CPython's own ``code.co_lines()`` in tests/unit/test_pyruntime_lines.py.
"""
from __future__ import annotations

from .linetable import line_at, line_ranges

__all__ = ["line_at", "ranges_for"]


def line_ranges_310(table: bytes, firstlineno: int) -> list[tuple[int, int, int | None]]:
    """Decode a 3.10 ``co_linetable``: the line moves with every entry, empty ranges are dropped."""
    out = []
    line = firstlineno
    end = 0
    for i in range(0, len(table) - 1, 2):
        start = end
        end += table[i]
        delta = table[i + 1] - 256 if table[i + 1] > 127 else table[i + 1]
        entry_line: int | None
        if delta == -128:
            entry_line = None
        else:
            line += delta
            entry_line = line
        if end > start:
            out.append((start // 2, end // 2, entry_line))
    return out


def ranges_for(minor: int, table: bytes, firstlineno: int) -> list[tuple[int, int, int | None]]:
    return line_ranges_310(table, firstlineno) if minor == 10 else line_ranges(table, firstlineno)
