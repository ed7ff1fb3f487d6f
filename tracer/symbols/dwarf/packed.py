"""Compact integer arrays for the per-unit tables: what the on-disk cache stores as is."""
from __future__ import annotations

from array import array


def compact(values, signed: bool = False) -> array:
    """An array of the smallest item type that holds every value."""
    lo = min(values, default=0)
    hi = max(values, default=0)
    for code in ("bhiq" if signed or lo < 0 else "BHIQ"):
        bits = array(code).itemsize * 8
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if code.islower() else (0, (1 << bits) - 1)
        if low <= lo and hi <= high:
            return array(code, values)
    raise OverflowError("value out of 64-bit range")


def pack(a: array) -> tuple[str, bytes]:
    return a.typecode, a.tobytes()


def unpack(p: tuple[str, bytes]) -> array:
    a = array(p[0])
    a.frombytes(p[1])
    return a
