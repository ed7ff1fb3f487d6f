"""The one LEB128 reader of the DWARF decoder and of the unwind tables the agent reads inside gdb
(tracer/symbols/leb128.py), against the DWARF standard's own examples and pyelftools' decoder."""
from __future__ import annotations

import mmap
import random

import pytest
from elftools.common.construct_utils import SLEB128, ULEB128

from tracer.symbols.dwarf import DECODE_ERRORS
from tracer.symbols.leb128 import LebTooLong, sleb, uleb

# DWARF 5, 7.6, figures 22 and 23: examples of unsigned and signed LEB128 encodings.
UNSIGNED = [(2, b"\x02"), (127, b"\x7f"), (128, b"\x80\x01"), (129, b"\x81\x01"), (130, b"\x82\x01"),
            (12857, b"\xb9\x64")]
SIGNED = [(2, b"\x02"), (-2, b"\x7e"), (127, b"\xff\x00"), (-127, b"\x81\x7f"), (128, b"\x80\x01"),
          (-128, b"\x80\x7f"), (129, b"\x81\x01"), (-129, b"\xff\x7e")]


@pytest.mark.parametrize("value,encoded", UNSIGNED)
def test_the_standards_unsigned_examples(value, encoded):
    assert uleb(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))


@pytest.mark.parametrize("value,encoded", SIGNED)
def test_the_standards_signed_examples(value, encoded):
    assert sleb(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))


def test_random_encodings_read_as_pyelftools_reads_them():
    rng = random.Random(7)
    for _ in range(2000):
        # 1 to 10 bytes, every one but the last with its continuation bit
        n = rng.randint(1, 10)
        raw = bytes([rng.randrange(0x80, 0x100) for _ in range(n - 1)] + [rng.randrange(0x80)])
        assert uleb(raw, 0) == (ULEB128("x").parse(raw), n), raw.hex()
        assert sleb(raw, 0) == (SLEB128("x").parse(raw), n), raw.hex()


@pytest.mark.parametrize("kind", [bytes, memoryview, "mmap"])
def test_a_number_cut_off_by_the_end_of_its_bytes_raises(kind):
    """What the unwind tables' reader always did (symbols/ehframe.py runs FDEs from bytes and reads CIEs from
    the mapped file), and what the DWARF decoder counts among its DECODE_ERRORS."""
    raw = b"\x00\x85\x80"
    if kind == "mmap":
        data = mmap.mmap(-1, len(raw))
        data.write(raw)
    else:
        data = kind(raw)
    for read in (uleb, sleb):
        with pytest.raises(IndexError):
            read(data, 1)
        with pytest.raises(DECODE_ERRORS):
            read(data, 1)


def test_a_number_longer_than_ten_bytes_is_refused():
    """Damaged bytes are not read on into ever larger integers: past ten bytes (64 bits and more) a
    ValueError, which the DWARF decoder counts among its DECODE_ERRORS and the agent's unwinder among
    the errors that leave a frame to gdb (gdb/agent/errors.py's READ_ERRORS)."""
    raw = b"\x01" + b"\xff" * 11 + b"\x01"  # its eleventh byte goes on still
    for read in (uleb, sleb):
        with pytest.raises(LebTooLong, match="LEB128 number longer than 10 bytes at 0x1"):
            read(raw, 1)
    assert issubclass(LebTooLong, ValueError)
    assert uleb(b"\xff" * 9 + b"\x01", 0) == (2 ** 64 - 1, 10)  # ten bytes still read
