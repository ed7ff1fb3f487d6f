"""Finding the file that holds a library's DWARF (and, for a stripped library, its ``.symtab``):
the library itself, its build-id file under a debug directory, or its ``.gnu_debuglink``, as gdb does
(where they are looked for: tracer/elfparts.py, shared with the agent's test of a library at its load)."""
from __future__ import annotations

import os
import zlib

from tracer import elfparts, settings
from tracer.errors import SymbolError

from .elffile import ElfFile


def debug_dirs() -> list[str]:
    """Where separate debug files live: ``$PTTRACE_DEBUG_DIRS`` (':'-separated) then /usr/lib/debug."""
    return [*settings.debug_dirs(), elfparts.USR_LIB_DEBUG]


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


def _by_build_id(build_id: str) -> ElfFile | None:
    for d in debug_dirs():
        candidate = elfparts.build_id_file(d, build_id)
        if not os.path.isfile(candidate):
            continue
        try:
            dbg = ElfFile(candidate)
        except SymbolError:
            continue
        if dbg.build_id == build_id and has_dwarf(dbg):
            return dbg
    return None


def _by_debuglink(elf: ElfFile, name: str, crc: int) -> ElfFile | None:
    # A hostile link name (a "/", "..", a NUL) gives no candidate: it names a file beside the library only.
    for candidate in elfparts.debuglink_candidates(os.path.dirname(elf.path), name, debug_dirs()):
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


def find_debug_file(elf: ElfFile) -> ElfFile | None:
    """The file with this library's DWARF: itself, its build-id file, or its ``.gnu_debuglink``."""
    if has_dwarf(elf):
        return elf
    build_id = elf.build_id
    if build_id and len(build_id) > 2:
        found = _by_build_id(build_id)
        if found is not None:
            return found
    link = elf.debuglink
    return _by_debuglink(elf, *link) if link else None
