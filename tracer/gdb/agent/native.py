"""Native frames as recorded: name, library, file:line, layer, each described once per pc.

A frame gdb cannot name (a library given to it as unwind tables only) or place (no line table) is
recorded with its library and file-relative ``offset``: pttrace names it from its own index
(``fill`` records, tracer/session/records.py).
"""
from __future__ import annotations

import os

import gdb  # type: ignore[import-not-found]

from tracer.dispatch.classify import classify, dispatch_key, short_name
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.state import CACHES, STATE
from tracer.session.records import CachedFrame


class _Names:
    """What does not change in a run: the executable's name and demangled linkage names."""

    exe: str | None = None  # None: not asked yet
    demangled: dict[str, str] = {}


def library(pc: int) -> str | None:
    """The file whose code is at ``pc``: a shared library, the executable, or None (code in no file, such as
    a JIT's, or a word gdb took for a return address): gdb names no executable for a pc in no library."""
    try:
        lib = gdb.solib_name(pc)
    except READ_ERRORS:
        lib = None
    if lib:
        return lib
    if _Names.exe is None:
        try:
            _Names.exe = gdb.current_progspace().filename or ""
        except READ_ERRORS:
            _Names.exe = ""
    if not _Names.exe:
        return None
    if CACHES.exe_ranges is None:
        CACHES.exe_ranges = _mapped_ranges(_Names.exe)
        if CACHES.exe_ranges is None:  # no process (a location listed before the run): the executable's own
            return _Names.exe
    return _Names.exe if any(lo <= pc < hi for lo, hi in CACHES.exe_ranges) else None


def _mappings(path: str) -> list[list[str]] | None:
    """The selected process's /proc/PID/maps lines of ``path`` (each split: range, perms, offset, dev, inode,
    path); None when there is no process to ask, [] when its maps cannot be read."""
    try:
        pid = gdb.selected_inferior().pid
    except READ_ERRORS:
        return None
    if not pid:
        return None
    names = {path, os.path.realpath(path)}
    try:
        with open(f"/proc/{pid}/maps") as fh:
            return [parts for parts in (line.split(None, 5) for line in fh)
                    if len(parts) == 6 and parts[5].strip() in names]
    except OSError:
        return []


def _mapped_ranges(path: str) -> list[tuple[int, int]] | None:
    """Where ``path`` is mapped in the selected process ([start, end) each), from /proc/PID/maps; None when
    there is no process to ask."""
    lines = _mappings(path)
    if lines is None:
        return None
    return [(int(lo, 16), int(hi, 16)) for lo, hi in (parts[0].split("-") for parts in lines)]


def symbols_loaded(lib: str | None) -> bool:
    """Whether gdb has read this library's symbols (with auto-solib-add off, maybe not)."""
    if not lib:
        return True
    loaded = CACHES.symbols_loaded.get(lib)
    if loaded is None:  # forgotten when gdb's objfiles change (CACHES.invalidate)
        names = {o.filename for o in gdb.objfiles()}
        loaded = CACHES.symbols_loaded[lib] = lib in names or os.path.realpath(lib) in names
    return loaded


def demangle(name: str | None) -> str | None:
    """gdb reports minimal-symbol locations by their linkage name; show what a C++ reader expects."""
    if not name or not name.startswith("_Z"):
        return name
    out = _Names.demangled.get(name)
    if out is None:
        try:
            out = gdb.execute("demangle -l c++ -- " + name, to_string=True).strip() or name
        except gdb.error:
            out = name
        _Names.demangled[name] = out
    return out


def _full_name(frame, name: str | None) -> str | None:
    """The full demangled name, with parameters, as gdb gives it for a minimal symbol: a function with
    DWARF is named by gdb without its parameters (``ns::f``); its linkage name, demangled, has them."""
    if not name:
        return name
    try:
        sym = frame.function()
        linkage = sym.linkage_name if sym is not None else None
    except READ_ERRORS:
        return name
    if linkage and linkage.startswith("_Z"):
        full = demangle(linkage)
        if full and full != linkage:
            return full
    return name


def mapped_base(lib: str) -> int | None:
    """Where a shared library is mapped in the target (the mapping of its file offset 0)."""
    for parts in _mappings(lib) or ():
        if int(parts[2], 16) == 0:
            return int(parts[0].split("-")[0], 16)
    return None


def lib_base(lib: str) -> int | None:
    """The library's load base in the current process (its CFI-only copy's, which is the same)."""
    return _lib_base(lib)


def _lib_base(lib: str) -> int | None:
    cfi = STATE.cfi_libs.get(lib)
    if cfi is not None:
        return cfi[1]
    if lib not in CACHES.lib_bases:
        CACHES.lib_bases[lib] = mapped_base(lib)
    return CACHES.lib_bases[lib]


def describe(frame, inline_index: int, exact: bool = True) -> CachedFrame:
    """The record of a native frame (shared by every hit through the same pc: never change it).
    ``exact``: the frame's pc is where it stopped (frame #0 and the frames inlined in it), not a return
    address: gdb places a caller at pc - 1 (the call's line) and frame #0 at pc itself, and a step can
    stop at an address seen before as a return address (after a finish, then next: its line is not the
    call's), so the two are cached apart."""
    pc = frame.pc()
    key = (pc, inline_index, exact)
    cached = CACHES.native.get(key)
    if cached is not None:
        return cached
    try:
        name = _full_name(frame, frame.name())
    except READ_ERRORS:
        name = None
    file = line = None
    try:
        sal = frame.find_sal()
        if sal is not None and sal.symtab is not None and sal.line:
            file = sal.symtab.fullname()
            line = int(sal.line)
    except READ_ERRORS:
        pass
    lib = library(pc)
    info = CachedFrame({
        "kind": "native",
        "function": name,
        "short": short_name(name),
        "library": lib,
        "address": pc,
        "file": file,
        "line": line,
        "layer": classify(name, lib),
        "dispatch_key": dispatch_key(name),
    })
    if (name is None or file is None) and lib and lib != _Names.exe:
        # pttrace names it from its own index (a ``fill`` record): keep where it is in its library.
        base = _lib_base(lib)
        if base is not None and pc >= base:
            info["offset"] = pc - base
    try:
        if frame.type() == gdb.INLINE_FRAME:
            info["inlined"] = True
    except READ_ERRORS:
        pass
    CACHES.native[key] = info
    return info
