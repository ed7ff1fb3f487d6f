"""One unit of ``.debug_info``: its header, the attribute values of its DIEs, and what they point
at in the other sections (strings, ``.debug_addr``, range lists)."""
from __future__ import annotations

from .abbrev import (KEEP_ALL, SKIP_BLOCK, SKIP_BLOCK1, SKIP_BLOCK2, SKIP_CSTR, SKIP_ULEB, Abbrev, compile_decoder,
                     compile_plan, form_size)
from .forms import (ADDRX_FORMS, AT_ADDR_BASE, AT_COMP_DIR, AT_GNU_ADDR_BASE, AT_GNU_RANGES_BASE, AT_HIGH_PC,
                    AT_LANGUAGE, AT_LOW_PC, AT_NAME, AT_RANGES, AT_RNGLISTS_BASE, AT_STMT_LIST, AT_STR_OFFSETS_BASE,
                    CONST_FORMS, F_ADDRX, F_BLOCK, F_BLOCK1, F_BLOCK2, F_BLOCK4, F_DATA16, F_EXPRLOC, F_FLAG_PRESENT,
                    F_IMPLICIT_CONST, F_INDIRECT, F_LINE_STRP, F_RNGLISTX, F_SDATA, F_STRING, F_STRP, STRX_FORMS,
                    ULEB_FORMS, DwarfFormatError, initial_length, str_at)
from ..leb128 import sleb, uleb
from .sections import Sections

_NOTHING: frozenset = frozenset()


class CompUnit:
    """One unit of ``.debug_info``, with its bytes copied out (a unit is small; the section is not)."""

    def __init__(self, sections: Sections, offset: int):
        self.sections = sections
        self.offset = offset
        self._read_header(sections.info, offset)
        # Attributes of the unit DIE that the rest depends on.
        self.str_offsets_base = 8 if self.offset_size == 4 else 16
        self.addr_base = 8
        self.rnglists_base = 0
        self.low_pc = 0
        self.comp_dir: str | None = None
        self.name: str | None = None
        self.stmt_list: int | None = None
        self.language = 0
        self.top_tag = 0
        self.top_attrs: list = []
        self._read_unit_die()

    def _read_header(self, info, offset: int) -> None:
        if offset + 11 > len(info):
            raise DwarfFormatError(f"unit at {offset:#x} is past the end of .debug_info")
        self.sections.need_info(offset + 12)
        length, pos, self.offset_size = initial_length(info, offset)
        self.end = pos + length
        if self.end > len(info):
            raise DwarfFormatError(f"unit at {offset:#x} runs past the end of .debug_info")
        self.sections.need_info(self.end)
        self.version = info[pos] | info[pos + 1] << 8
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
        self.abbrevs = self.sections.abbrev_table(abbrev_offset, self.addr_size, self.offset_size)

    def _read_unit_die(self) -> None:
        code, p = uleb(self.data, self.die_start)
        if not code:
            return
        ab = self.abbrev(code)
        self.top_tag = ab.tag
        attrs, _ = self.read_attrs(p, ab)
        for at, _form, value in attrs:  # the *_base attributes come first: decode the rest after
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
        self.top_attrs = attrs

    def abbrev(self, code: int) -> Abbrev:
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
            decoder = ab.decoders[wanted] = compile_decoder(ab, wanted, self.addr_size, self.offset_size,
                                                            self.version)
        if decoder is not None:
            return decoder(self.data, pos)
        plan = ab.plans.get(wanted)
        if plan is None:
            plan = ab.plans[wanted] = compile_plan(ab, wanted, self.addr_size, self.offset_size, self.version)
        data = self.data
        out = []
        for step in plan:
            if step.__class__ is int:
                if step >= 0:
                    pos += step
                elif step == SKIP_ULEB:
                    while data[pos] & 0x80:
                        pos += 1
                    pos += 1
                elif step == SKIP_CSTR:
                    pos = data.index(b"\0", pos) + 1
                elif step == SKIP_BLOCK:
                    n, pos = uleb(data, pos)
                    pos += n
                elif step == SKIP_BLOCK1:
                    pos += 1 + data[pos]
                elif step == SKIP_BLOCK2:
                    pos += 2 + (data[pos] | data[pos + 1] << 8)
                else:  # SKIP_BLOCK4
                    pos += 4 + int.from_bytes(data[pos : pos + 4], "little")
            else:
                at, form, const = step
                while form == F_INDIRECT:
                    form, pos = uleb(data, pos)
                value, pos = self._read_form(form, const, pos)
                if const is not KEEP_ALL:
                    out.append((at, form, value))
        return out, pos

    def _read_form(self, form: int, const: int, pos: int):
        """The generic (slow) path for one value; the generated decoders cover the usual forms."""
        data = self.data
        size = form_size(form, self.addr_size, self.offset_size, self.version)
        if size is not None:
            if form == F_IMPLICIT_CONST:
                return const, pos
            if form == F_FLAG_PRESENT:
                return 1, pos
            if form == F_DATA16:
                return None, pos + 16
            return int.from_bytes(data[pos : pos + size], "little"), pos + size
        if form in ULEB_FORMS:
            return uleb(data, pos)
        if form == F_SDATA:
            return sleb(data, pos)
        if form == F_STRING:
            end = data.index(b"\0", pos)
            return data[pos:end].decode("utf-8", "replace"), end + 1
        if form in (F_EXPRLOC, F_BLOCK):
            n, pos = uleb(data, pos)
            return None, pos + n
        if form in (F_BLOCK1, F_BLOCK2, F_BLOCK4):
            width = {F_BLOCK1: 1, F_BLOCK2: 2, F_BLOCK4: 4}[form]
            return None, pos + width + int.from_bytes(data[pos : pos + width], "little")
        raise DwarfFormatError(f"unit at {self.offset:#x}: unknown attribute form {form:#x}")

    def skip_attrs(self, pos: int, ab: Abbrev) -> int:
        if ab.fixed is not None:
            return pos + ab.fixed
        return self.read_attrs(pos, ab, _NOTHING)[1]

    def string(self, form: int, value) -> str | None:
        r = self.sections
        if form == F_STRING:
            return value
        if form == F_STRP:
            return str_at(r.str, value)
        if form == F_LINE_STRP:
            return str_at(r.line_str, value)
        if form in STRX_FORMS:
            so = r.str_offsets
            at = self.str_offsets_base + value * self.offset_size
            if so is None or at + self.offset_size > len(so):
                return None
            return str_at(r.str, int.from_bytes(so[at : at + self.offset_size], "little"))
        return None  # GNU_strp_alt (dwz) and strp_sup point into a file we do not read

    def address(self, form: int, value) -> int:
        if form in ADDRX_FORMS:
            table = self.sections.addr
            at = self.addr_base + value * self.addr_size
            if table is None or at + self.addr_size > len(table):
                raise DwarfFormatError(f"unit at {self.offset:#x}: address index {value} out of .debug_addr")
            return int.from_bytes(table[at : at + self.addr_size], "little")
        return value

    # -- address ranges ------------------------------------------------------------------------
    def ranges(self, form: int, value) -> list[tuple[int, int]]:
        """The [low, high) ranges of a DW_AT_ranges value (v5 .debug_rnglists or v4 .debug_ranges)."""
        if self.version >= 5:
            out = self._rnglist(form, value)
        else:
            out = self._ranges_v4(value)
        return [(lo, hi) for lo, hi in out if hi > lo]

    def _rnglist(self, form: int, value) -> list[tuple[int, int]]:
        data = self.sections.rnglists
        out: list[tuple[int, int]] = []
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
            if kind == 0:  # DW_RLE_end_of_list
                break
            if kind == 1:  # base_addressx
                i, pos = uleb(data, pos)
                base = self.address(F_ADDRX, i)
            elif kind == 2:  # startx_endx
                i, pos = uleb(data, pos)
                j, pos = uleb(data, pos)
                out.append((self.address(F_ADDRX, i), self.address(F_ADDRX, j)))
            elif kind == 3:  # startx_length
                i, pos = uleb(data, pos)
                n, pos = uleb(data, pos)
                lo = self.address(F_ADDRX, i)
                out.append((lo, lo + n))
            elif kind == 4:  # offset_pair
                a, pos = uleb(data, pos)
                b, pos = uleb(data, pos)
                out.append((base + a, base + b))
            elif kind == 5:  # base_address
                base = int.from_bytes(data[pos : pos + asz], "little")
                pos += asz
            elif kind == 6:  # start_end
                a = int.from_bytes(data[pos : pos + asz], "little")
                b = int.from_bytes(data[pos + asz : pos + 2 * asz], "little")
                pos += 2 * asz
                out.append((a, b))
            elif kind == 7:  # start_length
                a = int.from_bytes(data[pos : pos + asz], "little")
                pos += asz
                n, pos = uleb(data, pos)
                out.append((a, a + n))
            else:
                raise DwarfFormatError(f"unknown range list entry {kind}")
        return out

    def _ranges_v4(self, pos: int) -> list[tuple[int, int]]:
        data = self.sections.ranges_v4
        out: list[tuple[int, int]] = []
        if data is None:
            return out
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
        return out

    def pc_ranges(self, attrs) -> list[tuple[int, int]]:
        low = high = None
        high_is_offset = False
        rng = None
        for at, form, value in attrs:
            if at == AT_LOW_PC:
                low = self.address(form, value)
            elif at == AT_HIGH_PC:
                if form in CONST_FORMS:
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

    def die_attrs(self, unit_offset: int, wanted: frozenset):
        """(abbrev, the ``wanted`` attributes) of the DIE at a unit-relative offset."""
        code, pos = uleb(self.data, unit_offset)
        if code == 0:
            return None, []
        ab = self.abbrev(code)
        attrs, _ = self.read_attrs(pos, ab, wanted)
        return ab, attrs
