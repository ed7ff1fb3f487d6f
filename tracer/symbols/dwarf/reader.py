"""The DWARF of one file: which unit holds an address (``.debug_aranges``), that unit's tables
(decoded once, then read from the cache), and the answer for the address."""
from __future__ import annotations

import bisect
import threading
from typing import Callable

from .. import cache
from ..leb128 import LebTooLong
from ..demangle import demangle
from ..elffile import ElfFile
from .answers import InlineStep, SourceLine
from .forms import TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT, DwarfFormatError, initial_length
from .functions import FunctionTable, OriginNames, scan_functions
from .lines import LineTable, decode_line_program
from .sections import Sections
from .unit import CompUnit


_RELEASE_EVERY = 32 << 20  # walking the unit headers: unmap what was walked every 32 MB


class DwarfReader:
    """The DWARF of one file (the library itself or its separate debug file)."""

    def __init__(self, elf: ElfFile, library_path: str):
        self.elf = elf
        self.library_path = library_path
        self.key = elf.key()
        if not (elf.has(".debug_info") and elf.has(".debug_line")):
            raise DwarfFormatError("no .debug_info/.debug_line")
        self.sections = Sections(elf)
        self.origins = OriginNames(self.unit_containing)
        self._units: dict[int, CompUnit] = {}
        self._unit_offsets: list[int] | None = None
        self._walked: list[int] = []  # unit offsets found so far by the walk of the unit headers
        self._walk_pos = 0  # where that walk goes on
        self._asked_cache = False
        self._walk_lock = threading.Lock()
        self._aranges: tuple | None = None
        self._listed: tuple | None = None  # .debug_aranges alone, not completed from the units it leaves out
        self._tables: dict[int, tuple[LineTable | None, FunctionTable]] = {}

    # -- structure ------------------------------------------------------------------------------
    def unit(self, offset: int) -> CompUnit:
        u = self._units.get(offset)
        if u is None:
            u = self._units[offset] = CompUnit(self.sections, offset)
        return u

    def _stored_units(self) -> list[int] | None:
        """The unit offsets, if known: found before, or in the cache (asked once)."""
        if self._unit_offsets is None and not self._asked_cache:
            self._asked_cache = True
            stored = cache.read(self.key, "units")
            if stored is not None:
                self._unit_offsets = list(stored)
        return self._unit_offsets

    def unit_offsets(self) -> list[int]:
        offsets = self._stored_units()
        if offsets is None:
            self._walk(None)
            offsets = self._unit_offsets = self._walked
            cache.write(self.key, "units", self._walked)
        return offsets

    def _walk(self, past: int | None) -> None:
        """Walk the unit headers on until a unit starts after ``past`` (None: to the end). One thread at a
        time (a live UI's source pane and the recorder's tailer share readers)."""
        info = self.sections.info
        with self._walk_lock:
            pos = released = self._walk_pos
            while pos + 4 <= len(info) and (past is None or pos <= past):
                self._walked.append(pos)
                self.sections.need_info(pos + 12)
                length, after, _ = initial_length(info, pos)
                pos = after + length
                if pos - released >= _RELEASE_EVERY:
                    self.elf.release(".debug_info", released, min(pos, len(info)))
                    released = pos
            self.elf.release(".debug_info", released, min(pos, len(info)))
            self._walk_pos = pos

    def unit_containing(self, info_offset: int) -> CompUnit:
        offs = self._stored_units()
        if offs is None:
            self._walk(info_offset)  # as far as that offset: a compressed section inflated that far only
            offs = self._walked
        k = bisect.bisect_right(offs, info_offset) - 1
        if k < 0:
            raise DwarfFormatError(f"no unit holds .debug_info offset {info_offset:#x}")
        return self.unit(offs[k])

    # -- address -> unit --------------------------------------------------------------------------
    def aranges(self, complete: bool = True) -> tuple:
        """(lows, highs, unit offsets, longest span): sorted ranges from .debug_aranges, completed from
        the units' own DW_AT_ranges / low_pc for units that .debug_aranges leaves out. Completing them
        walks every unit header (all of a compressed .debug_info inflated): ``complete=False`` gives
        .debug_aranges alone when it is not done yet."""
        if self._aranges is not None:
            return self._aranges
        if not complete and self._listed is not None:
            return self._listed  # the cache held no complete list when this was read (a read per address: 25%)
        stored = cache.read(self.key, "aranges")
        if stored is not None:
            self._aranges = stored
            return stored
        if not complete:
            if self._listed is None:
                spans: list[tuple[int, int, int]] = []
                self._read_aranges(spans)
                self._listed = _sorted_spans(spans)
            return self._listed
        spans = []
        covered = self._read_aranges(spans)
        for off in self.unit_offsets():
            if off in covered:
                continue
            try:
                u = self.unit(off)
            except (DwarfFormatError, LebTooLong):
                continue
            if u.top_tag not in (TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT):
                continue
            for lo, hi in u.pc_ranges(u.top_attrs):
                spans.append((lo, hi, off))
        result = _sorted_spans(spans)
        cache.write(self.key, "aranges", result)
        self._aranges = result
        return result

    def _read_aranges(self, spans: list) -> set[int]:
        """Append .debug_aranges' (low, high, unit offset) to ``spans``; the offsets of the units it covers."""
        covered: set[int] = set()
        data = self.elf.data(".debug_aranges")
        if data is None:
            return covered
        pos = 0
        while pos + 4 <= len(data):
            start = pos
            length, pos, osz = initial_length(data, pos)
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
        return covered

    def units_for(self, address: int) -> list[int]:
        """Offsets of the units whose ranges hold the address (normally one), in section order. The units
        .debug_aranges lists are asked first: only an address it does not place makes the list complete
        (a unit it leaves out that holds an address it does place, too, is not looked for: gcc lists
        every unit with code, clang none)."""
        out: list[int] = []
        for complete in (False, True):
            lows, highs, units, max_span = self.aranges(complete)
            i = bisect.bisect_right(lows, address) - 1
            while i >= 0 and lows[i] + max_span > address:
                if highs[i] > address and units[i] not in out:
                    out.append(units[i])
                i -= 1
            if out or self._aranges is not None:
                break
        return sorted(out)

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
            lt, ft = got = self.decode(unit_offset)
            self._units.pop(unit_offset, None)  # its bytes are no longer needed; keep memory flat
            cache.write(self.key, "cu", (lt.to_payload() if lt else None, ft.to_payload()), extra=f"-{unit_offset:x}")
        self._tables[unit_offset] = got
        return got

    def decode(self, unit_offset: int, skip_types: bool = True) -> tuple[LineTable | None, FunctionTable]:
        """A unit's line table (None: it has no line program) and function table, decoded from its bytes
        (``skip_types``: see ``scan_functions``)."""
        u = self.unit(unit_offset)
        lines = None
        if u.stmt_list is not None and self.sections.line is not None:
            lines = decode_line_program(self.sections, u.stmt_list, u.comp_dir, u)
        return lines, scan_functions(u, self.origins, skip_types)

    # -- answers ---------------------------------------------------------------------------------
    def lookup(self, address: int, symbol_name: Callable[[int], str | None]) -> SourceLine | None:
        """The answer for one address; ``symbol_name(address)`` gives the ELF symbol's (mangled) name
        for the cases where bfd prefers it."""
        for off in self.units_for(address):
            lt, ft = self.tables(off)
            row = lt.lookup(address) if lt is not None else None
            f = ft.best(address)
            if row is None and f < 0:
                continue
            return _answer(address, row, lt, ft, f, symbol_name)
        return None


def _sorted_spans(spans: list[tuple[int, int, int]]) -> tuple:
    spans.sort()
    return ([s[0] for s in spans], [s[1] for s in spans], [s[2] for s in spans],
            max((s[1] - s[0] for s in spans), default=0))


def _answer(address: int, row, lt: LineTable | None, ft: FunctionTable, f: int, symbol_name) -> SourceLine:
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
                                    file_name(ft.decl_file[caller]), ft.decl_line[caller] or None,
                                    mangled=caller_name if ft.linkage[caller] else None))
            cur = caller
        mangled = name if (ft.linkage[f] or name != ft.name(f)) else None
    else:
        name = a2l_name = mangled = symbol_name(address)
    function = demangle(name) if name else None
    return SourceLine(file, line or None, function, disc, steps, decl_file, decl_line,
                      demangle(a2l_name) if a2l_name else None, mangled=mangled)
