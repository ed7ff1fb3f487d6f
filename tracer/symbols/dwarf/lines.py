"""``.debug_line``: a unit's line program, run into sorted address -> (file, line) sequences.

The rows follow bfd (and so addr2line): ``is_stmt`` is ignored, only the last row at one address
is kept, and overlapping sequences are trimmed the way bfd trims them. File names are built like
bfd's ``concat_filename`` (comp_dir / directory / name, DWARF 4 and 5 numbering).
"""
from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass
from .forms import (F_BLOCK, F_LINE_STRP, F_STRING, F_STRP, F_STRX, F_STRX1, F_STRX2, F_STRX3, F_STRX4, F_UDATA,
                    FIXED_SIZE, DwarfFormatError, cstr, initial_length, str_at)
from ..leb128 import sleb, uleb
from .packed import compact, pack, unpack
from .sections import Sections
from .unit import CompUnit

DW_LNE_END_SEQUENCE, DW_LNE_SET_ADDRESS, DW_LNE_DEFINE_FILE, DW_LNE_SET_DISCRIMINATOR = 1, 2, 3, 4
DW_LNCT_PATH, DW_LNCT_DIRECTORY_INDEX = 1, 2


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
                [(rows[0],) + tuple(pack(a) for a in rows[1:]) for rows in self.seq_rows])

    @classmethod
    def from_payload(cls, p) -> "LineTable":
        rows = [(r[0],) + tuple(unpack(x) for x in r[1:]) for r in p[3]]
        return cls(p[0], p[1], p[2], rows)


@dataclass
class LineHeader:
    """What a line program's header says about how to run it."""

    version: int
    min_inst: int
    max_ops: int
    line_base: int
    line_range: int
    opcode_base: int
    std_lengths: list[int]
    dirs: list[str | None]
    names: list[tuple[str | None, int]]  # (path, directory index), numbered as the version numbers them
    program_start: int
    end: int


def file_name(names: list, dirs: list, comp_dir: str | None, index: int, v5: bool) -> str | None:
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


_STRX_SIZES = {F_STRX1: 1, F_STRX2: 2, F_STRX3: 3, F_STRX4: 4}


def _read_entry_formats(data, pos, unit: CompUnit | None, offset_size: int, sections: Sections):
    """A DWARF 5 directory or file name table: [(path, directory index)]."""
    count = data[pos]
    pos += 1
    formats = []
    for _ in range(count):
        ctype, pos = uleb(data, pos)
        form, pos = uleb(data, pos)
        formats.append((ctype, form))
    n, pos = uleb(data, pos)
    entries = []
    for _ in range(n):
        path = None
        dir_index = 0
        for ctype, form in formats:
            value: str | int | None = None
            if form == F_STRING:
                raw, pos = cstr(data, pos)
                value = raw.decode("utf-8", "replace")
            elif form in (F_LINE_STRP, F_STRP):
                off = int.from_bytes(data[pos : pos + offset_size], "little")
                pos += offset_size
                value = str_at(sections.line_str if form == F_LINE_STRP else sections.str, off)
            elif form == F_STRX or form in _STRX_SIZES:
                if form == F_STRX:
                    idx, pos = uleb(data, pos)
                else:
                    size = _STRX_SIZES[form]
                    idx = int.from_bytes(data[pos : pos + size], "little")
                    pos += size
                value = unit.string(F_STRX, idx) if unit is not None else None
            elif form == F_UDATA:
                value, pos = uleb(data, pos)
            elif form in FIXED_SIZE:
                size = FIXED_SIZE[form]
                value = int.from_bytes(data[pos : pos + size], "little") if size <= 8 else None
                pos += size
            elif form == F_BLOCK:
                size, pos = uleb(data, pos)
                pos += size
            else:
                raise DwarfFormatError(f"line table: unsupported entry form {form:#x}")
            if ctype == DW_LNCT_PATH:
                path = value if isinstance(value, str) else None
            elif ctype == DW_LNCT_DIRECTORY_INDEX:
                dir_index = value if isinstance(value, int) else 0
        entries.append((path, dir_index))
    return entries, pos


def _read_v4_names(prog, pos: int) -> tuple[list, list, int]:
    """DWARF 2-4 include_directories and file_names: NUL-terminated lists."""
    dirs = []
    while prog[pos] != 0:
        raw, pos = cstr(prog, pos)
        dirs.append(raw.decode("utf-8", "replace"))
    pos += 1
    names = []
    while prog[pos] != 0:
        raw, pos = cstr(prog, pos)
        d, pos = uleb(prog, pos)
        _, pos = uleb(prog, pos)  # modification time
        _, pos = uleb(prog, pos)  # length
        names.append((raw.decode("utf-8", "replace"), d))
    return dirs, names, pos + 1


def read_line_header(prog: bytes, offset: int, offset_size: int, pos: int, end: int,
                     unit: CompUnit | None, sections: Sections) -> LineHeader:
    """The header of the program copied out in ``prog`` (``offset``: where it was in .debug_line)."""
    version = prog[pos] | prog[pos + 1] << 8
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
    line_base = prog[pos + 1] - 256 if prog[pos + 1] > 127 else prog[pos + 1]
    line_range = prog[pos + 2]
    opcode_base = prog[pos + 3]
    pos += 4
    if line_range == 0:
        raise DwarfFormatError(f"line program at {offset:#x} has line_range 0")
    if opcode_base == 0:
        raise DwarfFormatError(f"line program at {offset:#x} has opcode_base 0")
    std_lengths = list(prog[pos : pos + opcode_base - 1])
    pos += opcode_base - 1
    if version >= 5:
        dir_entries, pos = _read_entry_formats(prog, pos, unit, offset_size, sections)
        dirs = [d for d, _ in dir_entries]
        names, pos = _read_entry_formats(prog, pos, unit, offset_size, sections)
    else:
        dirs, names, pos = _read_v4_names(prog, pos)
    return LineHeader(version, min_inst, max_ops, line_base, line_range, opcode_base, std_lengths, dirs, names,
                      program_start, end)


def decode_line_program(sections: Sections, offset: int, comp_dir: str | None,
                        unit: CompUnit | None = None) -> LineTable:
    """The line table of the program at ``offset`` of .debug_line."""
    data = sections.line
    if not 0 <= offset or offset + 4 > len(data):
        raise DwarfFormatError(f"line program at {offset:#x} is past the end of .debug_line")
    length, pos, offset_size = initial_length(data, offset)
    end = pos + length
    if end > len(data):
        raise DwarfFormatError(f"line program at {offset:#x} runs past the end of .debug_line")
    prog = bytes(data[offset:end])
    header = read_line_header(prog, offset, offset_size, pos - offset, end - offset, unit, sections)
    sequences = run_line_program(prog, header)
    v5 = header.version >= 5
    # file_names[i] is the name of DWARF file number i (in DWARF 4, 0 means "unknown")
    names = header.names
    file_names = [file_name(names, header.dirs, comp_dir, i, v5) for i in range(len(names) + (0 if v5 else 1))]
    return LineTable(file_names, *_trim_sequences(sequences))


def run_line_program(prog: bytes, h: LineHeader) -> list[tuple[list, list, list, list, int]]:
    """The line-number state machine: [(addresses, files, lines, discriminators, end address)] per
    sequence, in program order. DW_LNE_define_file appends to ``h.names``. One loop with the state in
    locals: it runs once per row of every unit a lookup touches."""
    sequences: list[tuple[list, list, list, list, int]] = []
    addrs: list[int] = []
    files: list[int] = []
    lines: list[int] = []
    discs: list[int] = []
    address = op_index = discriminator = 0
    file = line = 1
    min_inst, max_ops, line_base, line_range, opcode_base = h.min_inst, h.max_ops, h.line_base, h.line_range, \
        h.opcode_base
    const_adv = (255 - opcode_base) // line_range
    simple = max_ops == 1
    last_addr = -1
    pos, end = h.program_start, h.end
    while pos < end:
        op = prog[pos]
        pos += 1
        if op >= opcode_base:  # special opcode: advance address and line, then append a row
            adj = op - opcode_base
            if simple:
                address += (adj // line_range) * min_inst
            else:
                adv = adj // line_range
                address += min_inst * ((op_index + adv) // max_ops)
                op_index = (op_index + adv) % max_ops
            line += line_base + adj % line_range
        elif op == 1:  # DW_LNS_copy: append a row
            pass
        elif op == 0:  # extended opcode
            n, pos = uleb(prog, pos)
            if n == 0:
                continue
            sub = prog[pos]
            arg = pos + 1
            pos += n
            if sub == DW_LNE_END_SEQUENCE:
                if addrs:
                    sequences.append((addrs, files, lines, discs, address))
                addrs, files, lines, discs = [], [], [], []
                last_addr = -1
                address = op_index = discriminator = 0
                file = line = 1
            elif sub == DW_LNE_SET_ADDRESS:
                address = int.from_bytes(prog[arg:pos], "little")
                op_index = 0
            elif sub == DW_LNE_DEFINE_FILE:  # DWARF <= 4
                raw, q = cstr(prog, arg)
                d, q = uleb(prog, q)
                h.names.append((raw.decode("utf-8", "replace"), d))
            elif sub == DW_LNE_SET_DISCRIMINATOR:
                discriminator, _ = uleb(prog, arg)
            continue
        elif op == 2 or op == 8:  # advance_pc, const_add_pc
            if op == 2:
                adv, pos = uleb(prog, pos)
            else:
                adv = const_adv
            if simple:
                address += adv * min_inst
            else:
                address += min_inst * ((op_index + adv) // max_ops)
                op_index = (op_index + adv) % max_ops
            continue
        elif op == 3:  # advance_line
            d, pos = sleb(prog, pos)
            line += d
            continue
        elif op == 4:  # set_file
            file, pos = uleb(prog, pos)
            continue
        elif op == 9:  # fixed_advance_pc
            address += prog[pos] | prog[pos + 1] << 8
            op_index = 0
            pos += 2
            continue
        elif op == 5 or op == 12:  # set_column, set_isa
            _, pos = uleb(prog, pos)
            continue
        elif op in (6, 7, 10, 11):  # negate_stmt, basic_block, prologue_end, epilogue_begin
            continue
        else:  # opcodes of later versions: skip as many LEB128 operands as the header says
            for _ in range(h.std_lengths[op - 1]):
                _, pos = uleb(prog, pos)
            continue
        # a row (bfd keeps only the last row at one address)
        if last_addr == address:
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
    return sequences


def _trim_sequences(sequences) -> tuple[list[int], list[int], list]:
    """bfd: sort by low pc, longest first on ties, then stable; drop nested, trim overlapping."""
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
        seq_rows.append((base, compact([x - base for x in a]), compact(f), compact([max(x, 0) for x in ln]),
                         compact(d)))
    return seq_low, seq_high, seq_rows
