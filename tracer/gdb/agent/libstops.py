"""Which library loads stop the target for pttrace, decided inside gdb as each library loads.

pttrace decides at a library's load what gdb gets of it (symbols, an unwind-table copy, nothing yet) and
looks for the ``--break`` names it set by address in it. With ``stop-on-solib-events`` that was one MI stop
and continue per dynamic-linker event: 78 of them for hello-world.py's ``import torch``, each ~8 ms of
pttrace's and gdb's CPU while the target waited (bench/RESULTS.md, "Speed round 3"). Now pttrace sets
``catch load`` with the condition ``$_pttrace_library_stop()`` (commands.py): gdb evaluates it at each
load that added libraries, after updating its own list, and it is true only when a new library is one
pttrace must act on before the library's code runs (``Rules``, from pttrace's ``pttrace-library-stops``).
The others are decided at the next stop pttrace gets: gdb's ``=library-loaded`` told it of each.

Standard library only (and tracer/elfparts.py, as gdb-free): the recorder applies ``may_name`` too
(later_libraries.py), and unit tests run it without gdb.
"""
from __future__ import annotations

import json
import mmap
import os
import struct
from dataclasses import dataclass, field

from tracer import elfparts


SHF_COMPRESSED = 0x800


@dataclass
class Rules:
    """What pttrace must act on at once (``pttrace-library-stops`` sends them as JSON).

    ``always``: every library (gdb reads each one's symbols as it loads). ``paths``: real paths, and
    ``bases``: file names, of libraries pttrace gives gdb something of; ``prefixes``: file-name prefixes
    of those read at once (the interpreter, libc, the dynamic linker). ``big``: a library of this size or
    more may be one gdb gets only the unwind tables of. ``names``: groups of byte strings; a library that
    holds every string of one group may define a ``--break`` name (pttrace's index then searches it);
    ``any_name``: a name no such test can rule out (FILE:LINE, an --op of one's own TORCH_LIBRARY);
    ``debug_dirs``: where separate debug files are looked for besides /usr/lib/debug."""

    always: bool = False
    paths: frozenset[str] = frozenset()
    bases: frozenset[str] = frozenset()
    prefixes: tuple[str, ...] = ()
    big: int | None = None
    names: tuple[tuple[bytes, ...], ...] = ()
    any_name: bool = False
    debug_dirs: tuple[str, ...] = ()
    scans: NameScans | None = None  # ``scans``: the file of what earlier runs read of each library

    @classmethod
    def from_json(cls, data: dict) -> "Rules":
        return cls(always=bool(data.get("always")), paths=frozenset(data.get("paths") or ()),
                   bases=frozenset(data.get("bases") or ()), prefixes=tuple(data.get("prefixes") or ()),
                   big=data.get("big"), any_name=bool(data.get("any_name")), debug_dirs=tuple(data.get("debug_dirs") or ()),
                   scans=NameScans(data.get("scans")) if data.get("names") else None,
                   names=tuple(tuple(n.encode("utf-8", "surrogateescape") for n in group)
                               for group in data.get("names") or ()))

    def must_stop(self, path: str) -> bool:
        """Whether pttrace must see this newly loaded library before its code runs. Anything that cannot
        be read says yes: pttrace decides then, as it did at every load."""
        if self.always:
            return True
        base = os.path.basename(path)
        if base in self.bases or base.startswith(self.prefixes):
            return True
        try:
            real = os.path.realpath(path)
            if real in self.paths:
                return True
            size = os.path.getsize(real)
        except OSError:
            return True
        if self.big is not None and size >= self.big:
            return True
        if self.any_name:
            return True
        return bool(self.names) and may_name(real, self.names, self.debug_dirs, self.scans)


def may_name(path: str, groups, debug_dirs=(), scans: "NameScans | None" = None) -> bool:
    """Whether the library may define a function one of ``groups`` names: it holds every byte string of
    a group (pttrace's index finds a name only in symbols whose names hold its identifiers verbatim,
    tracer/symbols/elf_index.py). A stripped library has its names in its separate debug file's symbol table
    (by build-id under ``debug_dirs`` or /usr/lib/debug, or by its ``.gnu_debuglink``, where
    tracer/symbols/debugfile.py looks: both through tracer/elfparts.py), which the index reads: the same test
    on that file's bytes (its string table is never among the compressed DWARF). Taken as yes before, it stopped
    a sigmoid run at libpthread's and libdl's load for nothing (libc6-dbg's files). Unreadable, or not ELF: yes.
    ``scans``: what earlier runs read of the same files (NameScans)."""
    facts = scans.facts(path, groups) if scans is not None else _file_facts(path, groups)
    if facts is None:
        return True
    symtab, ident, link, found = facts
    if found or symtab:
        return found
    return any(_holds(debug, groups, scans) for debug in _debug_files(path, ident, link, debug_dirs))


def _holds(path: str, groups, scans: "NameScans | None") -> bool:
    facts = scans.facts(path, groups) if scans is not None else _file_facts(path, groups)
    return facts is None or facts[3]


def _file_facts(path: str, groups) -> list | None:
    """What ``may_name`` reads of the file itself: [has a symbol table, its build-id, its .gnu_debuglink
    name, holds every string of some group]; None when it cannot be read as ELF."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return [True, None, None, False]
            with mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ) as mm:
                sections = elfparts.read_sections(mm)
                if sections is None:
                    return None
                symtab = any(s.type == elfparts.SHT_SYMTAB and s.size for s in sections.items)
                ident = link = None
                if not symtab:
                    ident = elfparts.build_id(mm, sections)
                    found_link = elfparts.debuglink(mm, sections)
                    link = found_link[0] if found_link is not None else None
                # a compressed section other than DWARF (a string table?) could hide a name: yes
                found = any(s.flags & SHF_COMPRESSED and not s.name.startswith(".debug_") for s in sections.items) \
                    or any(all(mm.find(needle) >= 0 for needle in group) for group in groups)
                return [symtab, ident, link, found]
    except (OSError, ValueError, struct.error):
        return None


def _debug_files(path: str, ident: str | None, link: str | None, debug_dirs) -> list[str]:
    """The separate debug files of this library there are where pttrace's index looks for one (each: the index
    takes one of them)."""
    dirs = [*debug_dirs, elfparts.USR_LIB_DEBUG]
    out = []
    if ident and len(ident) > 2:
        out += [f for f in (elfparts.build_id_file(d, ident) for d in dirs) if os.path.exists(f)]
    if link is not None:
        libdir = os.path.dirname(os.path.realpath(path))
        out += [c for c in elfparts.debuglink_candidates(libdir, link, dirs) if os.path.exists(c)]
    return out


class NameScans:
    """What ``may_name`` read of each library file, kept across runs in a small JSON file (``path``; None: in
    memory only), by real path, size, modification time and the strings looked for. A re-run's ~55 libraries
    were each mapped and searched again, by gdb at their load and by pttrace after (0.09 s of gdb's wall time
    a run under cProfile at load 9, as much again in pttrace); now one ``stat`` each. Whether a separate
    debug file is there is looked at each time: it may come or go without the library changing."""

    MAX_ENTRIES = 4096  # a file that grew past this starts again

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._known: dict[str, list] = {}
        self._changed = False
        if path:
            try:
                with open(path, "r", encoding="utf-8") as fh:
                    data = json.load(fh)
                if isinstance(data, dict) and len(data) < self.MAX_ENTRIES:
                    self._known = data
            except (OSError, ValueError):
                pass

    def facts(self, path: str, groups) -> list | None:
        try:
            real = os.path.realpath(path)
            st = os.stat(real)
        except OSError:
            return None
        key = "\0".join([real, str(st.st_size), str(st.st_mtime_ns),
                         repr([[bytes(n) for n in g] for g in groups])])
        known = self._known.get(key)
        if isinstance(known, list) and len(known) == 4:
            return known
        facts = _file_facts(real, groups)
        if facts is not None:
            self._known[key] = facts
            self._changed = True
        return facts

    def save(self) -> None:
        """Write what was learnt (whole or not at all); a cache that cannot be written is only slower."""
        if not self._changed or not self.path:
            return
        self._changed = False
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(self._known, fh)
            os.replace(tmp, self.path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


# --- the libraries of a process, from the dynamic linker's list -----------------------------------
# struct link_map: l_addr, l_name, l_ld, l_next, l_prev (pointers); struct r_debug: int r_version, then
# the pointer r_map. 64-bit only: the agent's memory readers are (tracer.pyruntime).
_LINK = struct.Struct("<QQQQ")
# The auxiliary vector's entries for the program headers; a program header (Elf64_Phdr) and its types;
# the dynamic section's tags.
_AT_PHDR, _AT_PHENT, _AT_PHNUM = 3, 4, 5
_PHDR = struct.Struct("<IIQQQQQQ")
_PT_DYNAMIC, _PT_PHDR = 2, 6
_DT_NULL, _DT_DEBUG = 0, 21


def r_debug_address(pid: int, read) -> int | None:
    """Where the dynamic linker's ``struct r_debug`` is: the ``DT_DEBUG`` entry of the executable's dynamic
    section, which ld.so sets before its first library event (gdb's own svr4 support reads it there), found
    from the process's program headers (its auxiliary vector). Asking gdb for ``&_r_debug`` instead cost
    0.07-0.14 s of its CPU a run (load 9): gdb looks the name up in every library's DWARF index and reads
    ld.so's debug file. None when it cannot be told this way (a static executable, no ``PT_PHDR``, DT_DEBUG
    not set yet): the caller asks gdb then."""
    try:
        with open(f"/proc/{int(pid)}/auxv", "rb") as fh:
            raw = fh.read()
    except (OSError, ValueError):
        return None
    aux: dict[int, int] = {}
    for tag, value in struct.iter_unpack("<QQ", raw[:len(raw) // 16 * 16]):
        if tag == 0:
            break
        aux[tag] = value
    phdr, phent, phnum = aux.get(_AT_PHDR), aux.get(_AT_PHENT), aux.get(_AT_PHNUM)
    if not phdr or phent != _PHDR.size or not phnum or phnum > 512:
        return None
    table = read(phdr, phent * phnum)
    bias = dynamic = None
    for i in range(phnum):
        p_type, _flags, _offset, vaddr, _paddr, _filesz, memsz, _align = _PHDR.unpack_from(table, i * phent)
        if p_type == _PT_PHDR:
            bias = phdr - vaddr
        elif p_type == _PT_DYNAMIC:
            dynamic = (vaddr, memsz)
    if bias is None or dynamic is None:
        return None
    data = read((bias + dynamic[0]) & 0xFFFFFFFFFFFFFFFF, min(dynamic[1], 1 << 16) // 16 * 16)
    for tag, value in struct.iter_unpack("<qQ", data):
        if tag == _DT_NULL:
            break
        if tag == _DT_DEBUG:
            return value or None
    return None


@dataclass
class LoadedLibraries:
    """The new entries of a process's link_map list since the last look, read with ``read(address, size)``
    (bytes; raises on an unreadable address). Entries are known by their address: a library unloaded and
    another loaded there is new again."""

    known: set[int] = field(default_factory=set)

    def new(self, r_debug: int, read) -> list[str]:
        node, = struct.unpack("<Q", read(r_debug + 8, 8))
        seen: set[int] = set()
        names = []
        while node and node not in seen and len(seen) < 100000:
            seen.add(node)
            _addr, name_at, _ld, nxt = _LINK.unpack(read(node, _LINK.size))
            if node not in self.known and name_at:
                name = _read_c_string(read, name_at)
                if name:
                    names.append(name)
            node = nxt
        self.known = seen
        return names


def _read_c_string(read, address: int, limit: int = 4096) -> str:
    out = b""
    while len(out) < limit:
        chunk = read(address + len(out), 256)
        end = chunk.find(b"\0")
        if end >= 0:
            return (out + chunk[:end]).decode("utf-8", "surrogateescape")
        out += chunk
    return out.decode("utf-8", "surrogateescape")
