"""The dynamic loader's entry point: the outermost frame of a process that has not reached its program yet.

The kernel starts a dynamically linked program in its interpreter (ld.so) at that ELF's entry, ``_start``,
with the stack holding argc, argv and the environment: there is no caller. gdb stops a backtrace at the
program's own entry (``backtrace past-entry``) but not at the loader's, and ld.so's ``_start`` has no CFI:
gdb's prologue analyser takes argc and the argv pointers for return addresses (measured: ``bt`` at
``_dl_start`` of ``python3.11 -c pass`` shows ``_start`` then ``0x3``, three stack addresses and ``0x0``).
A walk ends at the frame whose function starts at the loader's entry.
"""
from __future__ import annotations

import re

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.state import CACHES

_AT_BASE = re.compile(r"^\s*7\s+AT_BASE\s.*?(0x[0-9a-fA-F]+)\s*$", re.M)
_SYMBOL = re.compile(r"^.*?(?: \+ (\d+))? in section ")
_ELF_ENTRY = 24  # e_entry in an ELF64 header


def _entry() -> tuple[int, str | None] | None:
    """(the loader's entry address, the loader's file) in the selected process; None: no loader (a static
    program) or not readable. Kept until gdb's objfiles change (an exec changes them)."""
    if CACHES.loader_entry is not None:
        return CACHES.loader_entry or None
    found: tuple = ()
    try:
        m = _AT_BASE.search(gdb.execute("info auxv", to_string=True))
        base = int(m.group(1), 16) if m else 0
        if base:
            header = bytes(gdb.selected_inferior().read_memory(base, _ELF_ENTRY + 8))
            if header[:4] == b"\x7fELF":
                entry = base + int.from_bytes(header[_ELF_ENTRY:_ELF_ENTRY + 8], "little")
                found = (entry, gdb.solib_name(entry))
    except READ_ERRORS:
        found = ()
    CACHES.loader_entry = found
    return found or None


def is_loader_entry(pc: int, exact: bool, library: str | None) -> bool:
    """Whether a frame at ``pc`` (``exact``: where the thread stopped, else a return address, looked up
    at pc - 1 as gdb does) in ``library`` runs the loader's entry function: nothing called it."""
    entry = _entry()
    if entry is None or library != entry[1]:
        return False
    known = CACHES.at_loader_entry.get((pc, exact))
    if known is None:
        known = CACHES.at_loader_entry[pc, exact] = _starts_at(pc if exact else pc - 1, entry[0])
    return known


def _starts_at(where: int, entry: int) -> bool:
    """Whether the function (gdb's symbol) holding ``where`` starts at ``entry``."""
    if where < entry:
        return False
    try:
        m = _SYMBOL.match(gdb.execute(f"info symbol {where:#x}", to_string=True))
    except READ_ERRORS:
        return False
    return m is not None and where - int(m.group(1) or 0) == entry
