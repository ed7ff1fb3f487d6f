"""The hits of ``--op`` breakpoints as operator calls: the hops of one call, in order, by Python call site.

One call of an operator stops at each of its functions in turn (the entry, the autograd kernel, the
redispatch, the kernel wrapper, the native function...). Each of those stops is a hit with its own
stack, but they are one call: every later hop runs below the first (its stack holds the first hop's
stack, the first hop's function still active). So a hit joins the open call of its thread when the
call's first hop is an ancestor of it, and opens a new call otherwise.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from tracer.export import paths as P
from tracer.session.model import Frame, Hit

OP_LABEL = "op:"
FOLLOWED = ">"  # op:conv2d>convolution: a function of convolution, recorded inside conv2d (--follow-ops)
_ENTRY = re.compile(r"^at::_ops::\w+::call$")


def is_op_hit(hit: Hit) -> bool:
    return bool(hit.frames) and (hit.breakpoint or "").startswith(OP_LABEL)


def is_op_site(site) -> bool:
    """``is_op_hit`` for every hit at a ``hit_table.Site``."""
    return bool(site.frames) and (site.breakpoint or "").startswith(OP_LABEL)


def op_of_label(label: str | None) -> str | None:
    """``op:add_[AVX2]`` -> ``add_``."""
    if not label or not label.startswith(OP_LABEL):
        return None
    return label[len(OP_LABEL):].split("[", 1)[0]


def qualified(op: str) -> str:
    """``sigmoid`` -> ``aten::sigmoid``; an operator of one's own TORCH_LIBRARY keeps its namespace."""
    return op if "::" in op else "aten::" + op


def operator_of_label(label: str | None) -> str | None:
    """The operator a hop's function belongs to: ``op:conv2d>convolution`` -> ``convolution``."""
    op = op_of_label(label)
    return op.rsplit(FOLLOWED, 1)[-1] if op else None


def entries_on(frames: list[Frame]) -> int:
    """How many operator entries (``at::_ops::X::call``) a stack is inside: how deep its operator nests."""
    return sum(1 for f in frames if f.kind == "native" and _ENTRY.match(f.short or ""))


@dataclass
class Hop:
    """One stop of a call: the function it stopped in and the key set that function was called with."""

    hit: Hit
    previous_keys: tuple[str, ...] | None  # the key set of the nearest earlier hop that had one
    depth: int = 0  # operators it runs inside, counted from the call's own (--follow-ops's children: 1, 2...)

    @property
    def op(self) -> str | None:
        return operator_of_label(self.hit.breakpoint)

    @property
    def frame(self) -> Frame:
        return self.hit.frames[-1]

    @property
    def keys(self) -> tuple[str, ...] | None:
        return tuple(self.frame.keys) if self.frame.keys is not None else None

    def handled(self) -> list[str]:
        """Keys the previous hop had and this one does not: what was dispatched on in between."""
        if self.keys is None or self.previous_keys is None:
            return []
        return [k for k in self.previous_keys if k not in self.keys]

    def added(self) -> list[str]:
        if self.keys is None or self.previous_keys is None:
            return []
        return [k for k in self.keys if k not in self.previous_keys]

    def signature(self) -> tuple:
        f = self.frame
        return (f.function, f.dispatch_key, self.keys, self.hit.breakpoint)


@dataclass
class OpCall:
    hits: list[Hit] = field(default_factory=list)

    @property
    def first(self) -> Hit:
        return self.hits[0]

    @property
    def deepest(self) -> Hit:
        """The hop with the longest stack: the one whose path shows the most of the call."""
        return max(self.hits, key=lambda h: len(h.frames))

    def ops(self) -> list[str]:
        return list(dict.fromkeys(o for o in (op_of_label(h.breakpoint) for h in self.hits) if o))

    def followed(self) -> list[str]:
        """The operators --follow-ops recorded inside this call, in the order they were first met."""
        return list(dict.fromkeys(o.rsplit(FOLLOWED, 1)[-1] for o in self.ops() if FOLLOWED in o))

    def hops(self) -> list[Hop]:
        out, previous = [], None
        base = entries_on(self.first.frames) if self.followed() else 0
        for h in self.hits:
            hop = Hop(h, previous, max(0, entries_on(h.frames) - base) if base else 0)
            if hop.keys is not None:
                previous = hop.keys
            out.append(hop)
        return out

    def signature(self) -> tuple:
        return tuple(h.signature() for h in self.hops())


def _below(first: Hit, hit: Hit) -> bool:
    """Whether ``hit`` ran inside the call ``first`` stopped at the entry of."""
    a, b = first.frames, hit.frames
    n = len(a)
    if len(b) <= n or (first.thread.id != hit.thread.id):
        return False
    if any(x.key() != y.key() for x, y in zip(a[:-1], b[: n - 1])):
        return False
    return b[n - 1].kind == a[-1].kind and b[n - 1].function == a[-1].function


def group_calls(hits: Iterable[Hit]) -> list[OpCall]:
    """The operator calls of a session's ``--op`` hits, in the order they began."""
    calls: list[OpCall] = []
    open_calls: dict[object, OpCall] = {}
    for h in hits:
        if not is_op_hit(h):
            continue
        current = open_calls.get(h.thread.id)
        if current is not None and _below(current.first, h):
            current.hits.append(h)
            continue
        current = OpCall([h])
        calls.append(current)
        open_calls[h.thread.id] = current
    return calls


def call_site(call: OpCall) -> Frame | None:
    """The Python line the call came from: the innermost frame of one's own code, else the innermost."""
    frames = call.first.frames
    for f in reversed(frames):
        if f.kind == "python" and f.file and not f.file.startswith("<") and not P.in_packages(f.file):
            return f
    return P.innermost_python(frames)


@dataclass
class CallSite:
    """The calls made from one Python line, those that took the same hops with the same key sets together."""

    frame: Frame | None
    variants: list[list[OpCall]] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return sum(len(v) for v in self.variants)


def by_call_site(calls: list[OpCall]) -> list[CallSite]:
    sites: dict[tuple | None, CallSite] = {}
    for call in calls:
        frame = call_site(call)
        key = (frame.file, frame.line) if frame is not None else None
        site = sites.setdefault(key, CallSite(frame))
        sig = call.signature()
        for variant in site.variants:
            if variant[0].signature() == sig:
                variant.append(call)
                break
        else:
            site.variants.append([call])
    return list(sites.values())
