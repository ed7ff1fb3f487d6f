"""Address -> file:line, function and inlining chain, from DWARF 2-5, with answers equal to binutils'
``addr2line -f -C -i -e LIB ADDR``.

pyelftools' DIE API walks every unit and builds an object per DIE (6-23 s and up to 1.7 GB for one
lookup in a big debug build); here a lookup reads ``.debug_aranges`` -> the one unit that holds the
address -> that unit's line program and function DIEs, decoded by small hand-written readers. What
one unit yields (line rows, function ranges with resolved names) is stored in the on-disk cache, so
later lookups in that unit, in this process or the next, are a file read and a ``bisect``.

The modules follow the sections and their jobs, each importing only those before it: ``forms``
(DWARF's vocabulary and string readers; LEB128 numbers are ``symbols/leb128.py``'s), ``abbrev``
(``.debug_abbrev`` and the attribute decoders compiled from it), ``sections`` (a file's section bytes,
read when first needed), ``unit`` (a ``.debug_info`` unit and its attribute values, range lists),
``lines`` (``.debug_line``), ``functions`` (function DIEs and their names), ``reader`` (one file's
DWARF: address -> unit -> answer, owning the units and the tables decoded from them), ``answers``
(what a lookup returns).

The answers follow bfd (binutils' DWARF reader) on purpose, including where it is surprising:
- the line of an address is the *last* row at the greatest row address <= the address, ``is_stmt``
  ignored; overlapping sequences are trimmed the way bfd trims them;
- the function is the one with the *smallest* range holding the address (ties: the later DIE), its
  name is its linkage name when it (or its abstract origin / specification) has one, else the ELF
  symbol at that address, else its ``DW_AT_name`` (one exception, kept apart in
  ``addr2line_function``: for *inlined* code without a linkage name bfd prints the symbol of the
  enclosing function, which is wrong; ``function`` gives DWARF's name there);
- file names are built like bfd's ``concat_filename`` (comp_dir / directory / name, DWARF 4 and 5
  numbering).
``decl_file``/``decl_line`` are reported as well, labelled: they are where the function is declared
(or defined, when the definition DIE says so), not what addr2line prints.

Damaged DWARF raises one of ``DECODE_ERRORS``; ``tracer.symbols`` turns them into ``SymbolError``.
"""
from __future__ import annotations

from .answers import InlineStep, SourceLine
from .forms import DECODE_ERRORS, DwarfFormatError
from .reader import DwarfReader

__all__ = ["DECODE_ERRORS", "DwarfFormatError", "DwarfReader", "InlineStep", "SourceLine"]
