"""Symbols and sources: what the recorder and ``pttrace where`` ask of libraries, fast at libtorch scale.

Public API (addresses are file-relative: ``st_value``, what ``nm`` and ``addr2line`` use):

- ``find_symbol(name, libraries, lines=True) -> list[SymbolMatch]``: every function or object named ``name`` the
  way gdb's ``break NAME`` understands it: the exact demangled name, the name without its parameter
  list, trailing ``::`` components (``initModule`` matches ``torch::cpu::initModule(_object*)`` and
  ``initModule``), or the mangled name; a leading ``::`` asks for the fully qualified name. ``@plt``
  stubs (calls into another library) and ``[clone .cold]`` parts are listed and labelled.
- ``libraries_defining(name, libraries) -> list[str]``: the libraries defining a *function* of that
  name (not through a stub): which libraries gdb must read symbols for. Cached per library.
- ``suggest(name, libraries, limit=5) -> list[str]``: close qualified names for a misspelled one.
- ``line_for_address(library, address) -> SourceLine | None`` and
  ``lines_for_addresses(library, addresses) -> dict[int, SourceLine | None]``: file:line, function
  and inlining chain as ``addr2line -f -C -i`` reports them; None when there is no DWARF for it.
- ``symbol_at(library, address) -> tuple[SymbolMatch, int] | None``: the function holding an address
  and the offset into it; ``read_ahead(library)`` reads what it needs first, for a thread to do beforehand.
- ``line_info_source(library) -> str | None``: the file holding the library's DWARF (itself, or a
  separate debug file from ``/usr/lib/debug/.build-id`` or ``.gnu_debuglink``), None for a release build.
- ``torch_libraries(python) -> list[str]``: torch's shared libraries for an interpreter, found
  without importing torch.

Errors: a library that is missing, not ELF, truncated or with corrupt DWARF raises ``SymbolError``
(one sentence); a bad ``python`` raises ``UsageError``. Indexes are cached under
``$XDG_CACHE_HOME/pttrace`` (see ``cache.py``). Only this package imports pyelftools and cxxfilt.
"""
from __future__ import annotations

import os
import struct
import sys
from dataclasses import asdict, astuple, dataclass
from functools import lru_cache

TYPE_CHECKING = False  # not typing's: importing typing costs `where` ~5-10 ms; mypy still reads the block

from tracer import probes
from tracer.errors import SymbolError, UsageError

if TYPE_CHECKING:
    from .dwarf import DwarfReader, InlineStep, SourceLine
    from .elf_index import LibraryIndex, RawSymbol

# The DWARF reader (tracer.symbols.dwarf, ~10 ms of imports) loads when a library has DWARF to read: a
# ``pttrace where`` on a release wheel, or a breakpoint set by address, never needs it. The symbol index
# (elf_index and what it imports: ~10-15 ms, 6 dataclasses) loads at the first query: the agent inside gdb
# imports this package for ``ehframe`` alone, before the target starts. (No submodule may be named as one of
# this package's functions: importing it later would replace the function; close_names.py was suggest.py.)
_LAZY = {"SourceLine": ".dwarf", "InlineStep": ".dwarf", "DwarfReader": ".dwarf", "find_debug_file": ".debugfile",
         "LibraryIndex": ".elf_index", "RawSymbol": ".elf_index", "ElfFile": ".elffile"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "SymbolMatch", "SourceLine", "InlineStep", "find_symbol", "libraries_defining", "suggest",
    "line_for_address", "lines_for_addresses", "symbol_at", "line_info_source", "torch_libraries",
    "same_interpreter", "torch_here",
]


@dataclass
class SymbolMatch:
    """One symbol a name resolves to. ``file``/``line``: the line table at ``address`` (addr2line's
    answer); ``decl_file``/``decl_line``: the function's declaration in DWARF. None without DWARF."""

    name: str  # demangled
    mangled: str
    library: str
    address: int  # file-relative (st_value, or the stub's address for a plt entry)
    size: int
    binding: str  # local / global / weak / unique
    kind: str  # function / object
    plt: bool = False
    cold: bool = False
    file: str | None = None
    line: int | None = None
    decl_file: str | None = None
    decl_line: int | None = None
    # When the code at ``address`` is another function inlined into this one, ``file``/``line`` are
    # that function's (as addr2line says): ``inlined`` names it, ``call_file``/``call_line`` are where
    # this function calls it.
    inlined: str | None = None
    call_file: str | None = None
    call_line: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def to_tuple(self) -> tuple:
        """The fields in order, as ``SymbolMatch(*t)`` takes them back (kept answers: answers.py)."""
        return astuple(self)


def _index(library: str) -> LibraryIndex:
    from .elf_index import LibraryIndex

    return LibraryIndex.open(library)


def _match(raw: RawSymbol, library: str) -> SymbolMatch:
    return SymbolMatch(raw.demangled, raw.mangled, library, raw.address, raw.size, raw.binding, raw.kind,
                       raw.plt, raw.cold)


def find_symbol(name: str, libraries: list[str], lines: bool = True) -> list[SymbolMatch]:
    """Every symbol ``name`` designates in these libraries, with file:line where DWARF says it
    (``lines=False``: without, and without reading any DWARF: what setting a breakpoint needs)."""
    out: list[SymbolMatch] = []
    for lib in libraries:
        shown = os.path.abspath(lib)
        index = _index(lib)
        raws = index.lookup(name)
        if not raws:
            continue
        matches = [_match(r, shown) for r in raws]
        reader = _dwarf(index) if lines else None
        if reader is not None:
            for m in matches:
                if m.plt or m.kind != "function":
                    continue
                sl = _lookup(reader, index, m.address)
                if sl is not None:
                    m.file, m.line = sl.file, sl.line
                    m.decl_file, m.decl_line = sl.outer_decl
                    if sl.inlined:
                        m.inlined = sl.function
                        m.call_file, m.call_line = sl.inlined[-1].file, sl.inlined[-1].line
        out.extend(matches)
    return out


def libraries_defining(name: str, libraries: list[str]) -> list[str]:
    """The libraries (as given) that define a function called ``name`` (stubs do not count)."""
    return [lib for lib in libraries if _index(lib).defines(name)]


def suggest(name: str, libraries: list[str], limit: int = 5) -> list[str]:
    """Qualified names close to ``name``, best first."""
    scored: dict[str, float] = {}
    for lib in libraries:
        for score, candidate in _index(lib).suggest(name, limit=limit * 2):
            if score > scored.get(candidate, -1.0):
                scored[candidate] = score
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0]))
    return [n for n, _ in ranked[:limit]]


def symbol_at(library: str, address: int) -> tuple[SymbolMatch, int] | None:
    found = _index(library).symbol_at(address)
    if found is None:
        return None
    raw, offset = found
    return _match(raw, os.path.abspath(library)), offset


def read_ahead(library: str) -> None:
    """Read now what ``symbol_at`` reads of a library at its first question (its index, its table of function
    addresses, the demangler), for a thread of the caller's to do while nothing waits for it: naming the first
    frame in libtorch_cpu.so read its 7.8 MB table from the cache at the session's end, 0.035-0.06 s of it
    (bench/RESULTS.md). A library that cannot be read is left to ``symbol_at`` to report."""
    from .demangle import load_cxxfilt

    try:
        _index(library).addresses()
        load_cxxfilt()
    except (SymbolError, OSError):
        pass  # said by the frame's fill, which asks again


def has_debug_info(library: str) -> bool:
    """Whether gdb finds DWARF for this library: in it, by its build-id or its ``.gnu_debuglink``.
    Raises SymbolError when the library cannot be read."""
    from .debugfile import find_debug_file
    from .elffile import ElfFile

    return find_debug_file(ElfFile(library)) is not None


# -- DWARF ---------------------------------------------------------------------------------------
_readers: dict[tuple, DwarfReader | None] = {}


def _dwarf(index: LibraryIndex) -> DwarfReader | None:
    ident = (index.path, index.elf.size, index.elf.mtime_ns)
    if ident not in _readers:
        from .debugfile import find_debug_file

        dbg = find_debug_file(index.elf)
        if dbg is None:
            _readers[ident] = None
            return None
        from .dwarf import DECODE_ERRORS, DwarfReader

        try:
            _readers[ident] = DwarfReader(dbg, index.path)
        except DECODE_ERRORS:
            _readers[ident] = None
    return _readers[ident]


def _lookup(reader: DwarfReader, index: LibraryIndex, address: int) -> SourceLine | None:
    from .dwarf import DECODE_ERRORS

    def symbol_name(addr: int) -> str | None:
        found = index.symbol_at(addr)
        return found[0].mangled if found is not None and not found[0].plt else None

    try:
        return reader.lookup(address, symbol_name)
    except DECODE_ERRORS as exc:
        reader.elf.discard_partial()
        raise SymbolError(f"{index.elf.display}: corrupt DWARF ({exc})") from None


def line_info_source(library: str) -> str | None:
    reader = _dwarf(_index(library))
    return reader.elf.path if reader is not None else None


def line_for_address(library: str, address: int) -> SourceLine | None:
    index = _index(library)
    reader = _dwarf(index)
    if reader is None:
        return None
    return _lookup(reader, index, address)


def lines_for_addresses(library: str, addresses) -> dict[int, SourceLine | None]:
    """Many addresses of one library: each unit's tables are decoded (or read from the cache) once."""
    index = _index(library)
    reader = _dwarf(index)
    if reader is None:
        return {a: None for a in addresses}
    return {a: _lookup(reader, index, a) for a in sorted(set(addresses))}


# -- where torch lives -----------------------------------------------------------------------------
_FIND_TORCH = "import importlib.util as u; s = u.find_spec('torch'); print(s.origin if s and s.origin else '')"


@lru_cache(maxsize=8)
def torch_libraries(python: str) -> list[str]:
    """``torch/lib/*.so`` and ``torch/_C*.so`` of the interpreter ``python``; torch is not imported."""
    origin = torch_here() if same_interpreter(python, sys.executable) else None
    if origin is None:
        origin = _torch_of(python)
    package = os.path.dirname(origin)
    libdir = os.path.join(package, "lib")
    libs = []
    if os.path.isdir(libdir):
        libs = sorted(os.path.join(libdir, f) for f in os.listdir(libdir) if f.endswith(".so"))
    libs += sorted(os.path.join(package, f) for f in os.listdir(package)
                   if f.startswith("_C") and f.endswith(".so"))
    return libs


def same_interpreter(a: str, b: str) -> bool:
    """Whether the interpreters ``a`` and ``b`` are one: the same file run from the same directory. A venv's
    ``bin/python`` is a link to its base interpreter, and Python finds its packages from the directory it was
    run from: two venvs of one Python are one file with two sets of packages (and torches)."""
    try:
        return bool(b) and os.path.samefile(a, b) and os.path.samefile(os.path.dirname(os.path.abspath(a)),
                                                                        os.path.dirname(os.path.abspath(b)))
    except OSError:
        return False


def torch_here() -> str | None:
    """torch's ``__init__.py`` as this interpreter finds it, asked in-process: the default ``--python`` is
    pttrace's own, and a child interpreter just to ask cost ~25 ms of a ~100 ms ``pttrace where``. The
    current directory is searched first, as ``python -c`` does."""
    import importlib.machinery

    spec = importlib.machinery.PathFinder.find_spec("torch", [os.getcwd()] + [p for p in sys.path if p])
    return spec.origin if spec is not None and spec.origin else None


def _torch_of(python: str) -> str:
    import subprocess

    try:
        proc = probes.run([python, "-c", _FIND_TORCH], timeout=60)
    except FileNotFoundError:
        raise UsageError(f"{python}: no such interpreter") from None
    except PermissionError:
        raise UsageError(f"{python}: not executable") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"{python}: did not answer within 60 s") from None
    origin = proc.stdout.strip()
    if proc.returncode != 0 or not origin:
        raise UsageError(f"{python} has no torch installed", hint="pass the libraries with --lib PATH")
    return origin


# -- bulk enumeration (operator resolution: ``tracer.dispatch.ops``) -----------------------------------------
__all__ += ["search_symbols", "read_pointer"]


def search_symbols(substrings: list[str], libraries: list[str], pattern: str | None = None,
                   kinds: tuple[str, ...] = ("function",), special: bool = False) -> list[SymbolMatch]:
    """Every symbol defined in these libraries whose *mangled* name contains one of ``substrings``
    and, if given, matches the regular expression ``pattern`` (``re.search`` on the mangled name).

    For enumerating families of names (``at::_ops::*::call``, every kernel of an operator) where
    ``find_symbol``'s one-name lookup does not fit. One ``find`` per substring over the string table,
    the regex before any demangling; only survivors are demangled. Undefined symbols (PLT imports)
    are skipped; ``[clone .cold]`` parts are included and labelled ``cold``. No file:line here.
    ``special``: also the compiler's own objects (``vtable for X``, ``typeinfo for X``), left out otherwise.
    """
    out: list[SymbolMatch] = []
    for lib in libraries:
        shown = os.path.abspath(lib)
        out += [_match(raw, shown) for raw in _index(lib).search(substrings, pattern, kinds, special)]
    out.sort(key=lambda m: (m.library, m.address, m.name))
    return out


def read_pointer(library: str, address: int) -> int | None:
    """The pointer a data symbol holds at link time (``address`` as ``st_value``), file-relative.

    Position-independent libraries keep it as the addend of an ``R_X86_64_RELATIVE`` relocation
    (the section bytes may hold it too, or zero); ``.bss`` holds none. None when unknown or null.
    """
    index = _index(library)
    elf = index.elf
    if elf.elfclass != 64:
        return None
    value = None
    for sec in elf.section_list:
        if sec.addr and sec.addr <= address and address + 8 <= sec.addr + sec.size and sec.type != 8:  # not NOBITS
            value = struct.unpack_from("<Q", elf.mm, sec.offset + address - sec.addr)[0]
            break
    if value:
        return value
    rela = elf.sections.get(".rela.dyn")
    if rela is None or rela.entsize not in (0, 24):
        return None
    pattern = struct.pack("<QQ", address, 8)  # r_offset, r_info = R_X86_64_RELATIVE
    pos = elf.mm.find(pattern, rela.offset, rela.offset + rela.size)
    while pos >= 0:
        if (pos - rela.offset) % 24 == 0:
            return struct.unpack_from("<q", elf.mm, pos + 16)[0] or None
        pos = elf.mm.find(pattern, pos + 1, rela.offset + rela.size)
    return None


# -- operators a library registers itself (TORCH_LIBRARY) ------------------------------------------
__all__ += ["registered_kernels"]


def registered_kernels(library: str, namespace: str) -> list[tuple[str, str, SymbolMatch]]:
    """(operator, dispatch key, kernel) for each kernel ``library``'s TORCH_LIBRARY/TORCH_LIBRARY_IMPL
    blocks of ``namespace`` register (tracer/symbols/registrations.py)."""
    from .registrations import registrations

    index = _index(library)
    out = []
    for reg in registrations(index, namespace):
        found = index.symbol_at(reg.address)
        if found is None or found[1] != 0:
            continue
        out.append((reg.op, reg.key, _match(found[0], os.path.abspath(library))))
    return out
