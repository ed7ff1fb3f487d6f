"""Address -> file:line, function and inlining chain, from DWARF 2-5, with answers equal to binutils'
``addr2line -f -C -i -e LIB ADDR``.

pyelftools' DIE API walks every unit and builds an object per DIE (6-23 s and up to 1.7 GB for one
lookup in a big debug build); here a lookup reads ``.debug_aranges`` -> the one unit that holds the
address -> that unit's line program and function DIEs, decoded by small hand-written readers. What
one unit yields (line rows, function ranges with resolved names) is stored in the on-disk cache, so
later lookups in that unit, in this process or the next, are a file read and a ``bisect``.

The answers follow bfd (binutils' DWARF reader) on purpose, including where it is surprising:
- the line of an address is the *last* row at the greatest row address <= the address, ``is_stmt``
  ignored; overlapping sequences are trimmed the way bfd trims them;
- the function is the one with the *smallest* range holding the address (ties: the later DIE), its
  name is its linkage name when it (or its abstract origin / specification) has one, else the ELF
  symbol at that address, else its ``DW_AT_name`` (one exception, kept apart in
  ``addr2line_function``: for *inlined* code without a linkage name bfd prints the symbol of the
  enclosing function, which is wrong; ``function`` gives DWARF's name there);
- file names are built like bfd's ``concat_filename`` (comp_dir / directory / name, DWARF 4 and 5
  numbering).
``decl_file``/``decl_line`` are reported as well, labelled: they are where the function is declared
(or defined, when the definition DIE says so), not what addr2line prints.
"""
from __future__ import annotations

import bisect
import os
import struct
import zlib
from array import array
from dataclasses import dataclass, field

from tracer.errors import SymbolError

from . import cache
from .elffile import ElfFile

# -- DWARF constants (only those we act on) -------------------------------------------------------
TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT, TAG_SKELETON_UNIT = 0x11, 0x3C, 0x4A
TAG_SUBPROGRAM, TAG_INLINED_SUBROUTINE, TAG_ENTRY_POINT = 0x2E, 0x1D, 0x03
FUNCTION_TAGS = (TAG_SUBPROGRAM, TAG_INLINED_SUBROUTINE, TAG_ENTRY_POINT)

AT_SIBLING, AT_NAME, AT_STMT_LIST, AT_LOW_PC, AT_HIGH_PC, AT_LANGUAGE = 0x01, 0x03, 0x10, 0x11, 0x12, 0x13
AT_COMP_DIR, AT_ABSTRACT_ORIGIN, AT_DECL_FILE, AT_DECL_LINE = 0x1B, 0x31, 0x3A, 0x3B
AT_SPECIFICATION, AT_RANGES, AT_CALL_FILE, AT_CALL_LINE = 0x47, 0x55, 0x58, 0x59
AT_LINKAGE_NAME, AT_MIPS_LINKAGE_NAME = 0x6E, 0x2007
AT_STR_OFFSETS_BASE, AT_ADDR_BASE, AT_RNGLISTS_BASE = 0x72, 0x73, 0x74
AT_GNU_RANGES_BASE, AT_GNU_ADDR_BASE = 0x2132, 0x2133

# Languages whose DW_AT_name is already the linkage name (bfd's mangle_style() == 0).
_UNMANGLED_LANGUAGES = {0x0001, 0x0002, 0x000C, 0x001D, 0x8001, 0x0012, 0x8765, 0x8766, 0x8767}

F_ADDR, F_BLOCK2, F_BLOCK4, F_DATA2, F_DATA4, F_DATA8, F_STRING, F_BLOCK, F_BLOCK1 = 1, 3, 4, 5, 6, 7, 8, 9, 10
F_DATA1, F_FLAG, F_SDATA, F_STRP, F_UDATA, F_REF_ADDR, F_REF1, F_REF2, F_REF4 = 11, 12, 13, 14, 15, 16, 17, 18, 19
F_REF8, F_REF_UDATA, F_INDIRECT, F_SEC_OFFSET, F_EXPRLOC, F_FLAG_PRESENT = 20, 21, 22, 23, 24, 25
F_STRX, F_ADDRX, F_REF_SUP4, F_STRP_SUP, F_DATA16, F_LINE_STRP, F_REF_SIG8 = 26, 27, 28, 29, 30, 31, 32
F_IMPLICIT_CONST, F_LOCLISTX, F_RNGLISTX, F_REF_SUP8 = 33, 34, 35, 36
F_STRX1, F_STRX2, F_STRX3, F_STRX4, F_ADDRX1, F_ADDRX2, F_ADDRX3, F_ADDRX4 = 37, 38, 39, 40, 41, 42, 43, 44
F_GNU_ADDR_INDEX, F_GNU_STR_INDEX, F_GNU_REF_ALT, F_GNU_STRP_ALT = 0x1F01, 0x1F02, 0x1F20, 0x1F21

_STRING_FORMS = {F_STRING, F_STRP, F_LINE_STRP, F_STRX, F_STRX1, F_STRX2, F_STRX3, F_STRX4, F_GNU_STR_INDEX,
                 F_GNU_STRP_ALT, F_STRP_SUP}
_REF_FORMS = {F_REF1, F_REF2, F_REF4, F_REF8, F_REF_UDATA, F_REF_ADDR}
_CONST_FORMS = {F_DATA1, F_DATA2, F_DATA4, F_DATA8, F_UDATA, F_SDATA, F_IMPLICIT_CONST}


class DwarfFormatError(Exception):
    """The DWARF data is not what its headers promise."""


@dataclass
class InlineStep:
    """A function that the code at the address was inlined into: its name, the call site (the
    file:line addr2line ``-i`` shows with it) and the function's own declaration."""

    function: str | None
    file: str | None
    line: int | None
    decl_file: str | None = None
    decl_line: int | None = None


@dataclass
class SourceLine:
    """What the debug information says about one address.

    ``file``/``line`` are the line-table answer (addr2line's); ``function`` is the innermost function
    (the inlined one, if any). ``inlined`` lists, outwards, the functions it was inlined into, each
    with the call site; it is empty when the address is not in inlined code. ``decl_file`` and
    ``decl_line`` are the innermost function's declaration (``DW_AT_decl_*``); ``outer_decl`` gives
    the declaration of the function the code really belongs to (the last of ``inlined``, or this one).
    ``addr2line_lines()`` renders all this exactly as ``addr2line -f -C -i`` prints it.
    """

    file: str | None
    line: int | None
    function: str | None
    discriminator: int = 0
    inlined: list[InlineStep] = field(default_factory=list)
    decl_file: str | None = None
    decl_line: int | None = None
    # What addr2line prints for the innermost function: the ELF symbol's name when DWARF gives the
    # function no linkage name, even for inlined code (``function`` keeps DWARF's name there).
    addr2line_function: str | None = field(default=None, repr=False)

    @property
    def location(self) -> str:
        return f"{self.file or '??'}:{self.line or '?'}"

    @property
    def outer_decl(self) -> tuple[str | None, int | None]:
        if self.inlined:
            return self.inlined[-1].decl_file, self.inlined[-1].decl_line
        return self.decl_file, self.decl_line

    def addr2line_lines(self) -> list[str]:
        """The answer in addr2line's ``-f -C -i`` text form (two lines per function). addr2line
        repeats the address's discriminator on every call-site line of the chain; so does this."""

        def where(file, line):
            if not line:
                return f"{file or '??'}:?"
            disc = f" (discriminator {self.discriminator})" if self.discriminator else ""
            return f"{file or '??'}:{line}{disc}"

        out = [self.addr2line_function or self.function or "??", where(self.file, self.line)]
        for step in self.inlined:
            out += [step.function or "??", where(step.file, step.line)]
        return out


# -- little readers -------------------------------------------------------------------------------
def _uleb(data, pos: int) -> tuple[int, int]:
    b = data[pos]
    if b < 0x80:
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


def _sleb(data, pos: int) -> tuple[int, int]:
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


def _cstr(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.index(b"\0", pos)
    return data[pos:end], end + 1


def _str_at(section, offset: int) -> str | None:
    if section is None or offset >= len(section):
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


_FIXED_SIZE = {F_DATA1: 1, F_REF1: 1, F_FLAG: 1, F_STRX1: 1, F_ADDRX1: 1, F_DATA2: 2, F_REF2: 2, F_STRX2: 2,
               F_ADDRX2: 2, F_STRX3: 3, F_ADDRX3: 3, F_DATA4: 4, F_REF4: 4, F_REF_SUP4: 4, F_STRX4: 4,
               F_ADDRX4: 4, F_DATA8: 8, F_REF8: 8, F_REF_SIG8: 8, F_REF_SUP8: 8, F_DATA16: 16,
               F_FLAG_PRESENT: 0, F_IMPLICIT_CONST: 0}
_OFFSET_SIZED = {F_STRP, F_SEC_OFFSET, F_LINE_STRP, F_STRP_SUP, F_GNU_REF_ALT, F_GNU_STRP_ALT}


@dataclass
class Abbrev:
    tag: int
    children: bool
    attrs: list[tuple[int, int, int]]  # (attribute, form, implicit constant)
    fixed: int | None  # total size of the attributes when every form has a fixed size here
    plans: dict = field(default_factory=dict)  # wanted attributes -> compiled plan
    decoders: dict = field(default_factory=dict)  # wanted attributes -> generated decoder (or None)
    has_sibling: bool = False

    def __post_init__(self):
        self.has_sibling = any(at == AT_SIBLING for at, _, _ in self.attrs)


_SKIP_ULEB, _SKIP_CSTR, _SKIP_BLOCK, _SKIP_BLOCK1, _SKIP_BLOCK2, _SKIP_BLOCK4 = -1, -2, -3, -4, -5, -6
_VARIABLE_SKIPS = {F_UDATA: _SKIP_ULEB, F_SDATA: _SKIP_ULEB, F_REF_UDATA: _SKIP_ULEB, F_STRX: _SKIP_ULEB,
                   F_ADDRX: _SKIP_ULEB, F_LOCLISTX: _SKIP_ULEB, F_RNGLISTX: _SKIP_ULEB,
                   F_GNU_ADDR_INDEX: _SKIP_ULEB, F_GNU_STR_INDEX: _SKIP_ULEB, F_STRING: _SKIP_CSTR,
                   F_EXPRLOC: _SKIP_BLOCK, F_BLOCK: _SKIP_BLOCK, F_BLOCK1: _SKIP_BLOCK1, F_BLOCK2: _SKIP_BLOCK2,
                   F_BLOCK4: _SKIP_BLOCK4}
_NOTHING: frozenset = frozenset()
_SIBLING_ONLY: frozenset = frozenset({AT_SIBLING})
_UNIT_REF_FORMS = {F_REF1, F_REF2, F_REF4, F_REF8, F_REF_UDATA}
# Types whose bodies hold no code-carrying DIEs (see CompUnit.function_table).
TYPE_TAGS = frozenset({0x01, 0x02, 0x04, 0x13, 0x15, 0x17, 0x16})  # array, class, enum, struct,
# subroutine type, union, typedef
_KEEP_ALL = object()  # marks a step decoded only to learn its length (DW_FORM_indirect)
# What we read of function DIEs; everything else is skipped by length.
FUNCTION_ATTRS = frozenset({AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES, AT_ABSTRACT_ORIGIN, AT_SPECIFICATION,
                            AT_DECL_FILE, AT_DECL_LINE, AT_CALL_FILE, AT_CALL_LINE, AT_LINKAGE_NAME,
                            AT_MIPS_LINKAGE_NAME})


def _compile_plan(ab: "Abbrev", wanted: frozenset | None, addr_size: int, offset_size: int, version: int) -> list:
    """Steps to walk a DIE's attributes: an int skips (>= 0: that many bytes; < 0: a variable-length
    form), a tuple decodes. Runs of fixed-size attributes we do not want collapse into one skip."""
    plan: list = []
    run = 0
    for at, form, const in ab.attrs:
        size = None
        if form in _FIXED_SIZE:
            size = _FIXED_SIZE[form]
        elif form in _OFFSET_SIZED:
            size = offset_size
        elif form == F_ADDR:
            size = addr_size
        elif form == F_REF_ADDR:
            size = offset_size if version >= 3 else addr_size
        take = wanted is None or at in wanted
        if not take and size is not None:
            run += size
            continue
        if run:
            plan.append(run)
            run = 0
        if take:
            plan.append((at, form, const))
        elif form in _VARIABLE_SKIPS:
            plan.append(_VARIABLE_SKIPS[form])
        else:  # DW_FORM_indirect or unknown: decode to find the length, then drop the value
            plan.append((at, form, _KEEP_ALL))
    if run:
        plan.append(run)
    return plan


_DECODERS: dict[tuple, object] = {}


def _compile_decoder(ab: "Abbrev", wanted: frozenset | None, addr_size: int, offset_size: int, version: int):
    """Generated decoders are shared by every unit whose abbreviation has the same shape."""
    shape = (tuple(ab.attrs), wanted, addr_size, offset_size, version >= 3)
    decoder = _DECODERS.get(shape, False)
    if decoder is False:
        decoder = _DECODERS[shape] = _generate_decoder(ab, wanted, addr_size, offset_size, version)
    return decoder


def _generate_decoder(ab: "Abbrev", wanted: frozenset | None, addr_size: int, offset_size: int, version: int):
    """A Python function decoding one abbreviation's attributes, generated once per abbreviation.

    Why: a function DIE is read tens of thousands of times per unit, and a generic loop over its
    attributes (dispatching on each form) is most of the cost of a cold lookup. The generated code
    reads fixed-size attributes at offsets known in advance and skips the unwanted ones in one step;
    ``read_attrs`` returns the same list as the generic path. None: a form we leave to that path.
    """
    lines = ["def _decode(data, pos):", "    out = []"]
    k = 0

    def at(extra: int = 0) -> str:
        return f"pos + {k + extra}" if k + extra else "pos"

    for attr, form, const in ab.attrs:
        take = wanted is None or attr in wanted
        size = _FIXED_SIZE.get(form)
        if size is None and form in _OFFSET_SIZED:
            size = offset_size
        elif size is None and form == F_ADDR:
            size = addr_size
        elif size is None and form == F_REF_ADDR:
            size = offset_size if version >= 3 else addr_size
        if size is not None:
            if take:
                if form == F_IMPLICIT_CONST:
                    expr = repr(const)
                elif form == F_FLAG_PRESENT:
                    expr = "1"
                elif size == 1:
                    expr = f"data[{at()}]"
                elif size == 16:
                    expr = "None"
                else:
                    expr = f"int.from_bytes(data[{at()}:{at(size)}], 'little')"
                lines.append(f"    out.append(({attr}, {form}, {expr}))")
            k += size
            continue
        if k:
            lines.append(f"    pos += {k}")
            k = 0
        if form in (F_UDATA, F_REF_UDATA, F_STRX, F_ADDRX, F_LOCLISTX, F_RNGLISTX, F_GNU_ADDR_INDEX,
                    F_GNU_STR_INDEX, F_SDATA):
            if take:
                reader = "_sleb" if form == F_SDATA else "_uleb"
                lines += [f"    v, pos = {reader}(data, pos)", f"    out.append(({attr}, {form}, v))"]
            else:
                lines += ["    while data[pos] & 0x80:", "        pos += 1", "    pos += 1"]
        elif form == F_STRING:
            lines.append("    e = data.index(b'\\0', pos)")
            if take:
                lines.append(f"    out.append(({attr}, {form}, data[pos:e].decode('utf-8', 'replace')))")
            lines.append("    pos = e + 1")
        elif form in (F_EXPRLOC, F_BLOCK):
            lines += ["    n, pos = _uleb(data, pos)", "    pos += n"]
            if take:
                lines.append(f"    out.append(({attr}, {form}, None))")
        elif form in (F_BLOCK1, F_BLOCK2, F_BLOCK4):
            width = {F_BLOCK1: 1, F_BLOCK2: 2, F_BLOCK4: 4}[form]
            lines.append(f"    pos += {width} + int.from_bytes(data[pos:pos + {width}], 'little')")
            if take:
                lines.append(f"    out.append(({attr}, {form}, None))")
        else:
            return None  # DW_FORM_indirect or unknown: the generic reader handles (or reports) it
    lines.append(f"    return out, pos + {k}" if k else "    return out, pos")
    namespace = {"_uleb": _uleb, "_sleb": _sleb}
    exec("\n".join(lines), namespace)  # noqa: S102 - our own generated code, from the abbreviation table
    return namespace["_decode"]


class CompUnit:
    """One unit of ``.debug_info``, with its bytes copied out (a unit is small; the section is not)."""

    def __init__(self, reader: "DwarfReader", offset: int):
        self.reader = reader
        self.offset = offset
        info = reader.info
        if offset + 11 > len(info):
            raise DwarfFormatError(f"unit at {offset:#x} is past the end of .debug_info")
        length = struct.unpack_from("<I", info, offset)[0]
        pos = offset + 4
        self.offset_size = 4
        if length == 0xFFFFFFFF:
            length = struct.unpack_from("<Q", info, pos)[0]
            pos += 8
            self.offset_size = 8
        self.end = pos + length
        if self.end > len(info):
            raise DwarfFormatError(f"unit at {offset:#x} runs past the end of .debug_info")
        self.version = struct.unpack_from("<H", info, pos)[0]
        pos += 2
        self.unit_type = 1
        if self.version >= 5:
            self.unit_type, self.addr_size = info[pos], info[pos + 1]
            pos += 2
            abbrev_offset = int.from_bytes(info[pos : pos + self.offset_size], "little")
            pos += self.offset_size
            if self.unit_type in (2, 6):  # type units: signature and type offset
                pos += 8 + self.offset_size
            elif self.unit_type in (4, 5):  # skeleton / split: dwo id
                pos += 8
        elif 2 <= self.version <= 4:
            abbrev_offset = int.from_bytes(info[pos : pos + self.offset_size], "little")
            pos += self.offset_size
            self.addr_size = info[pos]
            pos += 1
        else:
            raise DwarfFormatError(f"unit at {offset:#x} has unsupported DWARF version {self.version}")
        if self.addr_size not in (4, 8):
            raise DwarfFormatError(f"unit at {offset:#x} has address size {self.addr_size}")
        self.data = bytes(info[offset : self.end])  # unit-relative positions from here on
        self.die_start = pos - offset
        self.abbrevs = reader.abbrev_table(abbrev_offset, self.addr_size, self.offset_size)
        self.addr_fmt = "<Q" if self.addr_size == 8 else "<I"
        # Attributes of the unit DIE that the rest depends on.
        self.str_offsets_base = 8 if self.offset_size == 4 else 16
        self.addr_base = 8
        self.rnglists_base = 0
        self.low_pc = 0
        self.comp_dir: str | None = None
        self.name: str | None = None
        self.stmt_list: int | None = None
        self.language = 0
        self.ranges_attr = None
        self.top_tag = 0
        code, p = _uleb(self.data, self.die_start)
        if code:
            ab = self._abbrev(code)
            self.top_tag = ab.tag
            attrs, _ = self.read_attrs(p, ab)
            for at, form, value in attrs:  # the *_base attributes come first: decode the rest after
                if at == AT_STR_OFFSETS_BASE:
                    self.str_offsets_base = value
                elif at in (AT_ADDR_BASE, AT_GNU_ADDR_BASE):
                    self.addr_base = value
                elif at in (AT_RNGLISTS_BASE, AT_GNU_RANGES_BASE):
                    self.rnglists_base = value
            for at, form, value in attrs:
                if at == AT_LOW_PC:
                    self.low_pc = self.address(form, value)
                elif at == AT_COMP_DIR:
                    self.comp_dir = self.string(form, value)
                elif at == AT_NAME:
                    self.name = self.string(form, value)
                elif at == AT_STMT_LIST:
                    self.stmt_list = value
                elif at == AT_LANGUAGE:
                    self.language = value
                elif at == AT_RANGES:
                    self.ranges_attr = (form, value)
            self.top_attrs = attrs
        else:
            self.top_attrs = []

    def _abbrev(self, code: int) -> Abbrev:
        try:
            return self.abbrevs[code]
        except KeyError:
            raise DwarfFormatError(f"unit at {self.offset:#x} uses unknown abbreviation {code}") from None

    # -- attribute values --------------------------------------------------------------------
    def read_attrs(self, pos: int, ab: Abbrev, wanted: frozenset | None = None):
        """Decode a DIE's attributes (only those in ``wanted``, if given), in order:
        ([(attribute, form, raw value)], position after the DIE's attributes)."""
        decoder = ab.decoders.get(wanted, False)
        if decoder is False:
            decoder = ab.decoders[wanted] = _compile_decoder(ab, wanted, self.addr_size, self.offset_size,
                                                             self.version)
        if decoder is not None:
            return decoder(self.data, pos)
        plan = ab.plans.get(wanted)
        if plan is None:
            plan = ab.plans[wanted] = _compile_plan(ab, wanted, self.addr_size, self.offset_size, self.version)
        data = self.data
        out = []
        for step in plan:
            if step.__class__ is int:
                if step >= 0:
                    pos += step
                elif step == _SKIP_ULEB:
                    while data[pos] & 0x80:
                        pos += 1
                    pos += 1
                elif step == _SKIP_CSTR:
                    pos = data.index(b"\0", pos) + 1
                elif step == _SKIP_BLOCK:
                    n, pos = _uleb(data, pos)
                    pos += n
                elif step == _SKIP_BLOCK1:
                    pos += 1 + data[pos]
                elif step == _SKIP_BLOCK2:
                    pos += 2 + (data[pos] | data[pos + 1] << 8)
                else:  # _SKIP_BLOCK4
                    pos += 4 + int.from_bytes(data[pos : pos + 4], "little")
            else:
                at, form, const = step
                while form == F_INDIRECT:
                    form, pos = _uleb(data, pos)
                value, pos = self._read_form(form, const, pos)
                if const is not _KEEP_ALL:
                    out.append((at, form, value))
        return out, pos

    def _read_form(self, form: int, const: int, pos: int):
        data = self.data
        if form == F_REF4 or form == F_DATA4 or form == F_STRX4 or form == F_ADDRX4 or form == F_REF_SUP4:
            return int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        if form == F_DATA1 or form == F_REF1 or form == F_FLAG or form == F_STRX1 or form == F_ADDRX1:
            return data[pos], pos + 1
        if form == F_IMPLICIT_CONST:
            return const, pos
        if form == F_ADDR:
            return int.from_bytes(data[pos : pos + self.addr_size], "little"), pos + self.addr_size
        if form == F_DATA2 or form == F_REF2 or form == F_STRX2 or form == F_ADDRX2:
            return data[pos] | data[pos + 1] << 8, pos + 2
        if form in _OFFSET_SIZED:
            return int.from_bytes(data[pos : pos + self.offset_size], "little"), pos + self.offset_size
        if form == F_DATA8 or form == F_REF8 or form == F_REF_SIG8 or form == F_REF_SUP8:
            return int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        if form in (F_UDATA, F_REF_UDATA, F_STRX, F_ADDRX, F_LOCLISTX, F_RNGLISTX, F_GNU_ADDR_INDEX,
                    F_GNU_STR_INDEX):
            return _uleb(data, pos)
        if form == F_SDATA:
            return _sleb(data, pos)
        if form == F_STRING:
            end = data.index(b"\0", pos)
            return data[pos:end].decode("utf-8", "replace"), end + 1
        if form == F_FLAG_PRESENT:
            return 1, pos
        if form == F_REF_ADDR:
            size = self.offset_size if self.version >= 3 else self.addr_size
            return int.from_bytes(data[pos : pos + size], "little"), pos + size
        if form in (F_EXPRLOC, F_BLOCK):
            n, pos = _uleb(data, pos)
            return None, pos + n
        if form == F_BLOCK1:
            return None, pos + 1 + data[pos]
        if form == F_BLOCK2:
            return None, pos + 2 + (data[pos] | data[pos + 1] << 8)
        if form == F_BLOCK4:
            return None, pos + 4 + int.from_bytes(data[pos : pos + 4], "little")
        if form == F_STRX3 or form == F_ADDRX3:
            return int.from_bytes(data[pos : pos + 3], "little"), pos + 3
        if form == F_DATA16:
            return None, pos + 16
        raise DwarfFormatError(f"unit at {self.offset:#x}: unknown attribute form {form:#x}")

    def skip_attrs(self, pos: int, ab: Abbrev) -> int:
        if ab.fixed is not None:
            return pos + ab.fixed
        return self.read_attrs(pos, ab, _NOTHING)[1]

    def string(self, form: int, value) -> str | None:
        r = self.reader
        if form == F_STRING:
            return value
        if form == F_STRP:
            return _str_at(r.str, value)
        if form == F_LINE_STRP:
            return _str_at(r.line_str, value)
        if form in (F_STRX, F_STRX1, F_STRX2, F_STRX3, F_STRX4, F_GNU_STR_INDEX):
            so = r.str_offsets
            at = self.str_offsets_base + value * self.offset_size
            if so is None or at + self.offset_size > len(so):
                return None
            return _str_at(r.str, int.from_bytes(so[at : at + self.offset_size], "little"))
        return None  # GNU_strp_alt (dwz) and strp_sup point into a file we do not read

    def address(self, form: int, value) -> int:
        if form in (F_ADDRX, F_ADDRX1, F_ADDRX2, F_ADDRX3, F_ADDRX4, F_GNU_ADDR_INDEX):
            table = self.reader.addr
            at = self.addr_base + value * self.addr_size
            if table is None or at + self.addr_size > len(table):
                raise DwarfFormatError(f"unit at {self.offset:#x}: address index {value} out of .debug_addr")
            return int.from_bytes(table[at : at + self.addr_size], "little")
        return value

    def ranges(self, form: int, value) -> list[tuple[int, int]]:
        """The [low, high) ranges of a DW_AT_ranges value (v5 .debug_rnglists or v4 .debug_ranges)."""
        r = self.reader
        out = []
        if self.version >= 5:
            data = r.rnglists
            if data is None:
                return out
            if form == F_RNGLISTX:
                at = self.rnglists_base + value * self.offset_size
                pos = self.rnglists_base + int.from_bytes(data[at : at + self.offset_size], "little")
            else:
                pos = value
            base = self.low_pc
            asz = self.addr_size
            while pos < len(data):
                kind = data[pos]
                pos += 1
                if kind == 0:
                    break
                if kind == 1:
                    i, pos = _uleb(data, pos)
                    base = self.address(F_ADDRX, i)
                elif kind == 2:
                    i, pos = _uleb(data, pos)
                    j, pos = _uleb(data, pos)
                    out.append((self.address(F_ADDRX, i), self.address(F_ADDRX, j)))
                elif kind == 3:
                    i, pos = _uleb(data, pos)
                    n, pos = _uleb(data, pos)
                    lo = self.address(F_ADDRX, i)
                    out.append((lo, lo + n))
                elif kind == 4:
                    a, pos = _uleb(data, pos)
                    b, pos = _uleb(data, pos)
                    out.append((base + a, base + b))
                elif kind == 5:
                    base = int.from_bytes(data[pos : pos + asz], "little")
                    pos += asz
                elif kind == 6:
                    a = int.from_bytes(data[pos : pos + asz], "little")
                    b = int.from_bytes(data[pos + asz : pos + 2 * asz], "little")
                    pos += 2 * asz
                    out.append((a, b))
                elif kind == 7:
                    a = int.from_bytes(data[pos : pos + asz], "little")
                    pos += asz
                    n, pos = _uleb(data, pos)
                    out.append((a, a + n))
                else:
                    raise DwarfFormatError(f"unknown range list entry {kind}")
        else:
            data = r.ranges_v4
            if data is None:
                return out
            pos = value
            base = self.low_pc
            asz = self.addr_size
            top = (1 << (8 * asz)) - 1
            while pos + 2 * asz <= len(data):
                a = int.from_bytes(data[pos : pos + asz], "little")
                b = int.from_bytes(data[pos + asz : pos + 2 * asz], "little")
                pos += 2 * asz
                if a == 0 and b == 0:
                    break
                if a == top:
                    base = b
                    continue
                out.append((base + a, base + b))
        return [(lo, hi) for lo, hi in out if hi > lo]

    def pc_ranges(self, attrs) -> list[tuple[int, int]]:
        low = high = None
        high_is_offset = False
        rng = None
        for at, form, value in attrs:
            if at == AT_LOW_PC:
                low = self.address(form, value)
            elif at == AT_HIGH_PC:
                if form in _CONST_FORMS:
                    high, high_is_offset = value, True
                else:
                    high = self.address(form, value)
            elif at == AT_RANGES:
                rng = (form, value)
        if rng is not None:
            return self.ranges(*rng)
        if low is not None and high is not None:
            if high_is_offset:
                high += low
            if high > low:
                return [(low, high)]
        return []

    # -- line program ----------------------------------------------------------------------------
    def line_table(self) -> "LineTable | None":
        if self.stmt_list is None or self.reader.line is None:
            return None
        return decode_line_program(self.reader, self.stmt_list, self.comp_dir, self)

    # -- functions --------------------------------------------------------------------------------
    def function_table(self, skip_types: bool = True) -> "FunctionTable":
        """Every function DIE with code (subprograms, inlined subroutines, entry points), like bfd's
        ``scan_unit_for_symbols``: ranges, resolved name, caller and call site, declaration.

        ``skip_types`` jumps over the bodies of types declared outside any function (through
        DW_AT_sibling): the code-carrying DIE of a member function of such a class is placed outside
        it (DW_AT_specification points back), so their bodies hold only declarations, and they are
        most of the DIEs of a C++ unit. (A class local to a function does hold its members' code
        DIEs in gcc's output: those are walked.)"""
        data = self.data
        abbrevs = self.abbrevs
        mangled_by_name = self.language not in _UNMANGLED_LANGUAGES
        lows: list[int] = []
        highs: list[int] = []
        owner: list[int] = []
        funcs: list[list] = []  # [name, is_linkage, caller, call_file, call_line, decl_file, decl_line, tag, lo]
        nested: list[int] = []  # function index at each nesting level (-1 when none)
        pos = self.die_start
        end = len(data)
        level_func = -1
        depth = 0
        read_attrs = self.read_attrs
        skip_attrs = self.skip_attrs
        while pos < end:
            code = data[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = _uleb(data, pos)
            if code == 0:
                depth -= 1
                if depth < 0:
                    break
                level_func = nested.pop() if nested else -1
                continue
            ab = abbrevs.get(code)
            if ab is None:
                raise DwarfFormatError(f"unit at {self.offset:#x} uses unknown abbreviation {code}")
            if ab.tag not in FUNCTION_TAGS:
                if ab.children and skip_types and level_func < 0 and ab.tag in TYPE_TAGS and ab.has_sibling:
                    attrs, _ = read_attrs(pos, ab, _SIBLING_ONLY)
                    if attrs and attrs[0][1] in _UNIT_REF_FORMS and attrs[0][2] > pos:
                        pos = attrs[0][2]
                        continue
                fixed = ab.fixed
                pos = pos + fixed if fixed is not None else skip_attrs(pos, ab)
                if ab.children:
                    nested.append(level_func)
                    depth += 1
                continue
            attrs, pos = read_attrs(pos, ab, FUNCTION_ATTRS)
            rngs = self.pc_ranges(attrs)
            name, is_linkage, decl_file, decl_line = self._function_names(attrs, mangled_by_name)
            caller = -1
            call_file = call_line = None
            if ab.tag == TAG_INLINED_SUBROUTINE:
                caller = level_func
                for at, form, value in attrs:
                    if at == AT_CALL_FILE:
                        call_file = value
                    elif at == AT_CALL_LINE:
                        call_line = value
            this_func = len(funcs)
            funcs.append([name, is_linkage, caller, call_file, call_line, decl_file, decl_line, ab.tag,
                          rngs[0][0] if rngs else 0])
            for lo, hi in rngs:
                lows.append(lo)
                highs.append(hi)
                owner.append(this_func)
            if ab.children:
                nested.append(level_func)
                level_func = this_func
                depth += 1
        return FunctionTable.build(funcs, lows, highs, owner)

    def _function_names(self, attrs, mangled_by_name: bool):
        """bfd's rules for a function's name and declaration, attribute by attribute, in order."""
        name = None
        is_linkage = False
        decl_file = decl_line = None
        for at, form, value in attrs:
            if at in (AT_ABSTRACT_ORIGIN, AT_SPECIFICATION):
                if form in _REF_FORMS:
                    n, linkage, f, ln = self.reader.abstract_instance(self, form, value, 0)
                    name = n
                    is_linkage = is_linkage or linkage
                    if f is not None:
                        decl_file = f
                    if ln is not None:
                        decl_line = ln
            elif at == AT_NAME:
                if name is None and form in _STRING_FORMS:
                    name = self.string(form, value)
                    if not mangled_by_name:
                        is_linkage = True
            elif at in (AT_LINKAGE_NAME, AT_MIPS_LINKAGE_NAME):
                if form in _STRING_FORMS:
                    name = self.string(form, value)
                    is_linkage = True
            elif at == AT_DECL_FILE:
                decl_file = value
            elif at == AT_DECL_LINE:
                decl_line = value
        return name, is_linkage, decl_file, decl_line

    def die_attrs(self, unit_offset: int):
        """(abbrev, attributes) of the DIE at a unit-relative offset."""
        code, pos = _uleb(self.data, unit_offset)
        if code == 0:
            return None, []
        ab = self._abbrev(code)
        attrs, _ = self.read_attrs(pos, ab, FUNCTION_ATTRS)
        return ab, attrs


def _compact(values, signed: bool = False) -> array:
    """An array of the smallest item type that holds every value (the cache stores these as is)."""
    lo = min(values, default=0)
    hi = max(values, default=0)
    for code in ("bhiq" if signed or lo < 0 else "BHIQ"):
        bits = array(code).itemsize * 8
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if code.islower() else (0, (1 << bits) - 1)
        if low <= lo and hi <= high:
            return array(code, values)
    raise OverflowError("value out of 64-bit range")


def _pack(a: array) -> tuple[str, bytes]:
    return a.typecode, a.tobytes()


def _unpack(p: tuple[str, bytes]) -> array:
    a = array(p[0])
    a.frombytes(p[1])
    return a


@dataclass
class LineTable:
    """Decoded rows of one line program, grouped in sorted, trimmed sequences (bfd's rules).
    Row addresses are stored as offsets from their sequence's first row."""

    files: list[str | None]
    seq_low: list[int]
    seq_high: list[int]
    seq_rows: list[tuple[int, array, array, array, array]]  # base, offsets, file indices, lines, discriminators

    def lookup(self, address: int) -> tuple[str | None, int, int] | None:
        k = bisect.bisect_right(self.seq_low, address) - 1
        if k < 0 or address >= self.seq_high[k]:
            return None
        base, offsets, files, lines, discs = self.seq_rows[k]
        i = bisect.bisect_right(offsets, address - base) - 1
        if i < 0:
            return None
        f = files[i]
        return (self.files[f] if 0 <= f < len(self.files) else "<unknown>"), lines[i], discs[i]

    def row_count(self) -> int:
        return sum(len(rows[1]) for rows in self.seq_rows)

    def to_payload(self):
        return (self.files, self.seq_low, self.seq_high,
                [(rows[0],) + tuple(_pack(a) for a in rows[1:]) for rows in self.seq_rows])

    @classmethod
    def from_payload(cls, p) -> "LineTable":
        rows = [(r[0],) + tuple(_unpack(x) for x in r[1:]) for r in p[3]]
        return cls(p[0], p[1], p[2], rows)


def _file_name(names: list, dirs: list, comp_dir: str | None, index: int, v5: bool) -> str | None:
    """bfd's concat_filename()."""
    if not v5:
        if index == 0:
            return "<unknown>"
        index -= 1
    if index < 0 or index >= len(names):
        return "<unknown>"
    name, d = names[index]
    if name is None:
        return "<unknown>"
    if name.startswith("/"):
        return name
    if not v5:
        d -= 1
    sub = dirs[d] if 0 <= d < len(dirs) else None
    dir_name = comp_dir if (sub is None or not sub.startswith("/")) else None
    if dir_name is None:
        dir_name, sub = sub, None
    if dir_name is None:
        return name
    return f"{dir_name}/{sub}/{name}" if sub is not None else f"{dir_name}/{name}"


def _read_entry_formats(data, pos, unit: CompUnit | None, offset_size: int, reader: "DwarfReader"):
    count = data[pos]
    pos += 1
    formats = []
    for _ in range(count):
        ctype, pos = _uleb(data, pos)
        form, pos = _uleb(data, pos)
        formats.append((ctype, form))
    n, pos = _uleb(data, pos)
    entries = []
    for _ in range(n):
        path = None
        dir_index = 0
        for ctype, form in formats:
            value = None
            if form == F_STRING:
                raw, pos = _cstr(data, pos)
                value = raw.decode("utf-8", "replace")
            elif form in (F_LINE_STRP, F_STRP):
                off = int.from_bytes(data[pos : pos + offset_size], "little")
                pos += offset_size
                value = _str_at(reader.line_str if form == F_LINE_STRP else reader.str, off)
            elif form in (F_STRX, F_STRX1, F_STRX2, F_STRX3, F_STRX4):
                if form == F_STRX:
                    idx, pos = _uleb(data, pos)
                else:
                    size = {F_STRX1: 1, F_STRX2: 2, F_STRX3: 3, F_STRX4: 4}[form]
                    idx = int.from_bytes(data[pos : pos + size], "little")
                    pos += size
                value = unit.string(F_STRX, idx) if unit is not None else None
            elif form in (F_UDATA,):
                value, pos = _uleb(data, pos)
            elif form in _FIXED_SIZE:
                size = _FIXED_SIZE[form]
                value = int.from_bytes(data[pos : pos + size], "little") if size <= 8 else None
                pos += size
            elif form == F_BLOCK:
                size, pos = _uleb(data, pos)
                pos += size
            else:
                raise DwarfFormatError(f"line table: unsupported entry form {form:#x}")
            if ctype == 1:  # DW_LNCT_path
                path = value
            elif ctype == 2:  # DW_LNCT_directory_index
                dir_index = value or 0
        entries.append((path, dir_index))
    return entries, pos


def decode_line_program(reader: "DwarfReader", offset: int, comp_dir: str | None,
                        unit: CompUnit | None = None) -> LineTable:
    data = reader.line
    if offset + 4 > len(data):
        raise DwarfFormatError(f"line program at {offset:#x} is past the end of .debug_line")
    length = struct.unpack_from("<I", data, offset)[0]
    pos = offset + 4
    offset_size = 4
    if length == 0xFFFFFFFF:
        length = struct.unpack_from("<Q", data, pos)[0]
        pos += 8
        offset_size = 8
    end = pos + length
    if end > len(data):
        raise DwarfFormatError(f"line program at {offset:#x} runs past the end of .debug_line")
    prog = bytes(data[offset:end])
    base = offset
    end -= base
    pos -= base
    version = struct.unpack_from("<H", prog, pos)[0]
    pos += 2
    if version >= 5:
        pos += 2  # address_size, segment_selector_size (DW_LNE_set_address carries its own length)
    elif not 2 <= version <= 4:
        raise DwarfFormatError(f"line program at {offset:#x} has unsupported version {version}")
    header_length = int.from_bytes(prog[pos : pos + offset_size], "little")
    pos += offset_size
    program_start = pos + header_length
    min_inst = prog[pos]
    pos += 1
    max_ops = 1
    if version >= 4:
        max_ops = prog[pos] or 1
        pos += 1
    # prog[pos] is default_is_stmt: bfd (and so addr2line) ignores is_stmt, and so do we.
    line_base = struct.unpack_from("<b", prog, pos + 1)[0]
    line_range = prog[pos + 2]
    opcode_base = prog[pos + 3]
    pos += 4
    std_lengths = list(prog[pos : pos + opcode_base - 1])
    pos += opcode_base - 1
    if line_range == 0:
        raise DwarfFormatError(f"line program at {offset:#x} has line_range 0")
    v5 = version >= 5
    if v5:
        dir_entries, pos = _read_entry_formats(prog, pos, unit, offset_size, reader)
        dirs = [d for d, _ in dir_entries]
        names, pos = _read_entry_formats(prog, pos, unit, offset_size, reader)
    else:
        dirs = []
        while prog[pos] != 0:
            raw, pos = _cstr(prog, pos)
            dirs.append(raw.decode("utf-8", "replace"))
        pos += 1
        names = []
        while prog[pos] != 0:
            raw, pos = _cstr(prog, pos)
            d, pos = _uleb(prog, pos)
            _, pos = _uleb(prog, pos)
            _, pos = _uleb(prog, pos)
            names.append((raw.decode("utf-8", "replace"), d))
        pos += 1
    pos = program_start

    sequences: list[tuple[list, list, list, list]] = []
    addrs: list[int] = []
    files: list[int] = []
    lines: list[int] = []
    discs: list[int] = []
    address = 0
    op_index = 0
    file = 1
    line = 1
    discriminator = 0
    const_add = ((255 - opcode_base) // line_range) * min_inst
    simple = max_ops == 1
    last_addr = -1

    while pos < end:
        op = prog[pos]
        pos += 1
        if op >= opcode_base:
            adj = op - opcode_base
            if simple:
                address += (adj // line_range) * min_inst
            else:
                adv = adj // line_range
                address += min_inst * ((op_index + adv) // max_ops)
                op_index = (op_index + adv) % max_ops
            line += line_base + adj % line_range
            # a row (bfd keeps only the last row at one address)
            if addrs and last_addr == address:
                files[-1] = file
                lines[-1] = line
                discs[-1] = discriminator
            else:
                addrs.append(address)
                files.append(file)
                lines.append(line)
                discs.append(discriminator)
                last_addr = address
            discriminator = 0
        elif op == 0:
            n, pos = _uleb(prog, pos)
            if n == 0:
                continue
            sub = prog[pos]
            arg = pos + 1
            pos += n
            if sub == 1:  # end_sequence
                if addrs:
                    sequences.append((addrs, files, lines, discs, address))
                addrs, files, lines, discs = [], [], [], []
                last_addr = -1
                address = op_index = 0
                file = line = 1
                discriminator = 0
            elif sub == 2:  # set_address
                address = int.from_bytes(prog[arg:pos], "little")
                op_index = 0
            elif sub == 3:  # define_file (DWARF <= 4)
                raw, q = _cstr(prog, arg)
                d, q = _uleb(prog, q)
                names.append((raw.decode("utf-8", "replace"), d))
            elif sub == 4:  # set_discriminator
                discriminator, _ = _uleb(prog, arg)
        elif op == 1:  # copy
            if addrs and last_addr == address:
                files[-1] = file
                lines[-1] = line
                discs[-1] = discriminator
            else:
                addrs.append(address)
                files.append(file)
                lines.append(line)
                discs.append(discriminator)
                last_addr = address
            discriminator = 0
        elif op == 2:  # advance_pc
            adv, pos = _uleb(prog, pos)
            if simple:
                address += adv * min_inst
            else:
                address += min_inst * ((op_index + adv) // max_ops)
                op_index = (op_index + adv) % max_ops
        elif op == 3:  # advance_line
            d, pos = _sleb(prog, pos)
            line += d
        elif op == 4:  # set_file
            file, pos = _uleb(prog, pos)
        elif op == 5:  # set_column
            _, pos = _uleb(prog, pos)
        elif op == 8:  # const_add_pc
            if simple:
                address += const_add
            else:
                adv = (255 - opcode_base) // line_range
                address += min_inst * ((op_index + adv) // max_ops)
                op_index = (op_index + adv) % max_ops
        elif op == 9:  # fixed_advance_pc
            address += prog[pos] | prog[pos + 1] << 8
            op_index = 0
            pos += 2
        elif op in (6, 7, 10, 11):  # negate_stmt, basic_block, prologue_end, epilogue_begin
            pass
        elif op == 12:  # set_isa
            _, pos = _uleb(prog, pos)
        else:
            for _ in range(std_lengths[op - 1]):
                _, pos = _uleb(prog, pos)

    # file_names[i] is the name of DWARF file number i (in DWARF 4, 0 means "unknown")
    file_names = [_file_name(names, dirs, comp_dir, i, v5) for i in range(len(names) + (0 if v5 else 1))]
    # bfd: sort by low pc, longest first on ties, then stable; drop nested, trim overlapping.
    order = sorted(range(len(sequences)), key=lambda k: (sequences[k][0][0], -sequences[k][4], k))
    seq_low: list[int] = []
    seq_high: list[int] = []
    seq_rows = []
    last_high = None
    for k in order:
        a, f, ln, d, high = sequences[k]
        low = a[0]
        if last_high is not None and low < last_high:
            if high <= last_high:
                continue
            low = last_high
        last_high = high
        seq_low.append(low)
        seq_high.append(high)
        # Consecutive rows saying the same thing answer the same: keep the first of each run.
        keep = [i for i in range(len(a)) if i == 0 or (f[i], ln[i], d[i]) != (f[i - 1], ln[i - 1], d[i - 1])]
        if len(keep) != len(a):
            a, f, ln, d = [a[i] for i in keep], [f[i] for i in keep], [ln[i] for i in keep], [d[i] for i in keep]
        base = a[0]
        seq_rows.append((base, _compact([x - base for x in a]), _compact(f), _compact([max(x, 0) for x in ln]),
                         _compact(d)))
    return LineTable(file_names, seq_low, seq_high, seq_rows)


@dataclass
class FunctionTable:
    """Function ranges of one unit, sorted by start, with names already resolved.

    Functions are numbered in DIE order (bfd breaks ties by it); files are DWARF file numbers of the
    unit's line table (-1: none). Functions without code are left out: nothing can land in them.
    Range bounds are offsets from ``base``; every array uses the smallest item type that fits.
    """

    base: int
    lows: array  # per range, sorted
    highs: array
    owner: array  # function number of each range
    names: list[str]  # distinct names
    name_of: array  # per function: index into names, -1 for none
    linkage: array  # 1 when the name is a linkage name (else bfd prefers the ELF symbol's name)
    callers: array  # per function: the function it is inlined into, -1 for none
    call_file: array
    call_line: array
    decl_file: array
    decl_line: array
    max_span: int

    @classmethod
    def build(cls, funcs, lows, highs, owner) -> "FunctionTable":
        has_code = sorted(set(owner))
        renumber = {old: new for new, old in enumerate(has_code)}
        kept = [funcs[i] for i in has_code]
        distinct: dict[str, int] = {}
        for f in kept:
            if f[0] is not None and f[0] not in distinct:
                distinct[f[0]] = len(distinct)
        order = sorted(range(len(lows)), key=lambda i: (lows[i], owner[i]))
        base = lows[order[0]] if order else 0
        return cls(
            base=base,
            lows=_compact([lows[i] - base for i in order]),
            highs=_compact([highs[i] - base for i in order]),
            owner=_compact([renumber[owner[i]] for i in order]),
            names=list(distinct),
            name_of=_compact([distinct[f[0]] if f[0] is not None else -1 for f in kept], signed=True),
            linkage=array("B", [1 if f[1] else 0 for f in kept]),
            callers=_compact([renumber.get(f[2], -1) for f in kept], signed=True),
            call_file=_compact([-1 if f[3] is None else f[3] for f in kept], signed=True),
            call_line=_compact([f[4] or 0 for f in kept]),
            decl_file=_compact([-1 if f[5] is None else f[5] for f in kept], signed=True),
            decl_line=_compact([f[6] or 0 for f in kept]),
            max_span=max((h - lo for lo, h in zip(lows, highs)), default=0),
        )

    def name(self, f: int) -> str | None:
        i = self.name_of[f]
        return self.names[i] if i >= 0 else None

    def best(self, address: int) -> int:
        """bfd's best fit: the function with the smallest range holding the address (ties: later DIE)."""
        best = -1
        best_len = None
        lows, highs, owner = self.lows, self.highs, self.owner
        rel = address - self.base
        if rel < 0:
            return -1
        k = bisect.bisect_right(lows, rel) - 1
        floor = rel - self.max_span
        while k >= 0 and lows[k] > floor:
            if rel < highs[k]:
                span = highs[k] - lows[k]
                f = owner[k]
                if best_len is None or span < best_len or (span == best_len and f > best):
                    best, best_len = f, span
            k -= 1
        return best

    def to_payload(self):
        blob = zlib.compress("\0".join(self.names).encode("utf-8", "surrogatepass"), 1)
        arrays = (self.lows, self.highs, self.owner, self.name_of, self.linkage, self.callers, self.call_file,
                  self.call_line, self.decl_file, self.decl_line)
        return (self.base, self.max_span, blob, len(self.names), tuple(_pack(a) for a in arrays))

    @classmethod
    def from_payload(cls, p) -> "FunctionTable":
        names = zlib.decompress(p[2]).decode("utf-8", "surrogatepass").split("\0") if p[3] else []
        a = [_unpack(x) for x in p[4]]
        return cls(p[0], a[0], a[1], a[2], names, a[3], a[4], a[5], a[6], a[7], a[8], a[9], p[1])


class DwarfReader:
    """The DWARF of one file (the library itself or its separate debug file)."""

    def __init__(self, elf: ElfFile, library_path: str):
        self.elf = elf
        self.library_path = library_path
        self.key = elf.key()
        self.info = elf.data(".debug_info")
        self.line = elf.data(".debug_line")
        if self.info is None or self.line is None:
            raise DwarfFormatError("no .debug_info/.debug_line")
        self.abbrev = elf.data(".debug_abbrev")
        self.str = elf.data(".debug_str")
        self.line_str = elf.data(".debug_line_str")
        self.str_offsets = elf.data(".debug_str_offsets")
        self.addr = elf.data(".debug_addr")
        self.rnglists = elf.data(".debug_rnglists")
        self.ranges_v4 = elf.data(".debug_ranges")
        self._abbrev_tables: dict[tuple, dict[int, Abbrev]] = {}
        self._units: dict[int, CompUnit] = {}
        self._unit_offsets: list[int] | None = None
        self._aranges: tuple | None = None
        self._abstract: dict[int, tuple] = {}
        self._tables: dict[int, tuple[LineTable | None, FunctionTable]] = {}

    # -- structure ------------------------------------------------------------------------------
    def abbrev_table(self, offset: int, addr_size: int, offset_size: int) -> dict[int, Abbrev]:
        key = (offset, addr_size, offset_size)
        table = self._abbrev_tables.get(key)
        if table is not None:
            return table
        data = self.abbrev
        if data is None:
            raise DwarfFormatError("no .debug_abbrev")
        table = {}
        pos = offset
        while True:
            code, pos = _uleb(data, pos)
            if code == 0:
                break
            tag, pos = _uleb(data, pos)
            children = data[pos] == 1
            pos += 1
            attrs = []
            fixed = 0
            while True:
                at, pos = _uleb(data, pos)
                form, pos = _uleb(data, pos)
                const = 0
                if form == F_IMPLICIT_CONST:
                    const, pos = _sleb(data, pos)
                if at == 0 and form == 0:
                    break
                attrs.append((at, form, const))
                if fixed is not None:
                    if form in _FIXED_SIZE:
                        fixed += _FIXED_SIZE[form]
                    elif form in _OFFSET_SIZED:
                        fixed += offset_size
                    elif form == F_ADDR:
                        fixed += addr_size
                    else:
                        fixed = None
            table[code] = Abbrev(tag, children, attrs, fixed)
        self._abbrev_tables[key] = table
        return table

    def unit(self, offset: int) -> CompUnit:
        u = self._units.get(offset)
        if u is None:
            u = self._units[offset] = CompUnit(self, offset)
        return u

    def unit_offsets(self) -> list[int]:
        if self._unit_offsets is None:
            offs = []
            pos = 0
            info = self.info
            while pos + 4 <= len(info):
                offs.append(pos)
                length = struct.unpack_from("<I", info, pos)[0]
                pos += 4 + (struct.unpack_from("<Q", info, pos + 4)[0] + 8 if length == 0xFFFFFFFF else length)
            self._unit_offsets = offs
        return self._unit_offsets

    def unit_containing(self, info_offset: int) -> CompUnit:
        offs = self.unit_offsets()
        k = bisect.bisect_right(offs, info_offset) - 1
        if k < 0:
            raise DwarfFormatError(f"no unit holds .debug_info offset {info_offset:#x}")
        return self.unit(offs[k])

    def aranges(self) -> tuple:
        """(lows, highs, unit offsets, longest span): sorted ranges from .debug_aranges, completed from
        the units' own DW_AT_ranges / low_pc for units that .debug_aranges leaves out."""
        if self._aranges is not None:
            return self._aranges
        stored = cache.read(self.key, "aranges")
        if stored is not None:
            self._aranges = stored
            return stored
        spans: list[tuple[int, int, int]] = []
        covered: set[int] = set()
        data = self.elf.data(".debug_aranges")
        if data is not None:
            pos = 0
            while pos + 4 <= len(data):
                length = struct.unpack_from("<I", data, pos)[0]
                start = pos
                pos += 4
                osz = 4
                if length == 0xFFFFFFFF:
                    length = struct.unpack_from("<Q", data, pos)[0]
                    pos += 8
                    osz = 8
                end = pos + length
                pos += 2  # version
                cu = int.from_bytes(data[pos : pos + osz], "little")
                pos += osz
                asz, ssz = data[pos], data[pos + 1]
                pos += 2
                tuple_size = 2 * asz + ssz
                header = pos - start
                pos = start + ((header + tuple_size - 1) // tuple_size) * tuple_size if tuple_size else pos
                while pos + tuple_size <= end:
                    lo = int.from_bytes(data[pos + ssz : pos + ssz + asz], "little")
                    n = int.from_bytes(data[pos + ssz + asz : pos + tuple_size], "little")
                    pos += tuple_size
                    if lo == 0 and n == 0:
                        break
                    if n:
                        spans.append((lo, lo + n, cu))
                covered.add(cu)
                pos = end
        for off in self.unit_offsets():
            if off in covered:
                continue
            try:
                u = self.unit(off)
            except DwarfFormatError:
                continue
            if u.top_tag not in (TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT):
                continue
            for lo, hi in u.pc_ranges(u.top_attrs):
                spans.append((lo, hi, off))
        spans.sort()
        result = ([s[0] for s in spans], [s[1] for s in spans], [s[2] for s in spans],
                  max((s[1] - s[0] for s in spans), default=0))
        cache.write(self.key, "aranges", result)
        self._aranges = result
        return result

    def units_for(self, address: int) -> list[int]:
        """Offsets of the units whose ranges hold the address (normally one), in section order."""
        lows, highs, units, max_span = self.aranges()
        out = []
        i = bisect.bisect_right(lows, address) - 1
        while i >= 0 and lows[i] + max_span > address:
            if highs[i] > address and units[i] not in out:
                out.append(units[i])
            i -= 1
        return sorted(out)

    # -- names ----------------------------------------------------------------------------------
    def abstract_instance(self, unit: CompUnit, form: int, value: int, depth: int):
        """bfd's find_abstract_instance: (name, sets is_linkage, decl file index, decl line) of the
        DIE an abstract_origin / specification points at, following further specifications."""
        if form == F_REF_ADDR:
            target_unit = self.unit_containing(value)
            rel = value - target_unit.offset
        else:
            target_unit = unit
            rel = value
        key = target_unit.offset + rel
        cached = self._abstract.get(key)
        if cached is not None:
            return cached
        if depth > 16:
            return (None, False, None, None)
        ab, attrs = target_unit.die_attrs(rel)
        name = None
        linkage = False
        decl_file = decl_line = None
        mangled_by_name = target_unit.language not in _UNMANGLED_LANGUAGES
        for at, f, v in attrs:
            if at == AT_NAME:
                if name is None and f in _STRING_FORMS:
                    name = target_unit.string(f, v)
                    if not mangled_by_name:
                        linkage = True
            elif at == AT_SPECIFICATION:
                if f in _REF_FORMS:
                    n, lk, fl, ln = self.abstract_instance(target_unit, f, v, depth + 1)
                    name = n
                    linkage = linkage or lk
                    if fl is not None:
                        decl_file = fl
                    if ln is not None:
                        decl_line = ln
            elif at in (AT_LINKAGE_NAME, AT_MIPS_LINKAGE_NAME):
                if f in _STRING_FORMS:
                    name = target_unit.string(f, v)
                    linkage = True
            elif at == AT_DECL_FILE:
                decl_file = v
            elif at == AT_DECL_LINE:
                decl_line = v
        if target_unit is not unit and decl_file is not None:
            decl_file = None  # a file number of another unit's line table: not ours to resolve
        result = (name, linkage, decl_file, decl_line)
        self._abstract[key] = result
        return result

    # -- tables per unit (cached on disk) --------------------------------------------------------------
    def tables(self, unit_offset: int) -> tuple[LineTable | None, FunctionTable]:
        got = self._tables.get(unit_offset)
        if got is not None:
            return got
        stored = cache.read(self.key, "cu", extra=f"-{unit_offset:x}")
        if stored is not None:
            lt = LineTable.from_payload(stored[0]) if stored[0] is not None else None
            got = (lt, FunctionTable.from_payload(stored[1]))
        else:
            u = self.unit(unit_offset)
            lt = u.line_table()
            ft = u.function_table()
            got = (lt, ft)
            self._units.pop(unit_offset, None)  # its bytes are no longer needed; keep memory flat
            cache.write(self.key, "cu", (lt.to_payload() if lt else None, ft.to_payload()), extra=f"-{unit_offset:x}")
        self._tables[unit_offset] = got
        return got

    # -- answers ---------------------------------------------------------------------------------
    def lookup(self, address: int, symbol_name) -> SourceLine | None:
        """The answer for one address; ``symbol_name(address)`` gives the ELF symbol's (mangled) name
        for the cases where bfd prefers it."""
        from .elf_index import demangle

        for off in self.units_for(address):
            lt, ft = self.tables(off)
            row = lt.lookup(address) if lt is not None else None
            f = ft.best(address)
            if row is None and f < 0:
                continue
            file, line, disc = row if row is not None else (None, 0, 0)
            files = lt.files if lt is not None else []

            def file_name(index: int) -> str | None:
                if index < 0:
                    return None
                return files[index] if index < len(files) else "<unknown>"

            steps = []
            decl_file = decl_line = None
            if f >= 0:
                name = a2l_name = ft.name(f)
                if not ft.linkage[f]:
                    # No linkage name in DWARF: bfd prints the ELF symbol at the address instead, even
                    # for inlined code; we take it only for the function that owns the code.
                    sym = symbol_name(address)
                    if sym:
                        a2l_name = sym
                        if ft.callers[f] < 0:
                            name = sym
                decl_file, decl_line = file_name(ft.decl_file[f]), ft.decl_line[f] or None
                cur = f
                while ft.callers[cur] >= 0:
                    caller = ft.callers[cur]
                    caller_name = ft.name(caller)
                    steps.append(InlineStep(demangle(caller_name) if caller_name else None,
                                            file_name(ft.call_file[cur]), ft.call_line[cur] or None,
                                            file_name(ft.decl_file[caller]), ft.decl_line[caller] or None))
                    cur = caller
            else:
                name = a2l_name = symbol_name(address)
            function = demangle(name) if name else None
            return SourceLine(file, line or None, function, disc, steps, decl_file, decl_line,
                              demangle(a2l_name) if a2l_name else None)
        return None


# -- finding the file that holds the DWARF ---------------------------------------------------------
def debug_dirs() -> list[str]:
    """Where separate debug files live: ``$PTTRACE_DEBUG_DIRS`` (':'-separated) then /usr/lib/debug."""
    extra = [d for d in os.environ.get("PTTRACE_DEBUG_DIRS", "").split(os.pathsep) if d]
    return extra + ["/usr/lib/debug"]


def _file_crc(path: str) -> int:
    crc = 0
    with open(path, "rb") as fh:
        while True:
            block = fh.read(1 << 22)
            if not block:
                return crc
            crc = zlib.crc32(block, crc)


def has_dwarf(elf: ElfFile) -> bool:
    return elf.has(".debug_info") and elf.has(".debug_line")


def find_debug_file(elf: ElfFile) -> ElfFile | None:
    """The file with this library's DWARF: itself, its build-id file, or its ``.gnu_debuglink``."""
    if has_dwarf(elf):
        return elf
    build_id = elf.build_id
    if build_id and len(build_id) > 2:
        for d in debug_dirs():
            candidate = os.path.join(d, ".build-id", build_id[:2], build_id[2:] + ".debug")
            if os.path.isfile(candidate):
                try:
                    dbg = ElfFile(candidate)
                except SymbolError:
                    continue
                if dbg.build_id == build_id and has_dwarf(dbg):
                    return dbg
    link = elf.debuglink
    if link:
        name, crc = link
        libdir = os.path.dirname(elf.path)
        candidates = [os.path.join(libdir, name), os.path.join(libdir, ".debug", name)]
        candidates += [os.path.join(d, libdir.lstrip("/"), name) for d in debug_dirs()]
        for candidate in candidates:
            if os.path.realpath(candidate) == elf.path or not os.path.isfile(candidate):
                continue
            try:
                if _file_crc(candidate) != crc:
                    continue
                dbg = ElfFile(candidate)
            except (SymbolError, OSError):
                continue
            if has_dwarf(dbg):
                return dbg
    return None
