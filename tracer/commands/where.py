"""``pttrace where NAME|0xADDR``: where a function is defined, or what is at an address.

Answers from the libraries' own symbol tables and DWARF (``tracer.symbols``), without gdb and without
importing torch: by default the torch libraries of ``--python``'s interpreter are searched.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from tracer.errors import SymbolError, UsageError

RELEASE_NOTE = "release build: no line information; build with DEBUG=1 or REL_WITH_DEB_INFO=1"
STRIPPED_NOTE = ("stripped library: no line information, and no separate debug file found "
                 "(/usr/lib/debug/.build-id, .gnu_debuglink, $PTTRACE_DEBUG_DIRS)")


def add_parser(sub) -> None:
    p = sub.add_parser("where", help="find where a C/C++ function is defined (or what is at an address)",
                       description="Find a C/C++ function by name in the torch libraries (or --lib ones), "
                                   "with its library, address, binding and size, and its source file:line "
                                   "when the library has DWARF. With 0xADDR, name the function at that "
                                   "address of --lib and its file:line (with the inlining chain).")
    p.add_argument("name", metavar="NAME|0xADDR",
                   help="a function name as for gdb's `break` (initModule, at::_ops::add_Tensor::call, "
                        "a mangled name), or an address in --lib")
    p.add_argument("--lib", action="append", default=[], metavar="PATH",
                   help="search this shared library instead of torch's; repeat for more")
    p.add_argument("--python", default=sys.executable, metavar="PATH",
                   help="whose torch to search (default: the interpreter running pttrace)")
    p.add_argument("--json", action="store_true", help="print one JSON object, for scripts")
    p.add_argument("--mangled", action="store_true",
                   help="print linkage (mangled) names, as gdb's `break` and `nm` need them for some "
                        "templates; the demangled name follows, dimmed")
    from tracer.commands._sources import add_source_dir

    add_source_dir(p)
    p.set_defaults(func=run)


def _parse_address(text: str) -> int | None:
    if text.lower().startswith("0x"):
        try:
            return int(text, 16)
        except ValueError:
            raise UsageError(f"{text!r} is not a hexadecimal address") from None
    return None


def run(args: argparse.Namespace) -> int:
    from tracer import symbols

    name = args.name.strip()
    if not name:
        raise UsageError("give a function name or an address")
    libraries = list(args.lib) or symbols.torch_libraries(args.python)
    if not libraries:
        raise UsageError(f"no torch libraries found for {args.python}", hint="pass them with --lib PATH")
    address = _parse_address(name)
    if address is not None:
        if len(args.lib) != 1:
            raise UsageError("an address belongs to one library: give it with --lib PATH")
        return _where_address(address, args.lib[0], args.json, args.mangled)
    defined, notes = [], []
    if _source_dir_given(args):  # tracer.sources (ctags, codegen tables) only when there is one to search
        from tracer.commands._sources import finder_for

        finder = finder_for(args)
        defined, notes = finder.where(name), finder.notes
    else:
        # The same name over the same unchanged files: the answer kept whole (symbols/answers.py), without
        # opening any library's index.
        from tracer.symbols import answers

        kept = answers.recall(name, libraries)
        if kept is not None:
            return _show_matches(name, libraries, _Answer.from_kept(kept), args.json, args.mangled)
    return _where_name(name, libraries, args.json, explicit=bool(args.lib), defined=defined, notes=notes,
                       mangled=args.mangled)


def _source_dir_given(args: argparse.Namespace) -> bool:
    from tracer import settings

    return bool(args.source_dir or settings.source_dir())


# -- by name ----------------------------------------------------------------------------------
def _print_definitions(defined, notes) -> None:
    """Definitions found in --source-dir by parsing it (tracer.sources), and what to know about them."""
    from tracer.text.styled import Line

    console = _console()
    if defined:
        console.print()
    for d in defined:
        line = Line("  definition  ")
        line.append(f"{d.file}:{d.line}", style="cyan")
        line.append(f"  {d.qualified}{d.signature or ''}", style="dim")
        console.print(line)
    for note in notes:
        console.print(Line(f"warning: {note}", style="yellow"))


def _definitions_json(defined) -> list[dict]:
    return [{"function": d.qualified, "signature": d.signature, "file": d.file, "line": d.line} for d in defined]


def _where_name(name: str, libraries: list[str], as_json: bool, explicit: bool, defined=(), notes=(),
                mangled: bool = False) -> int:
    from tracer import symbols
    from tracer.symbols.elf_index import LibraryIndex

    matches = symbols.find_symbol(name, libraries)
    with_lines = {}
    for lib in sorted({m.library for m in matches}):
        with_lines[lib] = symbols.line_info_source(lib)
    if not matches:
        bare = [lib for lib in libraries if LibraryIndex.open(lib).stripped]
        if explicit and bare and len(bare) == len(libraries):
            raise SymbolError(f"{bare[0]} is stripped (no .symtab): only its exported symbols were "
                              f"searched and none is named {name!r}")
        suggestions = symbols.suggest(name, libraries, limit=5)
        if as_json:
            _print_json({"query": name, "libraries": [os.path.abspath(x) for x in libraries], "matches": [],
                         "suggestions": suggestions, "definitions": _definitions_json(defined),
                         "warnings": list(notes)})
        else:
            _print_no_match(name, libraries, suggestions)
            _print_definitions(defined, notes)
        return 1
    facts = {}
    for lib in with_lines:
        index = LibraryIndex.open(lib)
        facts[lib] = (index.symtab_from if index.symtab_elsewhere else None, index.stripped)
    answer = _Answer(matches, with_lines, facts)
    if not defined and not notes:  # an answer from --source-dir's sources is not kept: its tree may change
        from tracer.symbols import answers

        answers.remember(name, libraries, answer.to_kept())
    return _show_matches(name, libraries, answer, as_json, mangled, defined, notes)


@dataclass
class _Answer:
    """What ``where NAME`` prints of the libraries: the matches, each matching library's DWARF file, and its
    (separate file of its ``.symtab`` or None, stripped) facts. Kept whole by symbols/answers.py, as plain tuples."""

    matches: list
    with_lines: dict
    facts: dict

    def to_kept(self) -> tuple:
        return (tuple(m.to_tuple() for m in self.matches), self.with_lines, self.facts)

    @classmethod
    def from_kept(cls, kept) -> "_Answer":
        from tracer.symbols import SymbolMatch

        matches, with_lines, facts = kept
        return cls([SymbolMatch(*m) for m in matches], with_lines, facts)


def _show_matches(name, libraries, answer: _Answer, as_json: bool, mangled: bool, defined=(), notes=()) -> int:
    if as_json:
        _print_json({"query": name, "libraries": [os.path.abspath(x) for x in libraries],
                     "matches": [m.to_dict() for m in answer.matches],
                     "line_info": answer.with_lines, "suggestions": [], "definitions": _definitions_json(defined),
                     "warnings": list(notes)})
        return 0
    _print_matches(name, libraries, answer.matches, answer.with_lines, answer.facts, mangled)
    _print_definitions(defined, notes)
    return 0


def _console():
    from tracer.text.styled import Printer

    return Printer()


def _label(m) -> str:
    if m.plt:
        return "plt stub: a call into another library, not a definition"
    parts = [m.binding, m.kind]
    if m.cold:
        parts.append("cold part")
    return " ".join(parts)


_DECLARED = "DW_AT_decl_file/decl_line"


def _place(label: str, file: str | None, line: int | None, note: str):
    """One ``label  file:line  (note)`` row."""
    from tracer.text.styled import Line

    row = Line(label)
    row.append(f"{file}:{line or '?'}", style="cyan")
    row.append(f"  ({note})", style="dim")
    return row


def _named(text, mangled_name: str | None, demangled: str | None, style: str, mangled: bool,
           suffix: str = "") -> None:
    """Append a function's name (and ``suffix``, an offset) to ``text``: the demangled name, or with
    ``--mangled`` the linkage name followed by the demangled one, dimmed (when they differ)."""
    if mangled and mangled_name:
        text.append(mangled_name, style=style)
        text.append(suffix)
        if demangled and demangled != mangled_name:
            text.append(f"  ({demangled})", style="dim")
    else:
        text.append(demangled or mangled_name or "??", style=style)
        text.append(suffix)


def _print_matches(name, libraries, matches, with_lines, facts, mangled: bool = False) -> None:
    from tracer.text.styled import Line

    console = _console()
    by_lib: dict[str, list] = {}
    for m in matches:
        by_lib.setdefault(m.library, []).append(m)
    # A cold part is a piece of a definition, a stub a call into another library: counted apart.
    counts = [(sum(1 for m in matches if not m.plt and not m.cold), "definition", "definitions"),
              (sum(1 for m in matches if m.cold and not m.plt), "cold part", "cold parts"),
              (sum(1 for m in matches if m.plt), "plt stub", "plt stubs")]
    told = [f"{n} {one if n == 1 else many}" for n, one, many in counts if n or one == "definition"]
    head = Line()
    head.append(name, style="bold")
    head.append(": " + (" and ".join(told) if len(told) < 3 else f"{told[0]}, {told[1]} and {told[2]}"))
    head.append(f" in {len(by_lib)} of {len(libraries)} librar{'ies' if len(libraries) != 1 else 'y'}")
    console.print(head)
    release = stripped = False
    for lib, ms in by_lib.items():
        console.print()
        title = Line(os.path.basename(lib), style="bold cyan")
        title.append(f"  {lib}", style="dim")
        symtab_from, lib_stripped = facts[lib]  # symtab_from: only when it is not the library itself
        if symtab_from and with_lines.get(lib) == symtab_from:
            title.append(f"  (symbols and DWARF from {symtab_from})", style="dim")
        else:
            if symtab_from:
                title.append(f"  (symbols from {symtab_from})", style="dim")
            if with_lines.get(lib) and with_lines[lib] != os.path.realpath(lib):
                title.append(f"  (DWARF from {with_lines[lib]})", style="dim")
        if lib_stripped:
            title.append("  (stripped: exported symbols only)", style="dim")
        console.print(title)
        for m in ms:
            line = Line("  ")
            _named(line, m.mangled, m.name, "yellow" if m.plt or m.cold else "bold", mangled)
            line.append(f"  {m.address:#x}", style="green")
            line.append(f"  {m.size} bytes  {_label(m)}", style="dim")
            console.print(line)
            if m.file or m.decl_file:
                if m.file:
                    console.print(_place("      code at   ", m.file, m.line,
                                         f"in {m.inlined}, inlined here: addr2line's first line" if m.inlined
                                         else "line table at the address; what addr2line says"))
                    if m.inlined:
                        console.print(_place("      calls it  ", m.call_file, m.call_line,
                                             "the inlined call, in this function"))
                if m.decl_file:
                    console.print(_place("      declared  ", m.decl_file, m.decl_line, _DECLARED))
            elif not m.plt and not with_lines.get(lib):
                if lib_stripped:
                    stripped = True
                else:
                    release = True
    # Said once, whatever the number of matches and libraries.
    for needed, note in ((release, RELEASE_NOTE), (stripped, STRIPPED_NOTE)):
        if needed:
            console.print()
            console.print(Line(note, style="italic"))


def _print_no_match(name, libraries, suggestions) -> None:
    from tracer.text.styled import Line

    console = _console()
    where = libraries[0] if len(libraries) == 1 else f"{len(libraries)} libraries"
    msg = Line()
    msg.append(name, style="bold")
    msg.append(f": no function or variable of that name in {where}")
    console.print(msg)
    if suggestions:
        console.print("closest names:")
        for s in suggestions:
            console.print(Line(f"  {s}", style="yellow"))


# -- by address -------------------------------------------------------------------------------
def _where_address(address: int, library: str, as_json: bool, mangled: bool = False) -> int:
    from tracer.text.styled import Line

    from tracer import symbols
    from tracer.symbols.elf_index import LibraryIndex

    found = symbols.symbol_at(library, address)
    source = symbols.line_for_address(library, address)
    dwarf_from = symbols.line_info_source(library)
    if as_json:
        _print_json({
            "address": address, "library": os.path.abspath(library),
            "symbol": found[0].to_dict() if found else None, "offset": found[1] if found else None,
            "source": _source_dict(source), "line_info": dwarf_from,
        })
        return 0 if (found or source) else 1
    console = _console()
    head = Line(f"{address:#x}", style="green")
    head.append(f" in {os.path.basename(library)}: ")
    if found:
        sym, offset = found
        _named(head, sym.mangled, sym.name, "bold", mangled, f"+{offset:#x}" if offset else "")
        head.append(f"  ({_label(sym)} at {sym.address:#x}, {sym.size} bytes)", style="dim")
    elif source and source.function:
        _named(head, source.mangled, source.function, "bold", mangled)
    else:
        head.append("no symbol covers this address", style="yellow")
    console.print(head)
    if source is not None:
        code = Line("    code at   ")
        code.append(source.location, style="cyan")
        if source.discriminator:
            code.append(f" (discriminator {source.discriminator})", style="dim")
        code.append(f"  in {(mangled and source.mangled) or source.function or '??'}", style="dim")
        console.print(code)
        for step in source.inlined:
            inl = Line("    inlined into  ")
            _named(inl, step.mangled, step.function, "bold", mangled)
            inl.append(f"  at {step.file or '??'}:{step.line or '?'}", style="cyan")
            console.print(inl)
        if source.decl_file:
            console.print(_place("    declared  ", source.decl_file, source.decl_line, _DECLARED))
    elif dwarf_from is None:
        stripped = LibraryIndex.open(library).stripped
        console.print(Line(STRIPPED_NOTE if stripped else RELEASE_NOTE, style="italic"))
    else:
        console.print(Line("no line information covers this address", style="italic"))
    return 0 if (found or source) else 1


def _source_dict(source) -> dict | None:
    if source is None:
        return None
    return {
        "file": source.file, "line": source.line, "function": source.function, "mangled": source.mangled,
        "discriminator": source.discriminator,
        "inlined": [{"function": s.function, "mangled": s.mangled, "file": s.file, "line": s.line,
                     "decl_file": s.decl_file, "decl_line": s.decl_line} for s in source.inlined],
        "decl_file": source.decl_file, "decl_line": source.decl_line,
    }


def _print_json(obj) -> None:
    import json

    sys.stdout.write(json.dumps(obj, indent=2) + "\n")
