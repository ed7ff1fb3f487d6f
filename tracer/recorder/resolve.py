"""Breakpoints from our symbol index: which ``--break`` names can be set by address, which stay gdb's,
and which heavy libraries a breakpoint needs the symbols of.

Setting a name our index resolves exactly by address means gdb never searches libtorch_cpu.so's
650k names again at each later library load (bench/RESULTS.md). When the index cannot answer, gdb
resolves the name instead, and the session says why it may be slower.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache

from tracer.errors import PttraceError

# Libraries at least this big are skipped unless a breakpoint (or a recorded stack) needs them.
HEAVY_LIBRARY = 100 * 1024 * 1024
# So is a library without DWARF from this size on: gdb would read its symbol table only, which pttrace's
# index names its frames from as well (fill records), and reading it costs gdb seconds' fractions a run
# (libtorch_python.so, 30 MB: ~0.5 s of a 3 s re-run; bench/RESULTS.md).
HEAVY_SYMBOL_TABLE = 16 * 1024 * 1024

IndexFailure = (PttraceError, OSError)  # what our symbol index raises when it cannot read a library


def index_resolvable(spec: str) -> bool:
    """A plain function name (not FILE:LINE, ``*ADDR``, an option or a condition)."""
    return bool(spec) and not spec.startswith(("*", "-")) and ":" not in spec.replace("::", "") \
        and not any(ch.isspace() for ch in spec.split("(", 1)[0]) and " if " not in spec \
        and " thread " not in spec and " task " not in spec


def names_a_place(spec: str) -> bool:
    """FILE:LINE or an address: no symbol index can tell which library it is in."""
    return ":" in spec.replace("::", "") or spec.startswith("*")


@dataclass
class Resolution:
    """Where the ``--break`` names go: set by address from pttrace's index, or to gdb by name."""

    by_address: list[dict] = field(default_factory=list)
    """{label, library, offset, function[, plt]} for the agent to set by address."""
    by_gdb: list[str] = field(default_factory=list)
    """Specs gdb resolves by name (pending until their library loads)."""
    warnings: list[str] = field(default_factory=list)


def resolve_by_index(specs: list[str], libraries: list[str], program: str | None = None) -> Resolution:
    """Split the ``--break`` specs: those our symbol index resolves exactly become address
    breakpoints, the rest stay gdb's.

    Exactly means: what gdb's pending breakpoint would find. So the spec must resolve to at least one
    function in torch's libraries, none of them weak (inline and template code that a C++ extension may
    hold its own copy of), and none defined in ``program`` too (the interpreter's executable, which no
    library search reaches: gdb resolves those). A name another library defines as well (a C++
    extension's own ``initModule``) is found there by LaterLibraries, which searches every library
    loaded after start-up for it, as gdb's pending breakpoint would. Like gdb, ``[clone .cold]`` parts
    are not broken on, and ``@plt`` stubs are listed as locations but never stopped at.

    Global names (``initModule``) were gdb's to resolve until LaterLibraries existed: gdb then read the
    symbols of libtorch_python.so (30 MB of symbol table, ~0.8 s of gdb's CPU a run, bench/RESULTS.md),
    where now it gets its unwind tables only.
    """
    from tracer.symbols import find_symbol

    out = Resolution()
    for spec in specs:
        if not index_resolvable(spec.strip()):
            out.by_gdb.append(spec)
            continue
        try:
            matches = [m for m in find_symbol(spec.strip(), libraries) if m.kind == "function"]
        except IndexFailure as exc:
            out.warnings.append(f"pttrace's symbol index failed on --break {spec} ({_reason(exc)}); gdb resolves "
                                "it by name instead, which can cost seconds at each library load")
            out.by_gdb.append(spec)
            continue
        bodies = [m for m in matches if not m.plt and not m.cold]
        safe = bodies and all(m.binding != "weak" for m in matches if not m.plt) and not _in_program(spec, program)
        if not safe:
            out.by_gdb.append(spec)
            continue
        for m in matches:
            if m.cold:
                continue
            item = {"label": spec, "library": m.library, "offset": m.address, "function": m.name}
            if m.plt:
                item["plt"] = True
            out.by_address.append(item)
    return out


def name_needles(spec: str) -> list[str] | None:
    """The strings a library holds if our index can find a function ``spec`` names in it (the index's own
    search: the last identifier, and each other one as mangled names spell it, ``<length><identifier>``);
    None when no such strings can tell (FILE:LINE, an address, a name of operators only)."""
    spec = spec.strip()
    if not index_resolvable(spec):
        return None
    from tracer.symbols.elf_index import ABBREVIATED
    from tracer.symbols.names import search_tokens, split_clones

    plain = split_clones(spec)[0]
    if plain.startswith("_Z"):
        return [plain]
    tokens = [tok for tok in search_tokens(plain) if tok not in ABBREVIATED]
    if not tokens:
        return None
    return [tokens[0]] + [f"{len(tok)}{tok}" for tok in tokens[1:]]


def _in_program(spec: str, program: str | None) -> bool:
    """Whether the executable defines a function ``spec`` names (True when that cannot be told)."""
    if program is None:
        return False
    from tracer.symbols import libraries_defining

    try:
        return bool(libraries_defining(spec.strip(), [program]))
    except IndexFailure:
        return True


def heavy(libraries: list[str]) -> list[str]:
    return [lib for lib in libraries if is_heavy(lib)]


@lru_cache(maxsize=None)
def is_heavy(path: str) -> bool:
    """Whether gdb gets this library's symbols only when something needs them (else unwind tables
    at most): 100 MB and more, or 16 MB and more without DWARF. Raises OSError when it is not there."""
    size = os.path.getsize(path)
    if size >= HEAVY_LIBRARY:
        return True
    if size < HEAVY_SYMBOL_TABLE:
        return False
    from tracer.symbols import has_debug_info

    try:
        return not has_debug_info(path)
    except PttraceError:
        return False  # unreadable to our index: gdb reads it as it can


def libraries_for_breakpoints(specs: list[str], libraries: list[str], address_breakpoints: list[dict],
                              with_addresses: bool) -> set[str] | None:
    """Basenames of the heavy libraries that define a breakpoint's function; None: cannot tell, load
    all. ``with_addresses``: address breakpoints need their library's symbols too (not on the CFI
    path). Raises what the index raises (``IndexFailure``)."""
    from tracer.symbols import libraries_defining

    needed = {os.path.basename(b["library"]) for b in address_breakpoints if not b.get("plt") and with_addresses}
    for spec in specs:
        if names_a_place(spec):
            return None
        needed.update(os.path.basename(lib) for lib in libraries_defining(spec, libraries))
    return needed


def breakpoints_in(spec: str, path: str) -> list[dict]:
    """Address breakpoints ({label, library, offset, function[, plt]}) for every function ``spec``
    names in this one library, as gdb's ``break`` would find them by their symbols (cold parts left out).
    Raises what the index raises (``IndexFailure``)."""
    from tracer.symbols import find_symbol

    items = []
    for m in find_symbol(spec, [path], lines=False):
        if m.kind != "function" or m.cold:
            continue
        item = {"label": spec, "library": m.library, "offset": m.address, "function": m.name}
        if m.plt:
            item["plt"] = True
        items.append(item)
    return items


def may_define(spec: str, path: str) -> bool:
    """Whether a breakpoint gdb resolves by name is (or may be) a function of this library."""
    from tracer.symbols import libraries_defining

    if not index_resolvable(spec.strip()):
        return True
    try:
        return bool(libraries_defining(spec.strip(), [path]))
    except IndexFailure:
        return True  # cannot tell: give gdb the symbols rather than miss the breakpoint


def _reason(exc: BaseException) -> str:
    return exc.message if isinstance(exc, PttraceError) else str(exc)
