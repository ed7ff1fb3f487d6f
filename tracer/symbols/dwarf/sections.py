"""The DWARF sections of one file: their bytes, read when first asked for, and the abbreviation tables
parsed from them. What a unit and a line program need of the file, and nothing else: the units, line
programs and function scans take this, not the reader that owns them (imports go reader -> unit)."""
from __future__ import annotations

from ..elffile import ElfFile
from .abbrev import Abbrev, parse_abbrev_table
from .forms import DwarfFormatError


class _Section:
    """A DWARF section's bytes, read (inflated, if compressed) the first time they are asked for and then
    kept on the object, as ``functools.cached_property`` would."""

    def __init__(self, section: str, lazy: bool = False):
        self.section = section
        self.lazy = lazy

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, sections, owner=None):
        if sections is None:
            return self
        data = sections.elf.data(self.section, lazy=self.lazy)
        sections.__dict__[self.name] = data
        return data


class Sections:
    """The sections of one file (the library itself or its separate debug file). A lookup answered from
    the cache reads none of them."""

    def __init__(self, elf: ElfFile):
        self.elf = elf
        self._abbrev_tables: dict[tuple, dict[int, Abbrev]] = {}

    # A compressed .debug_info is inflated only as far as it is read (elffile._Inflation): every read
    # of it is preceded by ``need_info``.
    info = _Section(".debug_info", lazy=True)
    line = _Section(".debug_line")
    abbrev = _Section(".debug_abbrev")
    str = _Section(".debug_str")
    line_str = _Section(".debug_line_str")
    str_offsets = _Section(".debug_str_offsets")
    addr = _Section(".debug_addr")
    rnglists = _Section(".debug_rnglists")
    ranges_v4 = _Section(".debug_ranges")

    def need_info(self, end: int) -> None:
        """Bytes [0, end) of .debug_info are there to read (inflated, if it is compressed)."""
        self.elf.ensure(".debug_info", end)

    def abbrev_table(self, offset: int, addr_size: int, offset_size: int) -> dict[int, Abbrev]:
        key = (offset, addr_size, offset_size)
        table = self._abbrev_tables.get(key)
        if table is None:
            if self.abbrev is None:
                raise DwarfFormatError("no .debug_abbrev")
            table = self._abbrev_tables[key] = parse_abbrev_table(self.abbrev, offset, addr_size, offset_size)
        return table
