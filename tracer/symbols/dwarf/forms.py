"""DWARF's vocabulary: the tags, attributes and forms we act on, and the little readers (strings, initial
lengths) every decoder of a section uses; LEB128 numbers are read by ``tracer.symbols.leb128``, which the
unwind tables' reader shares.

The readers index the bytes directly and let Python's own checks catch what runs off the end: a
damaged or hostile file then raises one of ``DECODE_ERRORS``, which the package's entry points turn
into one ``SymbolError`` sentence (a try/except per byte would cost the hot loops a third).
"""
from __future__ import annotations

import struct

TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT, TAG_SKELETON_UNIT = 0x11, 0x3C, 0x4A
TAG_SUBPROGRAM, TAG_INLINED_SUBROUTINE, TAG_ENTRY_POINT = 0x2E, 0x1D, 0x03
FUNCTION_TAGS = (TAG_SUBPROGRAM, TAG_INLINED_SUBROUTINE, TAG_ENTRY_POINT)
# Types whose bodies hold no code-carrying DIEs (see functions.scan_functions): array, class, enum,
# struct, subroutine type, union, typedef.
TYPE_TAGS = frozenset({0x01, 0x02, 0x04, 0x13, 0x15, 0x17, 0x16})

AT_SIBLING, AT_NAME, AT_STMT_LIST, AT_LOW_PC, AT_HIGH_PC, AT_LANGUAGE = 0x01, 0x03, 0x10, 0x11, 0x12, 0x13
AT_COMP_DIR, AT_ABSTRACT_ORIGIN, AT_DECL_FILE, AT_DECL_LINE = 0x1B, 0x31, 0x3A, 0x3B
AT_SPECIFICATION, AT_RANGES, AT_CALL_FILE, AT_CALL_LINE = 0x47, 0x55, 0x58, 0x59
AT_LINKAGE_NAME, AT_MIPS_LINKAGE_NAME = 0x6E, 0x2007
AT_STR_OFFSETS_BASE, AT_ADDR_BASE, AT_RNGLISTS_BASE = 0x72, 0x73, 0x74
AT_GNU_RANGES_BASE, AT_GNU_ADDR_BASE = 0x2132, 0x2133

# Languages whose DW_AT_name is already the linkage name (bfd's mangle_style() == 0).
UNMANGLED_LANGUAGES = {0x0001, 0x0002, 0x000C, 0x001D, 0x8001, 0x0012, 0x8765, 0x8766, 0x8767}

F_ADDR, F_BLOCK2, F_BLOCK4, F_DATA2, F_DATA4, F_DATA8, F_STRING, F_BLOCK, F_BLOCK1 = 1, 3, 4, 5, 6, 7, 8, 9, 10
F_DATA1, F_FLAG, F_SDATA, F_STRP, F_UDATA, F_REF_ADDR, F_REF1, F_REF2, F_REF4 = 11, 12, 13, 14, 15, 16, 17, 18, 19
F_REF8, F_REF_UDATA, F_INDIRECT, F_SEC_OFFSET, F_EXPRLOC, F_FLAG_PRESENT = 20, 21, 22, 23, 24, 25
F_STRX, F_ADDRX, F_REF_SUP4, F_STRP_SUP, F_DATA16, F_LINE_STRP, F_REF_SIG8 = 26, 27, 28, 29, 30, 31, 32
F_IMPLICIT_CONST, F_LOCLISTX, F_RNGLISTX, F_REF_SUP8 = 33, 34, 35, 36
F_STRX1, F_STRX2, F_STRX3, F_STRX4, F_ADDRX1, F_ADDRX2, F_ADDRX3, F_ADDRX4 = 37, 38, 39, 40, 41, 42, 43, 44
F_GNU_ADDR_INDEX, F_GNU_STR_INDEX, F_GNU_REF_ALT, F_GNU_STRP_ALT = 0x1F01, 0x1F02, 0x1F20, 0x1F21

STRING_FORMS = {F_STRING, F_STRP, F_LINE_STRP, F_STRX, F_STRX1, F_STRX2, F_STRX3, F_STRX4, F_GNU_STR_INDEX,
                F_GNU_STRP_ALT, F_STRP_SUP}
STRX_FORMS = (F_STRX, F_STRX1, F_STRX2, F_STRX3, F_STRX4, F_GNU_STR_INDEX)
ADDRX_FORMS = (F_ADDRX, F_ADDRX1, F_ADDRX2, F_ADDRX3, F_ADDRX4, F_GNU_ADDR_INDEX)
REF_FORMS = {F_REF1, F_REF2, F_REF4, F_REF8, F_REF_UDATA, F_REF_ADDR}
UNIT_REF_FORMS = {F_REF1, F_REF2, F_REF4, F_REF8, F_REF_UDATA}
CONST_FORMS = {F_DATA1, F_DATA2, F_DATA4, F_DATA8, F_UDATA, F_SDATA, F_IMPLICIT_CONST}
ULEB_FORMS = (F_UDATA, F_REF_UDATA, F_STRX, F_ADDRX, F_LOCLISTX, F_RNGLISTX, F_GNU_ADDR_INDEX, F_GNU_STR_INDEX)

FIXED_SIZE = {F_DATA1: 1, F_REF1: 1, F_FLAG: 1, F_STRX1: 1, F_ADDRX1: 1, F_DATA2: 2, F_REF2: 2, F_STRX2: 2,
              F_ADDRX2: 2, F_STRX3: 3, F_ADDRX3: 3, F_DATA4: 4, F_REF4: 4, F_REF_SUP4: 4, F_STRX4: 4,
              F_ADDRX4: 4, F_DATA8: 8, F_REF8: 8, F_REF_SIG8: 8, F_REF_SUP8: 8, F_DATA16: 16,
              F_FLAG_PRESENT: 0, F_IMPLICIT_CONST: 0}
OFFSET_SIZED = {F_STRP, F_SEC_OFFSET, F_LINE_STRP, F_STRP_SUP, F_GNU_REF_ALT, F_GNU_STRP_ALT}


class DwarfFormatError(Exception):
    """The DWARF data is not what its headers promise."""


# What decoding damaged DWARF can raise: our own checks, and Python's when an offset or a length
# read from the file points outside the bytes (IndexError, struct.error, ValueError from a string
# with no end or a LEB128 number longer than any producer writes, OverflowError from a length no C
# integer holds).
DECODE_ERRORS = (DwarfFormatError, IndexError, ValueError, struct.error, OverflowError)


def cstr(data: bytes, pos: int) -> tuple[bytes, int]:
    """A NUL-terminated string at ``pos``: (its bytes, position after the NUL)."""
    end = data.index(b"\0", pos)
    return data[pos:end], end + 1


def str_at(section, offset: int) -> str | None:
    """The string at ``offset`` of a string section (bytes or a view of the mapped file)."""
    if section is None or not 0 <= offset < len(section):
        return None
    if isinstance(section, (bytes, bytearray)):
        end = section.find(b"\0", offset)
        raw = section[offset:end if end >= 0 else len(section)]
    else:
        raw = bytes(section[offset : offset + 4096])
        end = raw.find(b"\0")
        while end < 0 and offset + len(raw) < len(section):
            raw = bytes(section[offset : offset + 2 * len(raw)])
            end = raw.find(b"\0")
        raw = raw[:end] if end >= 0 else raw
    return raw.decode("utf-8", "replace")


def initial_length(data, pos: int) -> tuple[int, int, int]:
    """A unit's initial length field (32- or 64-bit DWARF): (length, position after it, offset size)."""
    length = struct.unpack_from("<I", data, pos)[0]
    if length == 0xFFFFFFFF:
        return struct.unpack_from("<Q", data, pos + 4)[0], pos + 12, 8
    return length, pos + 4, 4
