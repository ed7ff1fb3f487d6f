"""The source files a library's DWARF names: what vouches for reading a native frame's file here.

A session says a frame of ``libfoo.so`` ran ``/home/me/foo.cpp:12``; whoever wrote the session may
have written anything there. The library on this machine is the witness: if its line tables name
that file, the file is that library's source (tracer/export/local_files.py decides with this). A frame
recorded with its offset in the library is vouched for by the unit holding that offset alone.
"""
from __future__ import annotations

import os
from functools import lru_cache

from tracer.errors import SymbolError


@lru_cache(maxsize=32)
def dwarf_file_names(library: str) -> frozenset[str]:
    """Every file the line tables of ``library`` (or its separate debug file) name, normalised;
    empty when it has no DWARF, is not here, or cannot be read. Each unit's tables are the ones
    ``where`` decodes and caches, so a library looked up before costs little."""
    return _files_of_units(library, lambda reader: reader.unit_offsets())


@lru_cache(maxsize=256)
def dwarf_files_at(library: str, address: int) -> frozenset[str]:
    """The files the line tables of the unit holding ``address`` name (and of the one holding
    ``address - 1``: a caller's pc is a return address), normalised; empty as for ``dwarf_file_names``.
    One unit's tables, those the frame's own lookup decoded and cached: in a full debug build,
    ``dwarf_file_names`` decodes hundreds of units (minutes), this one."""
    return _files_of_units(
        library, lambda reader: sorted({u for a in {address, max(address - 1, 0)} for u in reader.units_for(a)}))


def _files_of_units(library: str, units) -> frozenset[str]:
    """The files named by the line tables of the units ``units(reader)`` gives, normalised."""
    from tracer.symbols import _dwarf, _index
    from tracer.symbols.dwarf import DECODE_ERRORS

    try:
        reader = _dwarf(_index(library))
        if reader is None:
            return frozenset()
        names: set[str] = set()
        for offset in units(reader):
            table, _functions = reader.tables(offset)
            if table is not None:
                names.update(os.path.normpath(f) for f in table.files if f and f != "<unknown>")
        return frozenset(names)
    except (SymbolError, OSError, *DECODE_ERRORS):
        return frozenset()
