"""Line programs decoded from hand-made bytes: bfd's rules on rows, sequences and file names."""
from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest

from tracer.symbols.dwarf import DwarfFormatError
from tracer.symbols.dwarf.lines import decode_line_program, file_name

STD_LENGTHS = bytes([0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1])
LINE_BASE, LINE_RANGE, OPCODE_BASE = -5, 14, 13


def uleb(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def sleb(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        done = (v == 0 and not b & 0x40) or (v == -1 and b & 0x40)
        out.append(b | (0 if done else 0x80))
        if done:
            return bytes(out)


def set_address(a: int) -> bytes:
    return b"\x00" + uleb(9) + b"\x02" + struct.pack("<Q", a)


END_SEQUENCE = b"\x00\x01\x01"
COPY = b"\x01"


def advance_pc(n: int) -> bytes:
    return b"\x02" + uleb(n)


def advance_line(n: int) -> bytes:
    return b"\x03" + sleb(n)


def set_file(n: int) -> bytes:
    return b"\x04" + uleb(n)


def special(addr_adv: int, line_adv: int) -> bytes:
    return bytes([(line_adv - LINE_BASE) + LINE_RANGE * addr_adv + OPCODE_BASE])


def discriminator(n: int) -> bytes:
    body = b"\x04" + uleb(n)
    return b"\x00" + uleb(len(body)) + body


def program_v4(dirs: list[str], files: list[tuple[str, int]], program: bytes) -> bytes:
    header = bytes([1, 1, 1]) + struct.pack("<b", LINE_BASE) + bytes([LINE_RANGE, OPCODE_BASE]) + STD_LENGTHS
    header += b"".join(d.encode() + b"\0" for d in dirs) + b"\0"
    header += b"".join(n.encode() + b"\0" + uleb(d) + b"\0\0" for n, d in files) + b"\0"
    body = struct.pack("<H", 4) + struct.pack("<I", len(header)) + header + program
    return struct.pack("<I", len(body)) + body


def program_v5(dirs: list[str], files: list[tuple[str, int]], program: bytes) -> bytes:
    header = bytes([1, 1, 1]) + struct.pack("<b", LINE_BASE) + bytes([LINE_RANGE, OPCODE_BASE]) + STD_LENGTHS
    header += bytes([1]) + uleb(1) + uleb(0x08)  # directories: DW_LNCT_path as DW_FORM_string
    header += uleb(len(dirs)) + b"".join(d.encode() + b"\0" for d in dirs)
    header += bytes([2]) + uleb(1) + uleb(0x08) + uleb(2) + uleb(0x0F)  # files: path string, dir udata
    header += uleb(len(files)) + b"".join(n.encode() + b"\0" + uleb(d) for n, d in files)
    body = struct.pack("<H", 5) + bytes([8, 0]) + struct.pack("<I", len(header)) + header + program
    return struct.pack("<I", len(body)) + body


def decode(data: bytes, comp_dir: str | None = "/src"):
    reader = SimpleNamespace(line=data, line_str=None, str=None)
    return decode_line_program(reader, 0, comp_dir)


def test_last_row_at_an_address_wins_and_rows_cover_until_the_next():
    prog = (set_address(0x1000) + COPY + advance_line(4) + COPY  # two rows at 0x1000: line 5 wins
            + special(2, 1)                                       # 0x1002 line 6
            + discriminator(3) + special(3, 0)                    # 0x1005 line 6, discriminator 3
            + advance_pc(3) + END_SEQUENCE)                       # ends at 0x1008
    lt = decode(program_v4([], [("a.c", 0)], prog))
    assert lt.lookup(0x1000) == ("/src/a.c", 5, 0)
    assert lt.lookup(0x1001) == ("/src/a.c", 5, 0)
    assert lt.lookup(0x1002) == ("/src/a.c", 6, 0)
    assert lt.lookup(0x1007) == ("/src/a.c", 6, 3)
    assert lt.lookup(0x1008) is None  # the end of the sequence is outside it
    assert lt.lookup(0x0FFF) is None


def test_nested_sequences_are_dropped_and_overlapping_ones_trimmed():
    first = set_address(0x1000) + COPY + advance_pc(0x10) + END_SEQUENCE                      # [0x1000, 0x1010)
    nested = set_address(0x1004) + advance_line(99) + COPY + advance_pc(4) + END_SEQUENCE     # inside: dropped
    overlapping = set_address(0x1008) + advance_line(9) + COPY + advance_pc(0x10) + END_SEQUENCE  # trimmed
    lt = decode(program_v4([], [("a.c", 0)], first + nested + overlapping))
    assert lt.lookup(0x1006) == ("/src/a.c", 1, 0)
    assert lt.lookup(0x100C) == ("/src/a.c", 1, 0)  # still the first sequence
    assert lt.lookup(0x1010) == ("/src/a.c", 10, 0)  # the trimmed one takes over where the first ends
    assert lt.lookup(0x1017) == ("/src/a.c", 10, 0)


def test_dwarf4_file_names_use_comp_dir_and_one_based_numbers():
    prog = set_address(0x2000) + set_file(2) + COPY + advance_pc(2) + set_file(3) + COPY + advance_pc(2) + END_SEQUENCE
    lt = decode(program_v4(["inc", "/usr/include"], [("a.c", 0), ("b.h", 1), ("c.h", 2)], prog))
    assert lt.files[0] == "<unknown>"
    assert lt.lookup(0x2000)[0] == "/src/inc/b.h"
    assert lt.lookup(0x2002)[0] == "/usr/include/c.h"
    assert decode(program_v4([], [("a.c", 0)], set_address(0) + COPY + advance_pc(1) + END_SEQUENCE),
                  comp_dir=None).files[1] == "a.c"


def test_dwarf5_file_names_are_zero_based_with_directory_zero_the_unit_directory():
    prog = set_address(0x3000) + set_file(0) + COPY + advance_pc(2) + set_file(1) + COPY + advance_pc(2) + END_SEQUENCE
    lt = decode(program_v5(["/abs/build", "rel"], [("a.c", 0), ("b.h", 1)], prog), comp_dir="/comp")
    assert lt.lookup(0x3000)[0] == "/abs/build/a.c"
    assert lt.lookup(0x3002)[0] == "/comp/rel/b.h"


def test_the_file_register_starts_at_one_as_the_standard_says():
    # binutils 2.40's addr2line reports file 0 here for DWARF 5; gdb and readelf say file 1, as do we.
    prog = set_address(0x4000) + advance_line(9) + COPY + advance_pc(2) + END_SEQUENCE
    lt = decode(program_v5(["/d"], [("main.c", 0), ("header.h", 0)], prog))
    assert lt.lookup(0x4000) == ("/d/header.h", 10, 0)


def test_file_name_rules_of_concat_filename():
    names = [("abs.c", 0), ("/x/abs.h", 1), ("rel.h", 2)]
    dirs = ["/root", "sub"]
    assert file_name(names, dirs, "/comp", 2, v5=False) == "/x/abs.h"
    assert file_name(names, dirs, "/comp", 3, v5=False) == "/comp/sub/rel.h"
    assert file_name(names, dirs, "/comp", 9, v5=False) == "<unknown>"
    assert file_name(names, dirs, None, 3, v5=False) == "sub/rel.h"


def test_a_program_longer_than_its_section_is_a_format_error():
    data = program_v4([], [("a.c", 0)], set_address(0x1000) + COPY + END_SEQUENCE)
    with pytest.raises(DwarfFormatError):
        decode(struct.pack("<I", 1000) + data[4:])  # says 1000 bytes follow; far fewer do
