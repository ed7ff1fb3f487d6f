"""Function DIEs: a unit's table of function ranges with resolved names, callers and call sites.

What bfd's ``scan_unit_for_symbols`` and ``find_abstract_instance`` compute, read with the compiled
attribute decoders (``abbrev.py``) and stored per unit in the cache as compact arrays.
"""
from __future__ import annotations

import bisect
import zlib
from array import array
from dataclasses import dataclass
from typing import Callable

from .forms import (AT_ABSTRACT_ORIGIN, AT_CALL_FILE, AT_CALL_LINE, AT_DECL_FILE, AT_DECL_LINE, AT_HIGH_PC,
                    AT_LINKAGE_NAME, AT_LOW_PC, AT_MIPS_LINKAGE_NAME, AT_NAME, AT_RANGES, AT_SIBLING, AT_SPECIFICATION,
                    F_REF_ADDR, FUNCTION_TAGS, REF_FORMS, STRING_FORMS, TAG_INLINED_SUBROUTINE, TYPE_TAGS,
                    UNIT_REF_FORMS, UNMANGLED_LANGUAGES, DwarfFormatError)
from ..leb128 import uleb
from .packed import compact, pack, unpack
from .unit import CompUnit

# What we read of function DIEs; everything else is skipped by length.
FUNCTION_ATTRS = frozenset({AT_NAME, AT_LOW_PC, AT_HIGH_PC, AT_RANGES, AT_ABSTRACT_ORIGIN, AT_SPECIFICATION,
                            AT_DECL_FILE, AT_DECL_LINE, AT_CALL_FILE, AT_CALL_LINE, AT_LINKAGE_NAME,
                            AT_MIPS_LINKAGE_NAME})
_SIBLING_ONLY: frozenset = frozenset({AT_SIBLING})
_MAX_ORIGIN_DEPTH = 16  # abstract_origin / specification chains longer than this are a loop


@dataclass
class FunctionTable:
    """Function ranges of one unit, sorted by start, with names already resolved.

    Functions are numbered in DIE order (bfd breaks ties by it); files are DWARF file numbers of the
    unit's line table (-1: none). Functions without code are left out: nothing can land in them.
    Range bounds are offsets from ``base``; every array uses the smallest item type that fits.
    """

    base: int
    lows: array  # per range, sorted
    highs: array
    owner: array  # function number of each range
    names: list[str]  # distinct names
    name_of: array  # per function: index into names, -1 for none
    linkage: array  # 1 when the name is a linkage name (else bfd prefers the ELF symbol's name)
    callers: array  # per function: the function it is inlined into, -1 for none
    call_file: array
    call_line: array
    decl_file: array
    decl_line: array
    max_span: int

    @classmethod
    def build(cls, funcs, lows, highs, owner) -> "FunctionTable":
        has_code = sorted(set(owner))
        renumber = {old: new for new, old in enumerate(has_code)}
        kept = [funcs[i] for i in has_code]
        distinct: dict[str, int] = {}
        for f in kept:
            if f[0] is not None and f[0] not in distinct:
                distinct[f[0]] = len(distinct)
        order = sorted(range(len(lows)), key=lambda i: (lows[i], owner[i]))
        base = lows[order[0]] if order else 0
        return cls(
            base=base,
            lows=compact([lows[i] - base for i in order]),
            highs=compact([highs[i] - base for i in order]),
            owner=compact([renumber[owner[i]] for i in order]),
            names=list(distinct),
            name_of=compact([distinct[f[0]] if f[0] is not None else -1 for f in kept], signed=True),
            linkage=array("B", [1 if f[1] else 0 for f in kept]),
            callers=compact([renumber.get(f[2], -1) for f in kept], signed=True),
            call_file=compact([-1 if f[3] is None else f[3] for f in kept], signed=True),
            call_line=compact([f[4] or 0 for f in kept]),
            decl_file=compact([-1 if f[5] is None else f[5] for f in kept], signed=True),
            decl_line=compact([f[6] or 0 for f in kept]),
            max_span=max((h - lo for lo, h in zip(lows, highs)), default=0),
        )

    def name(self, f: int) -> str | None:
        i = self.name_of[f]
        return self.names[i] if i >= 0 else None

    def best(self, address: int) -> int:
        """bfd's best fit: the function with the smallest range holding the address (ties: later DIE)."""
        best = -1
        best_len = None
        lows, highs, owner = self.lows, self.highs, self.owner
        rel = address - self.base
        if rel < 0:
            return -1
        k = bisect.bisect_right(lows, rel) - 1
        floor = rel - self.max_span
        while k >= 0 and lows[k] > floor:
            if rel < highs[k]:
                span = highs[k] - lows[k]
                f = owner[k]
                if best_len is None or span < best_len or (span == best_len and f > best):
                    best, best_len = f, span
            k -= 1
        return best

    def to_payload(self):
        blob = zlib.compress("\0".join(self.names).encode("utf-8", "surrogatepass"), 1)
        arrays = (self.lows, self.highs, self.owner, self.name_of, self.linkage, self.callers, self.call_file,
                  self.call_line, self.decl_file, self.decl_line)
        return (self.base, self.max_span, blob, len(self.names), tuple(pack(a) for a in arrays))

    @classmethod
    def from_payload(cls, p) -> "FunctionTable":
        names = zlib.decompress(p[2]).decode("utf-8", "surrogatepass").split("\0") if p[3] else []
        a = [unpack(x) for x in p[4]]
        return cls(p[0], a[0], a[1], a[2], names, a[3], a[4], a[5], a[6], a[7], a[8], a[9], p[1])


def scan_functions(unit: CompUnit, origins: OriginNames, skip_types: bool = True) -> FunctionTable:
    """Every function DIE with code (subprograms, inlined subroutines, entry points), like bfd's
    ``scan_unit_for_symbols``: ranges, resolved name, caller and call site, declaration.

    ``skip_types`` jumps over the bodies of types declared outside any function (through
    DW_AT_sibling): the code-carrying DIE of a member function of such a class is placed outside
    it (DW_AT_specification points back), so their bodies hold only declarations, and they are
    most of the DIEs of a C++ unit. (A class local to a function does hold its members' code
    DIEs in gcc's output: those are walked.)"""
    data = unit.data
    abbrevs = unit.abbrevs
    mangled_by_name = unit.language not in UNMANGLED_LANGUAGES
    lows: list[int] = []
    highs: list[int] = []
    owner: list[int] = []
    funcs: list[list] = []  # [name, is_linkage, caller, call_file, call_line, decl_file, decl_line, tag, lo]
    nested: list[int] = []  # function index at each nesting level (-1 when none)
    pos = unit.die_start
    end = len(data)
    level_func = -1
    depth = 0
    read_attrs = unit.read_attrs
    skip_attrs = unit.skip_attrs
    while pos < end:
        code = data[pos]
        if code < 0x80:
            pos += 1
        else:
            code, pos = uleb(data, pos)
        if code == 0:
            depth -= 1
            if depth < 0:
                break
            level_func = nested.pop() if nested else -1
            continue
        ab = abbrevs.get(code)
        if ab is None:
            raise DwarfFormatError(f"unit at {unit.offset:#x} uses unknown abbreviation {code}")
        if ab.tag not in FUNCTION_TAGS:
            if ab.children and skip_types and level_func < 0 and ab.tag in TYPE_TAGS and ab.has_sibling:
                attrs, _ = read_attrs(pos, ab, _SIBLING_ONLY)
                if attrs and attrs[0][1] in UNIT_REF_FORMS and attrs[0][2] > pos:
                    pos = attrs[0][2]
                    continue
            fixed = ab.fixed
            pos = pos + fixed if fixed is not None else skip_attrs(pos, ab)
            if ab.children:
                nested.append(level_func)
                depth += 1
            continue
        attrs, pos = read_attrs(pos, ab, FUNCTION_ATTRS)
        rngs = unit.pc_ranges(attrs)
        name, is_linkage, decl_file, decl_line = function_names(unit, attrs, mangled_by_name, origins)
        caller = -1
        call_file = call_line = None
        if ab.tag == TAG_INLINED_SUBROUTINE:
            caller = level_func
            for at, _form, value in attrs:
                if at == AT_CALL_FILE:
                    call_file = value
                elif at == AT_CALL_LINE:
                    call_line = value
        this_func = len(funcs)
        funcs.append([name, is_linkage, caller, call_file, call_line, decl_file, decl_line, ab.tag,
                      rngs[0][0] if rngs else 0])
        for lo, hi in rngs:
            lows.append(lo)
            highs.append(hi)
            owner.append(this_func)
        if ab.children:
            nested.append(level_func)
            level_func = this_func
            depth += 1
    return FunctionTable.build(funcs, lows, highs, owner)


def function_names(unit: CompUnit, attrs, mangled_by_name: bool, origins: OriginNames, depth: int = 0):
    """bfd's rules for a function's name and declaration, attribute by attribute, in order:
    (name, whether it is a linkage name, decl file index, decl line). An abstract origin or a
    specification gives its own (cached in ``origins``)."""
    name = None
    is_linkage = False
    decl_file = decl_line = None
    for at, form, value in attrs:
        if at in (AT_ABSTRACT_ORIGIN, AT_SPECIFICATION):
            if form in REF_FORMS:
                n, linkage, f, ln = origins.resolve(unit, form, value, depth)
                name = n
                is_linkage = is_linkage or linkage
                if f is not None:
                    decl_file = f
                if ln is not None:
                    decl_line = ln
        elif at == AT_NAME:
            if name is None and form in STRING_FORMS:
                name = unit.string(form, value)
                if not mangled_by_name:
                    is_linkage = True
        elif at in (AT_LINKAGE_NAME, AT_MIPS_LINKAGE_NAME):
            if form in STRING_FORMS:
                name = unit.string(form, value)
                is_linkage = True
        elif at == AT_DECL_FILE:
            decl_file = value
        elif at == AT_DECL_LINE:
            decl_line = value
    return name, is_linkage, decl_file, decl_line


class OriginNames:
    """bfd's find_abstract_instance, cached per DIE: the name and declaration of the DIE an
    abstract_origin / specification points at, following further specifications. A reference into
    another unit (DW_FORM_ref_addr) is found through ``unit_containing`` (the reader's)."""

    def __init__(self, unit_containing: Callable[[int], CompUnit]):
        self.unit_containing = unit_containing
        self._cache: dict[int, tuple] = {}

    def resolve(self, unit: CompUnit, form: int, value: int, depth: int = 0):
        if form == F_REF_ADDR:
            target = self.unit_containing(value)
            rel = value - target.offset
        else:
            target = unit
            rel = value
        key = target.offset + rel
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if depth > _MAX_ORIGIN_DEPTH:
            return (None, False, None, None)
        _ab, attrs = target.die_attrs(rel, FUNCTION_ATTRS)
        # An origin's own abstract_origin is not followed (bfd follows specifications only).
        attrs = [a for a in attrs if a[0] != AT_ABSTRACT_ORIGIN]
        mangled_by_name = target.language not in UNMANGLED_LANGUAGES
        name, linkage, decl_file, decl_line = function_names(target, attrs, mangled_by_name, self, depth + 1)
        if target is not unit and decl_file is not None:
            decl_file = None  # a file number of another unit's line table: not ours to resolve
        result = (name, linkage, decl_file, decl_line)
        self._cache[key] = result
        return result
