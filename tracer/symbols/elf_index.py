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

import _thread  # not threading: ~1 ms more of a `pttrace where`
import bisect
import dataclasses
import os
import re
from array import array
from dataclasses import dataclass

from tracer.errors import SymbolError

from . import cache, names
from .demangle import SPECIAL_PREFIXES, demangle
from .elffile import ElfFile
from .plt import PltStubs
from .close_names import suggest_names
from .symtab import BINDINGS, FUNCTION_TYPES, OBJECT_TYPES, SymbolTable, separate_symtab, table_of

MEMO_LIMIT = 500  # queries remembered per library

# Identifiers that never appear spelled out in mangled names (std:: abbreviations: St, Sa, Sb, Ss...).
ABBREVIATED = {"std", "allocator", "basic_string", "char_traits", "basic_istream", "basic_ostream",
                "basic_iostream", "string", "istream", "ostream", "iostream"}


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


def _unversioned(name: str) -> str:
    """"name@VERSION" / "name@@VERSION": the version is not the name."""
    return name.partition("@")[0] if "@" in name else name


class LibraryIndex:
    """The symbol index of one library. Use ``LibraryIndex.open(path)``: one per file per process.

    Two threads may ask at once (the recorder reads a library's address table ahead on a thread of its own,
    ``tracer.symbols.read_ahead``, while its main thread may name a frame there): ``open`` and ``addresses``
    take locks, so both get the one index and its one table, read once."""

    _open: dict[tuple, "LibraryIndex"] = {}
    _open_lock = _thread.allocate_lock()

    @classmethod
    def open(cls, path: str) -> "LibraryIndex":
        # An index already open for the file as it is now, found by a stat: a `where` asks for each library's
        # index 3-4 times, and opening the ELF again to learn it is the same file read its section table
        # each time (~1 ms a library).
        real = os.path.realpath(path)
        try:
            st = os.stat(real)
        except OSError:
            st = None  # ElfFile says why, in one sentence
        if st is not None:
            index = cls._open.get((real, st.st_size, st.st_mtime_ns))
            if index is not None:
                return index
        with cls._open_lock:
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
        self.tables: dict[str, SymbolTable] = {}
        for name, str_name in ((".symtab", ".strtab"), (".dynsym", ".dynstr")):
            table = table_of(elf, name, str_name)
            if table is not None:
                self.tables[name] = table
        # A stripped library's full symbol table often survives in its separate debug file (distro
        # -dbg/-dbgsym packages, objcopy --only-keep-debug): gdb reads it there, and so do we.
        self.symtab_from: str | None = elf.path if ".symtab" in self.tables else None
        if self.symtab_from is None:
            debug = separate_symtab(elf)
            if debug is not None:
                self._use_debug_symtab(*debug)
        self.plt = PltStubs(elf, self.tables.get(".dynsym"))
        self._memo: dict | None = None
        self._memo_dirty = False
        self._names_loaded = False
        self._addr_index: tuple | None = None
        self._addr_lock = _thread.allocate_lock()

    def _use_debug_symtab(self, table: SymbolTable, debug: ElfFile) -> None:
        self.tables[".symtab"] = table
        self.symtab_from = debug.path
        self._debug_elf = debug  # keeps its mapping alive
        # Another source of names is another index: nothing cached without it may be reused.
        key = self.key
        if key.build_id:
            self.key = dataclasses.replace(key, build_id=f"{key.build_id}+{debug.size:x}")
        else:
            self.key = dataclasses.replace(key, path=f"{key.path}\0{debug.path}", mtime_ns=key.mtime_ns ^ debug.mtime_ns)

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
    def search_table(self) -> SymbolTable | None:
        return self.tables.get(".symtab") or self.tables.get(".dynsym")

    # -- the name index (cached on disk) --------------------------------------------------------
    def ensure_names(self) -> None:
        """Load (or build and store) every table's sorted ``st_name`` array."""
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
            t.sort_names()
            payload[t.name] = (t.sorted_names.tobytes(), t.order.tobytes())
        cache.write(self.key, "names", payload)
        self._names_loaded = True

    def _candidate_indices(self, t: SymbolTable, query: str) -> set[int]:
        """Symbols of table ``t`` whose names may match ``query`` (a superset; checked afterwards)."""
        self.ensure_names()
        mm, so, end = t.mm, t.str_offset, t.str_end
        found: set[int] = set()
        plain, _ = names.split_clones(query.strip())
        if plain.startswith("_Z"):
            return self._exact_names(t, plain.encode())
        tokens = [tok for tok in names.search_tokens(plain) if tok not in ABBREVIATED]
        if not tokens:
            raise SymbolError(f"cannot search for {query!r}: give the function's name (and its class for an operator)")
        last = tokens[0].encode()
        others = [f"{len(tok)}{tok}".encode() for tok in tokens[1:]]
        # One pass over the string table for both kinds of name (each pass over libtorch_cpu.so's 76 MB
        # table is ~65 ms): every string holding "<len><identifier>" (mangled names; the rest of a string is
        # passed over once it matched), and, for a plain identifier, the names that are exactly it (with a
        # clone suffix, ".cold", or in .symtab a symbol version, "puts@GLIBC_2.2.5").
        prefix = str(len(last)).encode()
        exact = len(tokens) == 1
        skip_until = so
        for pos in t.find_all(last):
            after = pos + len(last)
            if exact and after < end and mm[after : after + 1] in (b"\0", b".", b"@"):
                found.update(t.starting_in(pos - so, pos - so))
            start = pos - len(prefix)
            if start < skip_until or mm[start:pos] != prefix:
                continue
            s = mm.rfind(b"\0", so, start) + 1
            e = mm.find(b"\0", start, end)
            if e < 0:
                e = end
            if all(mm.find(o, s, e) >= 0 for o in others):
                found.update(t.starting_in(s - so, start - so))
            skip_until = e
        return found

    @staticmethod
    def _exact_names(t: SymbolTable, name: bytes) -> set[int]:
        """Symbols named exactly ``name``, with a clone suffix (".cold") or, in .symtab, a symbol
        version ("puts@GLIBC_2.2.5")."""
        found: set[int] = set()
        so = t.str_offset
        for pat in (name + b"\0", name + b".", name + b"@"):
            for p in t.find_all(pat):
                found.update(t.starting_in(p - so, p - so))
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
                raw = self._matching(t, i, query, seen)
                if raw is not None:
                    results.append(raw)
        results.sort(key=lambda r: (r.plt, r.kind != "function", r.cold, r.demangled, r.address))
        memo[query] = [r.to_tuple() for r in results]
        self._memo_dirty = True
        self.save_memo()
        return results

    def _matching(self, t: SymbolTable, i: int, query: str, seen: set) -> RawSymbol | None:
        """Symbol ``i`` if it is a function or object that ``query`` names and not one already ``seen``."""
        st_name, info, shndx, value, size = t.entry(i)
        stype = info & 0xF
        if stype not in FUNCTION_TYPES and stype not in OBJECT_TYPES:
            return None
        mangled = _unversioned(t.name_at(st_name))
        demangled = demangle(mangled)
        if demangled.startswith(SPECIAL_PREFIXES) or not names.name_matches(query, demangled, mangled):
            return None
        kind = "function" if stype in FUNCTION_TYPES else "object"
        binding = BINDINGS.get(info >> 4, str(info >> 4))
        if shndx == 0:  # undefined here: a call into another library, through a PLT stub
            stub = self.plt.stub_for(mangled) if kind == "function" else None
            if stub is None or (mangled, stub) in seen:
                return None
            seen.add((mangled, stub))
            return RawSymbol(mangled, demangled, stub, self.plt.stub_size(stub), binding, kind, plt=True)
        if (mangled, value) in seen:
            return None
        seen.add((mangled, value))
        return RawSymbol(mangled, demangled, value, size, binding, kind, cold=names.is_cold(demangled))

    def defines(self, query: str) -> bool:
        return any(r.kind == "function" and not r.plt for r in self.lookup(query))

    def search(self, substrings: list[str], pattern: str | None, kinds: tuple[str, ...],
               special: bool = False) -> list[RawSymbol]:
        """Every symbol defined here whose *mangled* name contains one of ``substrings`` and, if given,
        matches the regular expression ``pattern``; see ``tracer.symbols.search_symbols``."""
        wanted: set[int] = set()
        if "function" in kinds:
            wanted.update(FUNCTION_TYPES)
        if "object" in kinds:
            wanted.update(OBJECT_TYPES)
        rx = re.compile(pattern) if pattern else None
        t = self.search_table
        if t is None:
            return []
        self.ensure_names()
        candidates: set[int] = set()
        for needle in sorted({s.encode() for s in substrings if s}):
            candidates |= t.names_holding(needle)
        out = []
        seen: set[tuple[str, int]] = set()
        for i in sorted(candidates):
            st_name, info, shndx, value, size = t.entry(i)
            if shndx == 0 or (info & 0xF) not in wanted:
                continue
            mangled = _unversioned(t.name_at(st_name))
            if (rx is not None and not rx.search(mangled)) or (mangled, value) in seen:
                continue
            seen.add((mangled, value))
            dem = demangle(mangled)
            if dem.startswith(SPECIAL_PREFIXES) and not special:
                continue
            kind = "function" if (info & 0xF) in FUNCTION_TYPES else "object"
            out.append(RawSymbol(mangled, dem, value, size, BINDINGS.get(info >> 4, str(info >> 4)), kind,
                                 cold=names.is_cold(dem)))
        return out

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

    # -- address -> symbol -------------------------------------------------------------------------
    def addresses(self) -> tuple[array, array, array]:
        """(start addresses, sizes, entry indices) of the defined functions, sorted by address."""
        if self._addr_index is not None:
            return self._addr_index
        with self._addr_lock:  # a second thread waits for the first one's read instead of reading it again
            if self._addr_index is None:
                self._addr_index = self._read_addresses()
            return self._addr_index

    def _read_addresses(self) -> tuple[array, array, array]:
        t = self.search_table
        stored = cache.read(self.key, "addrs")
        if stored is not None:
            values, sizes, idx = (array("Q"), array("Q"), array("I"))
            values.frombytes(stored[0])
            sizes.frombytes(stored[1])
            idx.frombytes(stored[2])
            return values, sizes, idx
        if t is None:
            return array("Q"), array("Q"), array("I")
        infos, shndx, value_col, size_col = t.fields()
        keep = [i for i in range(t.count) if (infos[i] & 0xF) in FUNCTION_TYPES and shndx[i] != 0]
        keep.sort(key=lambda i: (value_col[i], -size_col[i]))
        values = array("Q", [value_col[i] for i in keep])
        sizes = array("Q", [size_col[i] for i in keep])
        idx = array("I", keep)
        cache.write(self.key, "addrs", (values.tobytes(), sizes.tobytes(), idx.tobytes()))
        return values, sizes, idx

    def symbol_at(self, address: int) -> tuple[RawSymbol, int] | None:
        """The function containing ``address`` and the offset into it (``foo@plt`` for a stub)."""
        plt = self.plt.name_at(address)
        if plt is not None:
            name, stub = plt
            return RawSymbol(name, demangle(name), stub, self.plt.stub_size(stub), "global", "function", plt=True), \
                address - stub
        values, sizes, idx = self.addresses()
        t = self.search_table
        if t is None:  # no symbol table: no function is known
            return None
        k = bisect.bisect_right(values, address) - 1
        # The nearest symbols at or below the address, nearest first; a few suffice (aliases, labels).
        for j in range(k, max(k - 64, -1), -1):
            start, size = values[j], sizes[j]
            if start <= address < start + max(size, 1):
                st_name, info, _shndx, value, size = t.entry(idx[j])
                mangled = t.name_at(st_name)
                dem = demangle(mangled)
                return RawSymbol(mangled, dem, value, size, BINDINGS.get(info >> 4, "?"), "function",
                                 cold=names.is_cold(dem)), address - value
        return None

    # -- suggestions -------------------------------------------------------------------------------
    def suggest(self, query: str, limit: int = 5) -> list[tuple[float, str]]:
        """(score, qualified name) of functions whose names are close to ``query`` (see ``close_names.py``)."""
        memo = self._load_memo()
        key = f"\0suggest\0{limit}\0{query}"
        if key in memo:
            return [tuple(x) for x in memo[key]]
        t = self.search_table
        found = []
        if t is not None:
            self.ensure_names()
            found = suggest_names(t, query, limit)
        memo[key] = found
        self._memo_dirty = True
        self.save_memo()
        return found
