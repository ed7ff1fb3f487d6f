"""One ELF symbol table (``.symtab`` or ``.dynsym``) read in place: entries unpacked one at a time
with ``struct``, names found by ``find`` over the string table, never a Python object per symbol."""
from __future__ import annotations

import bisect
import mmap
import struct
from array import array
from dataclasses import dataclass, field
TYPE_CHECKING = False  # not typing's: importing typing costs `where` ~5-10 ms; mypy still reads the block
if TYPE_CHECKING:
    from typing import Literal

from tracer.errors import SymbolError

from .debugfile import find_debug_file
from .elffile import SHT_NOBITS, ElfFile

STT_OBJECT, STT_FUNC, STT_TLS, STT_GNU_IFUNC = 1, 2, 6, 10
FUNCTION_TYPES = (STT_FUNC, STT_GNU_IFUNC)
OBJECT_TYPES = (STT_OBJECT, STT_TLS)
BINDINGS = {0: "local", 1: "global", 2: "weak", 10: "unique"}
_ENTRY_SIZE = {64: 24, 32: 16}


@dataclass
class SymbolTable:
    """A symbol table section and its string table, as offsets in ``mm``: the library's bytes, or
    those of its separate debug file for a stripped library's ``.symtab``.

    ``sorted_names``/``order``: every entry's ``st_name`` sorted, and the entry index of each; they
    turn a string-table offset found by ``find`` into the symbols whose names start there."""

    mm: mmap.mmap  # the library file, mapped (ElfFile.mm)
    name: str
    elfclass: int
    offset: int
    count: int
    entsize: int
    str_offset: int
    str_size: int
    sorted_names: array = field(default_factory=lambda: array("I"))
    order: array = field(default_factory=lambda: array("I"))

    def __post_init__(self):
        self._fmt = "<IBBHQQ" if self.elfclass == 64 else "<IIIBBH"

    @property
    def str_end(self) -> int:
        return self.str_offset + self.str_size

    def entry(self, i: int) -> tuple[int, int, int, int, int]:
        """(st_name, st_info, st_shndx, st_value, st_size) of entry ``i``."""
        off = self.offset + i * self.entsize
        if self.elfclass == 64:
            name, info, _, shndx, value, size = struct.unpack_from(self._fmt, self.mm, off)
        else:
            name, value, size, info, _, shndx = struct.unpack_from(self._fmt, self.mm, off)
        return name, info, shndx, value, size

    def name_at(self, st_name: int) -> str:
        start = self.str_offset + st_name
        end = self.mm.find(b"\0", start, self.str_end) if start < self.str_end else -1
        if end < 0:
            end = max(start, self.str_end)
        return self.mm[start:end].decode("utf-8", "replace")

    def column(self, byte_offset: int, code: Literal["B", "H", "I", "Q"]) -> list[int]:
        """One field of every entry, read as a strided memoryview."""
        size = struct.calcsize(code)
        raw = self.mm[self.offset : self.offset + self.count * self.entsize]
        if self.entsize % size or byte_offset % size:
            return [struct.unpack_from("<" + code, raw, i * self.entsize + byte_offset)[0] for i in range(self.count)]
        view = memoryview(raw).cast(code)
        step = self.entsize // size
        return view[byte_offset // size :: step].tolist()

    def fields(self) -> tuple[list[int], list[int], list[int], list[int]]:
        """(st_info, st_shndx, st_value, st_size) of every entry, as columns."""
        if self.elfclass == 64:
            return self.column(4, "B"), self.column(6, "H"), self.column(8, "Q"), self.column(16, "Q")
        return self.column(12, "B"), self.column(14, "H"), self.column(4, "I"), self.column(8, "I")

    def sort_names(self) -> None:
        col = self.column(0, "I")
        order = sorted(range(len(col)), key=col.__getitem__)
        self.sorted_names = array("I", [col[i] for i in order])
        self.order = array("I", order)

    def starting_in(self, lo: int, hi: int) -> list[int]:
        """Indices of the symbols whose name starts at a string-table offset in [lo, hi]."""
        a = bisect.bisect_left(self.sorted_names, lo)
        b = bisect.bisect_right(self.sorted_names, hi)
        return [self.order[k] for k in range(a, b)]

    def find_all(self, pattern: bytes):
        """Every position of ``pattern`` in the string table (absolute, in ``mm``)."""
        end = self.str_end
        pos = self.mm.find(pattern, self.str_offset, end)
        while pos >= 0:
            yield pos
            pos = self.mm.find(pattern, pos + 1, end)

    def names_holding(self, needle: bytes) -> set[int]:
        """Indices of the symbols whose names contain ``needle``. Names may share a tail in the
        string table: any symbol starting between the string's start and the match holds it."""
        mm, so, end = self.mm, self.str_offset, self.str_end
        found: set[int] = set()
        pos = mm.find(needle, so, end)
        while pos >= 0:
            s = mm.rfind(b"\0", so, pos) + 1
            found.update(self.starting_in(s - so, pos - so))
            e = mm.find(b"\0", pos, end)
            if e < 0:
                break
            pos = mm.find(needle, e, end)
        return found


def table_of(elf: ElfFile, name: str, str_name: str) -> SymbolTable | None:
    """The symbol table section ``name`` of ``elf``, None when absent or empty; raises SymbolError when
    its entries are too small to be symbols (a damaged section header)."""
    sec = elf.sections.get(name)
    if sec is None or sec.size == 0 or sec.type == SHT_NOBITS:
        return None
    strsec = elf.section_list[sec.link] if 0 < sec.link < len(elf.section_list) else None
    strsec = strsec or elf.sections.get(str_name)
    if strsec is None or strsec.type == SHT_NOBITS:
        return None
    minimum = _ENTRY_SIZE[elf.elfclass]
    entsize = sec.entsize or minimum
    if entsize < minimum:
        raise SymbolError(f"{elf.display}: corrupt ELF file ({name} has entries of {entsize} bytes, "
                          f"symbols take {minimum})")
    return SymbolTable(elf.mm, name, elf.elfclass, sec.offset, sec.size // entsize, entsize, strsec.offset,
                       strsec.size)


def separate_symtab(elf: ElfFile) -> tuple[SymbolTable, ElfFile] | None:
    """The ``.symtab`` of the library's separate debug file (found by build-id or a CRC-checked
    ``.gnu_debuglink``, as for its DWARF), with that file; None when there is none."""
    try:
        debug = find_debug_file(elf)
        if debug is None or debug is elf or debug.elfclass != elf.elfclass:
            return None
        table = table_of(debug, ".symtab", ".strtab")
    except SymbolError:
        return None
    return (table, debug) if table is not None else None
