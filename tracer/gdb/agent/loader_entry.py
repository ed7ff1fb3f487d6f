"""The dynamic loader's entry code: the outermost frames of a process that has not reached its program yet.

The kernel starts a dynamically linked program in its interpreter (ld.so) at that ELF's entry, ``_start``,
with the stack holding argc, argv and the environment: there is no caller. ld.so's entry code (glibc's
``_start``, which calls ``_dl_start``, then ``_dl_start_user``, which calls ``_dl_init`` and jumps to the
program) has no CFI, and gdb stops a backtrace at the program's own entry (``backtrace past-entry``) but not
at the loader's: its prologue analyser takes argc and the argv pointers for return addresses (measured: ``bt``
at ``_dl_start`` of ``python3.11 -c pass`` shows ``_start`` then ``0x3``, three stack addresses and ``0x0``;
at ``_dl_init``, ``_dl_start_user`` then the same). A walk ends at a frame in that code: from the loader's
entry up to the next address its ``.eh_frame`` describes.
"""
from __future__ import annotations

import re

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.state import CACHES
from tracer.symbols.ehframe import EhFrame, Unsupported

_AT_BASE = re.compile(r"^\s*7\s+AT_BASE\s.*?(0x[0-9a-fA-F]+)\s*$", re.M)
_ELF_ENTRY = 24  # e_entry in an ELF64 header


def _entry_code() -> tuple[int, int, str | None] | None:
    """(start, end, the loader's file): the loader's entry code in the selected process; None when there is
    no loader (a static program), its entry has unwind information (gdb's own to follow) or it cannot be
    read. Kept until gdb's objfiles change (an exec changes them)."""
    if CACHES.loader_entry is not None:
        return CACHES.loader_entry or None
    found: tuple = ()
    try:
        m = _AT_BASE.search(gdb.execute("info auxv", to_string=True))
        base = int(m.group(1), 16) if m else 0
        if base:
            header = bytes(gdb.selected_inferior().read_memory(base, _ELF_ENTRY + 8))
            if header[:4] == b"\x7fELF":
                entry = int.from_bytes(header[_ELF_ENTRY:_ELF_ENTRY + 8], "little")  # the loader's own address
                path = gdb.solib_name(base + entry)
                end = _uncovered_until(path, entry) if path else None
                if end is not None:
                    found = (base + entry, base + end, path)
    except READ_ERRORS:
        found = ()
    CACHES.loader_entry = found
    return found or None


_UNCOVERED: dict[tuple[str, int], int | None] = {}  # (loader, entry) -> _uncovered_until: files do not change in a run


def _uncovered_until(path: str, entry: int) -> int | None:
    """Where the code from ``entry`` on that no FDE describes ends (file addresses); None when an FDE
    describes the entry itself."""
    if (path, entry) not in _UNCOVERED:
        _UNCOVERED[path, entry] = _read_uncovered_until(path, entry)
    return _UNCOVERED[path, entry]


def _read_uncovered_until(path: str, entry: int) -> int | None:
    try:
        table = EhFrame(path)
    except (OSError, Unsupported):
        return None
    try:
        if table.covers(entry):
            return None
        end = table.next_start(entry)
        return end if end is not None else table.text_range()[1]
    except Unsupported:
        return None
    finally:
        table.close()


def is_loader_entry(pc: int, exact: bool, library: str | None) -> bool:
    """Whether a frame at ``pc`` (``exact``: where the thread stopped, else a return address, looked up at
    pc - 1 as gdb does) in ``library`` runs the loader's entry code: nothing called it."""
    code = _entry_code()
    if code is None or library != code[2]:
        return False
    where = pc if exact else pc - 1
    return code[0] <= where < code[1]
