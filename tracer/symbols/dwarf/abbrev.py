"""``.debug_abbrev``: the shape of every DIE, and readers compiled from those shapes.

A unit's DIEs are decoded through their abbreviation: the list of (attribute, form) pairs says how
long each attribute is. Two readers are built from it, once per abbreviation and set of wanted
attributes: a *plan* (a list of steps for a generic loop) and, for the usual forms, a generated
Python function that reads fixed-size attributes at offsets known in advance.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .forms import (AT_SIBLING, F_ADDR, F_BLOCK, F_BLOCK1, F_BLOCK2, F_BLOCK4, F_EXPRLOC, F_FLAG_PRESENT,
                    F_IMPLICIT_CONST, F_REF_ADDR, F_SDATA, F_STRING, FIXED_SIZE, OFFSET_SIZED, ULEB_FORMS,
                    DwarfFormatError)
from ..leb128 import sleb, uleb

# Plan steps that skip a variable-length form (a step >= 0 skips that many bytes).
SKIP_ULEB, SKIP_CSTR, SKIP_BLOCK, SKIP_BLOCK1, SKIP_BLOCK2, SKIP_BLOCK4 = -1, -2, -3, -4, -5, -6
_VARIABLE_SKIPS = {**{form: SKIP_ULEB for form in ULEB_FORMS}, F_SDATA: SKIP_ULEB, F_STRING: SKIP_CSTR,
                   F_EXPRLOC: SKIP_BLOCK, F_BLOCK: SKIP_BLOCK, F_BLOCK1: SKIP_BLOCK1, F_BLOCK2: SKIP_BLOCK2,
                   F_BLOCK4: SKIP_BLOCK4}
KEEP_ALL = object()  # marks a plan step decoded only to learn its length (DW_FORM_indirect)


@dataclass
class Abbrev:
    tag: int
    children: bool
    attrs: list[tuple[int, int, int]]  # (attribute, form, implicit constant)
    fixed: int | None  # total size of the attributes when every form has a fixed size here
    plans: dict = field(default_factory=dict)  # wanted attributes -> compiled plan
    decoders: dict = field(default_factory=dict)  # wanted attributes -> generated decoder (or None)
    has_sibling: bool = False

    def __post_init__(self):
        self.has_sibling = any(at == AT_SIBLING for at, _, _ in self.attrs)


def form_size(form: int, addr_size: int, offset_size: int, version: int) -> int | None:
    """The size of a value of this form, or None when it depends on the value (LEB128, strings, blocks)."""
    size = FIXED_SIZE.get(form)
    if size is not None:
        return size
    if form in OFFSET_SIZED:
        return offset_size
    if form == F_ADDR:
        return addr_size
    if form == F_REF_ADDR:
        return offset_size if version >= 3 else addr_size
    return None


def parse_abbrev_table(data, offset: int, addr_size: int, offset_size: int) -> dict[int, Abbrev]:
    """The abbreviation table at ``offset`` of ``.debug_abbrev``: code -> Abbrev."""
    if not 0 <= offset < len(data):
        raise DwarfFormatError(f"abbreviation table at {offset:#x} is past the end of .debug_abbrev")
    table: dict[int, Abbrev] = {}
    pos = offset
    while True:
        code, pos = uleb(data, pos)
        if code == 0:
            return table
        tag, pos = uleb(data, pos)
        children = data[pos] == 1
        pos += 1
        attrs = []
        fixed: int | None = 0
        while True:
            at, pos = uleb(data, pos)
            form, pos = uleb(data, pos)
            const = 0
            if form == F_IMPLICIT_CONST:
                const, pos = sleb(data, pos)
            if at == 0 and form == 0:
                break
            attrs.append((at, form, const))
            if fixed is not None:
                # DW_FORM_ref_addr's size depends on the unit's version: never counted as fixed here.
                size = form_size(form, addr_size, offset_size, 0) if form != F_REF_ADDR else None
                fixed = fixed + size if size is not None else None
        table[code] = Abbrev(tag, children, attrs, fixed)


def compile_plan(ab: Abbrev, wanted: frozenset | None, addr_size: int, offset_size: int, version: int) -> list:
    """Steps to walk a DIE's attributes: an int skips (>= 0: that many bytes; < 0: a variable-length
    form), a tuple decodes. Runs of fixed-size attributes we do not want collapse into one skip."""
    plan: list = []
    run = 0
    for at, form, const in ab.attrs:
        size = form_size(form, addr_size, offset_size, version)
        take = wanted is None or at in wanted
        if not take and size is not None:
            run += size
            continue
        if run:
            plan.append(run)
            run = 0
        if take:
            plan.append((at, form, const))
        elif form in _VARIABLE_SKIPS:
            plan.append(_VARIABLE_SKIPS[form])
        else:  # DW_FORM_indirect or unknown: decode to find the length, then drop the value
            plan.append((at, form, KEEP_ALL))
    if run:
        plan.append(run)
    return plan


_DECODERS: dict[tuple, object] = {}


def compile_decoder(ab: Abbrev, wanted: frozenset | None, addr_size: int, offset_size: int, version: int):
    """Generated decoders are shared by every unit whose abbreviation has the same shape."""
    shape = (tuple(ab.attrs), wanted, addr_size, offset_size, version >= 3)
    decoder = _DECODERS.get(shape, False)
    if decoder is False:
        decoder = _DECODERS[shape] = _generate_decoder(ab, wanted, addr_size, offset_size, version)
    return decoder


def _fixed_value(attr: int, form: int, const: int, size: int, at) -> str:
    if form == F_IMPLICIT_CONST:
        expr = repr(const)
    elif form == F_FLAG_PRESENT:
        expr = "1"
    elif size == 1:
        expr = f"data[{at()}]"
    elif size == 16:
        expr = "None"
    else:
        expr = f"int.from_bytes(data[{at()}:{at(size)}], 'little')"
    return f"    out.append(({attr}, {form}, {expr}))"


def _generate_decoder(ab: Abbrev, wanted: frozenset | None, addr_size: int, offset_size: int, version: int):
    """A Python function decoding one abbreviation's attributes, generated once per abbreviation.

    Why: a function DIE is read tens of thousands of times per unit, and a generic loop over its
    attributes (dispatching on each form) is most of the cost of a cold lookup. The generated code
    reads fixed-size attributes at offsets known in advance and skips the unwanted ones in one step;
    ``CompUnit.read_attrs`` returns the same list by its generic path. None: a form we leave to that path.
    """
    lines = ["def _decode(data, pos):", "    out = []"]
    k = 0

    def at(extra: int = 0) -> str:
        return f"pos + {k + extra}" if k + extra else "pos"

    for attr, form, const in ab.attrs:
        take = wanted is None or attr in wanted
        size = form_size(form, addr_size, offset_size, version)
        if size is not None:
            if take:
                lines.append(_fixed_value(attr, form, const, size, at))
            k += size
            continue
        if k:
            lines.append(f"    pos += {k}")
            k = 0
        if form in ULEB_FORMS or form == F_SDATA:
            if take:
                reader = "sleb" if form == F_SDATA else "uleb"
                lines += [f"    v, pos = {reader}(data, pos)", f"    out.append(({attr}, {form}, v))"]
            else:
                lines += ["    while data[pos] & 0x80:", "        pos += 1", "    pos += 1"]
        elif form == F_STRING:
            lines.append("    e = data.index(b'\\0', pos)")
            if take:
                lines.append(f"    out.append(({attr}, {form}, data[pos:e].decode('utf-8', 'replace')))")
            lines.append("    pos = e + 1")
        elif form in (F_EXPRLOC, F_BLOCK):
            lines += ["    n, pos = uleb(data, pos)", "    pos += n"]
            if take:
                lines.append(f"    out.append(({attr}, {form}, None))")
        elif form in (F_BLOCK1, F_BLOCK2, F_BLOCK4):
            width = {F_BLOCK1: 1, F_BLOCK2: 2, F_BLOCK4: 4}[form]
            lines.append(f"    pos += {width} + int.from_bytes(data[pos:pos + {width}], 'little')")
            if take:
                lines.append(f"    out.append(({attr}, {form}, None))")
        else:
            return None  # DW_FORM_indirect or unknown: the generic reader handles (or reports) it
    lines.append(f"    return out, pos + {k}" if k else "    return out, pos")
    namespace = {"uleb": uleb, "sleb": sleb}
    exec("\n".join(lines), namespace)  # noqa: S102 - our own generated code, from the abbreviation table
    return namespace["_decode"]
