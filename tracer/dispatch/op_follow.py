"""``--op NAME --follow``, what the agent needs: the trigger every operator entry calls, the ``at::_ops``
entries of the libraries, and an ``at::_ops`` struct's operator (tracer/gdb/agent/follow.py,
tracer/recorder/follow.py)."""
from __future__ import annotations

import re

from tracer.dispatch.ops import LABEL_PREFIX, OpRef, OpResolution, TorchFacts

# Called by every operator entry (``at::_ops::X::call``, through Dispatcher::call's profiler check): a
# function of libtorch_cpu of its own, so that its caller names each operator a followed one calls.
FOLLOW_TRIGGER = "at::getStepCallbacksUnlessEmpty"


def follow_config(results: list[OpResolution], libraries: list[str]) -> dict:
    """What the agent needs to follow these operators: {roots: {struct: label}, known: [struct], trigger}."""
    from tracer import symbols

    roots: dict[str, str] = {}
    known: list[str] = []
    for res in results:
        label = LABEL_PREFIX + res.request.strip().removeprefix("aten::")
        for r in res.ops:
            known.append(r.struct)
            if not r.backward:
                roots.setdefault(r.struct, label)
    trigger = None
    for m in symbols.find_symbol("::" + FOLLOW_TRIGGER, libraries):
        if m.kind == "function" and not m.plt and not m.cold:
            trigger = {"library": m.library, "offset": m.address, "function": m.name}
            break
    return {"roots": roots, "known": known, "trigger": trigger, "entries": entry_ranges(libraries)}


_ENTRY_NAME = re.compile(r"^at::_ops::(\w+)::(call|redispatch)\(")


def entry_ranges(libraries: list[str]) -> dict[str, list[list]]:
    """{library: [[offset, size, struct, "call"|"redispatch"]...]} of every ``at::_ops`` entry (cold parts
    too), sorted: the agent names the operator a frame is in without gdb's symbols of that library."""
    from tracer import symbols

    out: dict[str, list[list]] = {}
    found = symbols.search_symbols(["_ZN2at4_ops"], libraries, pattern=r"^_ZN2at4_ops\d+\w+?(?:4call|10redispatch)E")
    for m in found:
        em = _ENTRY_NAME.match(m.name)
        if em and m.size:
            out.setdefault(m.library, []).append([m.address, m.size, em.group(1), em.group(2)])
    for ranges in out.values():
        ranges.sort()
    return out


def ref_of_struct(struct: str, facts: TorchFacts | None) -> OpRef | None:
    """``add_Tensor`` -> aten::add.Tensor: the operator overload an ``at::_ops`` struct is named after."""
    if facts is None or not facts.ops:
        return None
    for name, overloads in ((struct, facts.overloads(struct)),) + tuple(
            (struct[:i], facts.overloads(struct[:i])) for i in range(len(struct) - 1, 0, -1) if struct[i] == "_"):
        if not overloads:
            continue
        overload = "" if name == struct else struct[len(name) + 1:]
        for o, out in overloads:
            if o == overload:
                return OpRef(name, o, out)
    return None
