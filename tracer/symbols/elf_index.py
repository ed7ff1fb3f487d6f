"""Symbol tables at libtorch scale: find functions by name, name an address, suggest close names.

pyelftools' ``iter_symbols()`` needs 25 s for libtorch_cpu.so's 530k symbols, so it is used only to
locate sections. A query never walks the symbols one by one:

1. the identifiers of the query are spelled inside mangled names as ``<length><identifier>``
   (``initModule`` -> ``10initModule``), so ``find`` over ``.strtab`` yields the few names that can
   match (C names are found as ``initModule\\0`` / ``initModule.``);
2. a sorted array of every symbol's ``st_name`` (built once, kept on disk keyed by build-id) turns
   those string offsets into symbol indices; each candidate entry is unpacked with ``struct``;
3. only those candidates are demangled (cxxfilt) and compared the way gdb's ``break NAME`` does.

Results of a query are remembered per library, so repeating it costs one small file read.
``@plt`` stubs (calls into another library) and ``[clone .cold]`` parts are labelled.
"""
from __future__ import annotations

import bisect
import dataclasses
import difflib
import struct
from array import array
from dataclasses import dataclass, field
from functools import lru_cache

from tracer.errors import SymbolError

from . import cache, names
from .elffile import ElfFile

STT_OBJECT, STT_FUNC, STT_TLS, STT_GNU_IFUNC = 1, 2, 6, 10
_FUNCTION_TYPES = (STT_FUNC, STT_GNU_IFUNC)
_OBJECT_TYPES = (STT_OBJECT, STT_TLS)
_BINDINGS = {0: "local", 1: "global", 2: "weak", 10: "unique"}
EM_X86_64 = 62
R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT = 6, 7
MEMO_LIMIT = 500  # queries remembered per library

# Identifiers that never appear spelled out in mangled names (std:: abbreviations: St, Sa, Sb, Ss...).
_ABBREVIATED = {"std", "allocator", "basic_string", "char_traits", "basic_istream", "basic_ostream",
                "basic_iostream", "string", "istream", "ostream", "iostream"}
# Demangler outputs that name something derived from a function, not the function itself.
_SPECIAL_PREFIXES = ("guard variable for ", "vtable for ", "VTT for ", "typeinfo for ", "typeinfo name for ",
                     "construction vtable for ", "non-virtual thunk to ", "virtual thunk to ",
                     "covariant return thunk to ", "TLS init function for ", "TLS wrapper function for ",
                     "reference temporary ", "transaction clone for ", "hidden alias for ")


@dataclass
class RawSymbol:
    """One symbol as the index found it (the public ``SymbolMatch`` adds file:line to this)."""

    mangled: str
    demangled: str
    address: int
    size: int
    binding: str
    kind: str  # "function" | "object"
    plt: bool = False
    cold: bool = False

    def to_tuple(self) -> tuple:
        return (self.mangled, self.demangled, self.address, self.size, self.binding, self.kind, self.plt,
                self.cold)

    @classmethod
    def from_tuple(cls, t) -> "RawSymbol":
        return cls(*t)


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of a symbol name, or the name itself if it is not a mangled C++ name."""
    if not name.startswith("_Z"):
        return name
    import cxxfilt

    try:
        return cxxfilt.demangle(name, external_only=False)
    except cxxfilt.InvalidName:
        return name


@dataclass
class _Table:
    """A symbol table section (``.symtab`` or ``.dynsym``) and its string table, as offsets in ``mm``:
    the library's bytes, or those of its separate debug file for a stripped library's ``.symtab``."""

    mm: object
    name: str
    offset: int
    count: int
    entsize: int
    str_offset: int
    str_size: int
    sorted_names: array = field(default_factory=lambda: array("I"))
    order: array = field(default_factory=lambda: array("I"))


def _table_of(elf: ElfFile, name: str, str_name: str) -> _Table | None:
    sec = elf.sections.get(name)
    if sec is None or sec.size == 0 or sec.type == 8:  # absent, empty or NOBITS
        return None
    strsec = elf.section_list[sec.link] if 0 < sec.link < len(elf.section_list) else None
    strsec = strsec or elf.sections.get(str_name)
    if strsec is None or strsec.type == 8:
        return None
    entsize = sec.entsize or (24 if elf.elfclass == 64 else 16)
    return _Table(elf.mm, name, sec.offset, sec.size // entsize, entsize, strsec.offset, strsec.size)


def _separate_symtab(elf: ElfFile) -> tuple[_Table, ElfFile] | None:
    """The ``.symtab`` of the library's separate debug file (found by build-id or a CRC-checked
    ``.gnu_debuglink``, as for its DWARF), with that file; None when there is none."""
    from .dwarf import find_debug_file  # the DWARF side is heavy; stripped libraries are rare

    try:
        debug = find_debug_file(elf)
    except SymbolError:
        return None
    if debug is None or debug is elf or debug.elfclass != elf.elfclass:
        return None
    table = _table_of(debug, ".symtab", ".strtab")
    return (table, debug) if table is not None else None


class LibraryIndex:
    """The symbol index of one library. Use ``LibraryIndex.open(path)``: one per file per process."""

    _open: dict[tuple, "LibraryIndex"] = {}

    @classmethod
    def open(cls, path: str) -> "LibraryIndex":
        elf = ElfFile(path)
        ident = (elf.path, elf.size, elf.mtime_ns)
        index = cls._open.get(ident)
        if index is None:
            index = cls(elf)
            cls._open[ident] = index
        else:
            elf.close()
        return index

    def __init__(self, elf: ElfFile):
        self.elf = elf
        self.path = elf.path
        self.key = elf.key()
        self._fmt = "<IBBHQQ" if elf.elfclass == 64 else "<IIIBBH"
        self.tables: dict[str, _Table] = {}
        for name, str_name in ((".symtab", ".strtab"), (".dynsym", ".dynstr")):
            table = _table_of(elf, name, str_name)
            if table is not None:
                self.tables[name] = table
        # A stripped library's full symbol table often survives in its separate debug file (distro
        # -dbg/-dbgsym packages, objcopy --only-keep-debug): gdb reads it there, and so do we.
        self.symtab_from: str | None = elf.path if ".symtab" in self.tables else None
        if self.symtab_from is None:
            debug = _separate_symtab(elf)
            if debug is not None:
                self.tables[".symtab"] = debug[0]
                self.symtab_from = debug[1].path
                self._debug_elf = debug[1]  # keeps its mapping alive
                # Another source of names is another index: nothing cached without it may be reused.
                key = self.key
                if key.build_id:
                    self.key = dataclasses.replace(key, build_id=f"{key.build_id}+{debug[1].size:x}")
                else:
                    self.key = dataclasses.replace(key, path=f"{key.path}\0{debug[1].path}",
                                                   mtime_ns=key.mtime_ns ^ debug[1].mtime_ns)
        self._memo: dict | None = None
        self._memo_dirty = False
        self._names_loaded = False
        self._addr_index: tuple | None = None
        self._got_to_stub: dict[int, int] | None = None
        self._stub_to_got: dict[int, int] | None = None
        self._got_to_dynidx: dict[int, int] | None = None

    # -- facts about the library --------------------------------------------------------------
    @property
    def stripped(self) -> bool:
        """No ``.symtab`` in the library, nor in a debug file: only exported (dynamic) symbols can be found."""
        return ".symtab" not in self.tables

    @property
    def symtab_elsewhere(self) -> bool:
        """The library is stripped but its ``.symtab`` was found in its separate debug file."""
        return self.symtab_from is not None and self.symtab_from != self.path

    @property
    def search_table(self) -> _Table | None:
        return self.tables.get(".symtab") or self.tables.get(".dynsym")

    # -- the name index (cached on disk) --------------------------------------------------------
    def _ensure_names(self) -> None:
        if self._names_loaded:
            return
        stored = cache.read(self.key, "names")
        if stored is not None and set(stored) == set(self.tables):
            for name, (sorted_b, order_b) in stored.items():
                t = self.tables[name]
                t.sorted_names = array("I")
                t.sorted_names.frombytes(sorted_b)
                t.order = array("I")
                t.order.frombytes(order_b)
                if len(t.order) != t.count:
                    break
            else:
                self._names_loaded = True
                return
        payload = {}
        for t in self.tables.values():
            col = self._column(t, 0, "I")
            order = sorted(range(len(col)), key=col.__getitem__)
            t.sorted_names = array("I", [col[i] for i in order])
            t.order = array("I", order)
            payload[t.name] = (t.sorted_names.tobytes(), t.order.tobytes())
        cache.write(self.key, "names", payload)
        self._names_loaded = True

    def _column(self, t: _Table, byte_offset: int, code: str) -> list[int]:
        """One field of every entry of a symbol table, read as a strided memoryview."""
        size = struct.calcsize(code)
        raw = t.mm[t.offset : t.offset + t.count * t.entsize]
        if t.entsize % size or byte_offset % size:
            return [struct.unpack_from("<" + code, raw, i * t.entsize + byte_offset)[0] for i in range(t.count)]
        view = memoryview(raw).cast(code)
        step = t.entsize // size
        return view[byte_offset // size :: step].tolist()

    def _entry(self, t: _Table, i: int) -> tuple[int, int, int, int, int]:
        """(st_name, st_info, st_shndx, st_value, st_size)."""
        off = t.offset + i * t.entsize
        if self.elf.elfclass == 64:
            name, info, _, shndx, value, size = struct.unpack_from(self._fmt, t.mm, off)
        else:
            name, value, size, info, _, shndx = struct.unpack_from(self._fmt, t.mm, off)
        return name, info, shndx, value, size

    def _name_at(self, t: _Table, st_name: int) -> str:
        start = t.str_offset + st_name
        end = t.mm.find(b"\0", start, t.str_offset + t.str_size)
        if end < 0:
            end = t.str_offset + t.str_size
        return t.mm[start:end].decode("utf-8", "replace")

    def _symbols_starting_in(self, t: _Table, lo: int, hi: int) -> list[int]:
        """Indices of the symbols whose name starts at a string-table offset in [lo, hi]."""
        a = bisect.bisect_left(t.sorted_names, lo)
        b = bisect.bisect_right(t.sorted_names, hi)
        return [t.order[k] for k in range(a, b)]

    def _find_all(self, pattern: bytes, start: int, end: int, mm=None):
        mm = self.elf.mm if mm is None else mm
        pos = mm.find(pattern, start, end)
        while pos >= 0:
            yield pos
            pos = mm.find(pattern, pos + 1, end)

    def _candidate_indices(self, t: _Table, query: str) -> set[int]:
        """Symbols of table ``t`` whose names may match ``query`` (a superset; checked afterwards)."""
        self._ensure_names()
        mm = t.mm
        so, end = t.str_offset, t.str_offset + t.str_size
        found: set[int] = set()
        plain, _ = names.split_clones(query.strip())
        if plain.startswith("_Z"):
            for pat in (plain.encode() + b"\0", plain.encode() + b".", plain.encode() + b"@"):
                for p in self._find_all(pat, so, end, mm):
                    found.update(self._symbols_starting_in(t, p - so, p - so))
            return found
        tokens = [tok for tok in names.search_tokens(plain) if tok not in _ABBREVIATED]
        if not tokens:
            raise SymbolError(f"cannot search for {query!r}: give the function's name (and its class for an operator)")
        last = tokens[0].encode()
        others = [f"{len(tok)}{tok}".encode() for tok in tokens[1:]]
        # Mangled names: every string holding "<len><identifier>".
        pattern = str(len(last)).encode() + last
        pos = mm.find(pattern, so, end)
        while pos >= 0:
            s = mm.rfind(b"\0", so, pos) + 1
            e = mm.find(b"\0", pos, end)
            if e < 0:
                e = end
            if all(mm.find(o, s, e) >= 0 for o in others):
                found.update(self._symbols_starting_in(t, s - so, pos - so))
            pos = mm.find(pattern, e, end)
        # C names, with a clone suffix (".cold") or, in .symtab, a symbol version ("puts@GLIBC_2.2.5").
        if len(tokens) == 1:
            for pat in (last + b"\0", last + b".", last + b"@"):
                for p in self._find_all(pat, so, end, mm):
                    found.update(self._symbols_starting_in(t, p - so, p - so))
        return found

    # -- lookups ---------------------------------------------------------------------------------
    def lookup(self, query: str) -> list[RawSymbol]:
        """Every function or object this library defines (or reaches through a PLT stub) under ``query``."""
        memo = self._load_memo()
        hit = memo.get(query)
        if hit is not None:
            return [RawSymbol.from_tuple(t) for t in hit]
        t = self.search_table
        results: list[RawSymbol] = []
        if t is not None:
            seen: set[tuple[str, int]] = set()
            for i in sorted(self._candidate_indices(t, query)):
                st_name, info, shndx, value, size = self._entry(t, i)
                stype = info & 0xF
                if stype not in _FUNCTION_TYPES and stype not in _OBJECT_TYPES:
                    continue
                mangled = self._name_at(t, st_name)
                if "@" in mangled:  # "name@VERSION" / "name@@VERSION": the version is not the name
                    mangled = mangled.partition("@")[0]
                demangled = demangle(mangled)
                if demangled.startswith(_SPECIAL_PREFIXES):
                    continue
                if not names.name_matches(query, demangled, mangled):
                    continue
                kind = "function" if stype in _FUNCTION_TYPES else "object"
                binding = _BINDINGS.get(info >> 4, str(info >> 4))
                cold = names.parse(demangled).cold
                if shndx == 0:  # undefined here: a call into another library, through a PLT stub
                    if kind != "function":
                        continue
                    stub = self._plt_stub_for(mangled)
                    if stub is None or (mangled, stub) in seen:
                        continue
                    seen.add((mangled, stub))
                    results.append(RawSymbol(mangled, demangled, stub, self._stub_size(stub), binding, kind,
                                             plt=True))
                    continue
                if (mangled, value) in seen:
                    continue
                seen.add((mangled, value))
                results.append(RawSymbol(mangled, demangled, value, size, binding, kind, cold=cold))
        results.sort(key=lambda r: (r.plt, r.kind != "function", r.cold, r.demangled, r.address))
        memo[query] = [r.to_tuple() for r in results]
        self._memo_dirty = True
        self.save_memo()
        return results

    def defines(self, query: str) -> bool:
        return any(r.kind == "function" and not r.plt for r in self.lookup(query))

    def _load_memo(self) -> dict:
        if self._memo is None:
            self._memo = cache.read(self.key, "memo") or {}
        return self._memo

    def save_memo(self) -> None:
        if not self._memo_dirty or self._memo is None:
            return
        if len(self._memo) > MEMO_LIMIT:
            for k in list(self._memo)[: len(self._memo) - MEMO_LIMIT]:
                del self._memo[k]
        cache.write(self.key, "memo", self._memo)
        self._memo_dirty = False

    # -- PLT stubs --------------------------------------------------------------------------------
    def _plt_stub_for(self, mangled: str) -> int | None:
        """Address of the stub through which this library calls the imported function ``mangled``."""
        dyn = self.tables.get(".dynsym")
        if dyn is None or self.elf.machine != EM_X86_64:
            return None
        self._ensure_names()
        so = dyn.str_offset
        wanted = mangled.encode() + b"\0"
        for p in self._find_all(wanted, so, so + dyn.str_size):
            for idx in self._symbols_starting_in(dyn, p - so, p - so):
                if self._entry(dyn, idx)[2] != 0:
                    continue
                for relname, rtype in ((".rela.plt", R_X86_64_JUMP_SLOT), (".rela.dyn", R_X86_64_GLOB_DAT)):
                    got = self._got_slot(relname, idx, rtype)
                    if got is not None:
                        stub = self._stubs().get(got)
                        if stub is not None:
                            return stub
        return None

    def _got_slot(self, relname: str, dynidx: int, rtype: int) -> int | None:
        sec = self.elf.sections.get(relname)
        if sec is None or sec.entsize not in (0, 24):
            return None
        pattern = struct.pack("<Q", (dynidx << 32) | rtype)
        for pos in self._find_all(pattern, sec.offset, sec.offset + sec.size):
            if (pos - sec.offset) % 24 == 8:
                return struct.unpack_from("<Q", self.elf.mm, pos - 8)[0]
        return None

    def _stubs(self) -> dict[int, int]:
        """GOT slot -> PLT stub address, read from the ``jmp *slot(%rip)`` of each stub."""
        if self._got_to_stub is not None:
            return self._got_to_stub
        table: dict[int, int] = {}
        for name in (".plt", ".plt.sec", ".plt.got"):
            sec = self.elf.sections.get(name)
            if sec is None or sec.size == 0:
                continue
            step = sec.entsize if sec.entsize in (8, 16) else 16
            data = bytes(self.elf.mm[sec.offset : sec.offset + sec.size])
            for off in range(0, len(data) - step + 1, step):
                j = data.find(b"\xff\x25", off, off + step)
                if j < 0 or j + 6 > len(data):
                    continue
                disp = struct.unpack_from("<i", data, j + 2)[0]
                target = sec.addr + j + 6 + disp
                table.setdefault(target, sec.addr + off)
        self._got_to_stub = table
        return table

    def _stub_size(self, stub: int) -> int:
        for name in (".plt.sec", ".plt.got", ".plt"):
            sec = self.elf.sections.get(name)
            if sec is not None and sec.addr <= stub < sec.addr + sec.size:
                return sec.entsize if sec.entsize in (8, 16) else 16
        return 16

    def _plt_name_at(self, address: int) -> tuple[str, int] | None:
        """(imported name, stub address) if ``address`` is inside a PLT stub."""
        if self.elf.machine != EM_X86_64 or ".dynsym" not in self.tables:
            return None
        inside = None
        for name in (".plt", ".plt.sec", ".plt.got"):
            sec = self.elf.sections.get(name)
            if sec is not None and sec.addr <= address < sec.addr + sec.size:
                inside = sec
        if inside is None:
            return None
        step = inside.entsize if inside.entsize in (8, 16) else 16
        stub = inside.addr + (address - inside.addr) // step * step
        if self._stub_to_got is None:
            self._stub_to_got = {s: g for g, s in self._stubs().items()}
        got = self._stub_to_got.get(stub)
        if got is None:
            return None
        if self._got_to_dynidx is None:
            self._got_to_dynidx = {}
            for relname in (".rela.plt", ".rela.dyn"):
                sec = self.elf.sections.get(relname)
                if sec is None or sec.entsize != 24:
                    continue
                for r_offset, r_info, _ in struct.iter_unpack("<QQq", self.elf.mm[sec.offset : sec.offset + sec.size]):
                    if r_info & 0xFFFFFFFF in (R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT):
                        self._got_to_dynidx.setdefault(r_offset, r_info >> 32)
        idx = self._got_to_dynidx.get(got)
        if idx is None:
            return None
        dyn = self.tables[".dynsym"]
        return self._name_at(dyn, self._entry(dyn, idx)[0]), stub

    # -- address -> symbol -------------------------------------------------------------------------
    def _ensure_addresses(self) -> tuple:
        if self._addr_index is not None:
            return self._addr_index
        t = self.search_table
        stored = cache.read(self.key, "addrs")
        if stored is not None:
            values, sizes, idx = (array("Q"), array("Q"), array("I"))
            values.frombytes(stored[0])
            sizes.frombytes(stored[1])
            idx.frombytes(stored[2])
            self._addr_index = (values, sizes, idx)
            return self._addr_index
        if t is None:
            self._addr_index = (array("Q"), array("Q"), array("I"))
            return self._addr_index
        infos = self._column(t, 4 if self.elf.elfclass == 64 else 12, "B")
        shndx = self._column(t, 6 if self.elf.elfclass == 64 else 14, "H")
        value_col = self._column(t, 8, "Q") if self.elf.elfclass == 64 else self._column(t, 4, "I")
        size_col = self._column(t, 16, "Q") if self.elf.elfclass == 64 else self._column(t, 8, "I")
        keep = [i for i in range(t.count) if (infos[i] & 0xF) in _FUNCTION_TYPES and shndx[i] != 0]
        keep.sort(key=lambda i: (value_col[i], -size_col[i]))
        values = array("Q", [value_col[i] for i in keep])
        sizes = array("Q", [size_col[i] for i in keep])
        idx = array("I", keep)
        cache.write(self.key, "addrs", (values.tobytes(), sizes.tobytes(), idx.tobytes()))
        self._addr_index = (values, sizes, idx)
        return self._addr_index

    def symbol_at(self, address: int) -> tuple[RawSymbol, int] | None:
        """The function containing ``address`` and the offset into it (``foo@plt`` for a stub)."""
        plt = self._plt_name_at(address)
        if plt is not None:
            name, stub = plt
            return RawSymbol(name, demangle(name), stub, self._stub_size(stub), "global", "function", plt=True), \
                address - stub
        values, sizes, idx = self._ensure_addresses()
        t = self.search_table
        k = bisect.bisect_right(values, address) - 1
        # The nearest symbols at or below the address, nearest first; a few suffice (aliases, labels).
        for j in range(k, max(k - 64, -1), -1):
            start, size = values[j], sizes[j]
            if start <= address < start + max(size, 1):
                st_name, info, _shndx, value, size = self._entry(t, idx[j])
                mangled = self._name_at(t, st_name)
                dem = demangle(mangled)
                return RawSymbol(mangled, dem, value, size, _BINDINGS.get(info >> 4, "?"), "function",
                                 cold=names.parse(dem).cold), address - value
        return None

    # -- suggestions -------------------------------------------------------------------------------
    def suggest(self, query: str, limit: int = 5) -> list[tuple[float, str]]:
        """(score, qualified name) of functions whose names are close to ``query``.

        The candidates are the names holding the longest prefix, or the longest suffix, of the
        query's last identifier that the string table contains: a few binary-searched ``find``s
        over ``.strtab``, then a similarity ratio on those few names only.
        """
        memo = self._load_memo()
        key = f"\0suggest\0{limit}\0{query}"
        if key in memo:
            return [tuple(x) for x in memo[key]]
        found = self._suggest(query, limit)
        memo[key] = found
        self._memo_dirty = True
        self.save_memo()
        return found

    def _suggest(self, query: str, limit: int) -> list[tuple[float, str]]:
        t = self.search_table
        if t is None:
            return []
        q = names.parse(names.split_clones(query.strip())[0].lstrip(":"))
        last = names.base_component(q.components[-1]) if q.components else query
        ident = last.encode()
        if len(ident) < 3:
            return []
        self._ensure_names()
        so, end = t.str_offset, t.str_offset + t.str_size
        mm = t.mm
        minimum = max(3, len(ident) // 3)

        def present(s: bytes) -> bool:
            return mm.find(s, so, end) >= 0

        def longest(make) -> bytes | None:
            lo, hi = minimum - 1, len(ident)  # invariant: make(lo) present (or lo below minimum)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if present(make(mid)):
                    lo = mid
                else:
                    hi = mid - 1
            return make(lo) if lo >= minimum else None

        probes = {longest(lambda n: ident[:n]), longest(lambda n: ident[len(ident) - n :])}
        starts: dict[int, None] = {}
        for probe in probes:
            if not probe:
                continue
            for count, p in enumerate(self._find_all(probe, so, end, mm)):
                if count >= 4000:
                    break
                starts[mm.rfind(b"\0", so, p) + 1] = None
        scored: dict[str, float] = {}
        q_last = last.lower()
        q_full = "::".join(q.components).lower()
        for s in starts:
            for i in self._symbols_starting_in(t, s - so, s - so):
                _st_name, info, shndx, _v, _sz = self._entry(t, i)
                if (info & 0xF) not in _FUNCTION_TYPES or shndx == 0:
                    continue
                dem = demangle(self._name_at(t, s - so))
                if dem.startswith(_SPECIAL_PREFIXES):
                    continue
                parsed = names.parse(dem)
                if not parsed.components:
                    continue
                bases = [names.base_component(c).lower() for c in parsed.components]
                score = difflib.SequenceMatcher(None, q_last, bases[-1]).ratio()
                # A class or namespace name ("make_boxed_from_unboxed_functor") points at its members.
                for outer in bases[:-1]:
                    if abs(len(outer) - len(q_last)) <= len(q_last) // 2:
                        score = max(score, 0.9 * difflib.SequenceMatcher(None, q_last, outer).ratio())
                if len(q.components) > 1:
                    full = "::".join(names.base_component(c) for c in parsed.components).lower()
                    score = 0.5 * score + 0.5 * difflib.SequenceMatcher(None, q_full, full).ratio()
                short = parsed.qualified
                if score > scored.get(short, -1.0):
                    scored[short] = score
        best = sorted(scored.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0]))
        return [(score, name) for name, score in best[:limit] if score >= 0.5]
