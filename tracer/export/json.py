"""The data contract (DESIGN.md section 4) as one JSON object, its frames and call paths written once.

Shape (contract 2; README "The JSON export" has it whole)::

    {"schema": 2, "session": {...}, "processes": [...], "breakpoints": [...],
     "frames": [{kind, function, short, library, address, file, line, layer, dispatch_key, ...}, ...],
     "stacks": [[frame index, ...outermost first], ...], "graphs"?: [{id, function, inputs, outputs, nodes}],
     "hits": [{seq, breakpoint, thread, time, stack, truncated?, signal?, launched_by?, evals?}, ...]}

A hit names its call path by its index in ``stacks``, a stack its frames by their index in ``frames``
(both from 0); a parallel worker's ``launched_by`` is ``{thread, stack?, why?}``; ``evals`` (``--eval``)
is ``[{expr, text | error}]``. A million hits of a hot
loop repeat a few dozen frames: each is written once, and a hit is one short line. The document is
written as it is made (``write``), a hit at a time from the session's hit table, never built whole.
"""
from __future__ import annotations

import io
import json
from typing import TextIO

from tracer.session.hit_table import HitTable, Site
from tracer.session.model import Frame, Session

CONTRACT = 2  # the version of this object's shape; the session file's own schema (records.SCHEMA) is apart
_FLUSH_EVERY = 2000  # hit lines joined before each write (~250 KB)


def _compact(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _value_key(f: Frame) -> tuple:
    return tuple(tuple(v) if isinstance(v, list) else v for v in f.__dict__.values())


class _Interned:
    """Frames and stacks numbered in the order they are first met, each encoded once."""

    def __init__(self, finder=None) -> None:
        self._finder = finder
        self.frames: list[str] = []
        self.stacks: list[str] = []
        self._frame_ids: dict[tuple, int] = {}
        self._stack_ids: dict[tuple, int] = {}
        self._by_list: dict[int, int] = {}  # id(list of frames) -> stack index: the sites of a stack share it
        self.values: list[str] = []  # what hits carried: [{frame, args, tls?, decision?}] per distinct site values
        self._values_ids: dict[tuple, int] = {}

    def frame(self, f: Frame) -> int:
        key = _value_key(f)
        index = self._frame_ids.get(key)
        if index is None:
            d = f.to_dict()
            if self._finder is not None and f.kind != "python" and not f.file:
                # Places found without DWARF (tracer.sources): definition / op / generated from.
                refs = self._finder.refs(f.function, f.library)
                if refs:
                    d["sources"] = [r.to_dict() for r in refs]
            index = self._frame_ids[key] = len(self.frames)
            self.frames.append(_compact(d))
        return index

    def stack(self, frames: list[Frame]) -> int:
        index = self._by_list.get(id(frames))
        if index is None:
            ids = tuple(self.frame(f) for f in frames)
            index = self._stack_ids.get(ids)
            if index is None:
                index = self._stack_ids[ids] = len(self.stacks)
                self.stacks.append(_compact(list(ids)))
            self._by_list[id(frames)] = index
        return index

    def carried(self, site: Site, own: tuple | None = None, varying: int | None = None) -> int:
        """The index of what a site's frames carried, each distinct description once; ``own``: a hit's
        values with what changes from hit to hit merged in (``HitTable.varyings[varying]``)."""
        key = (id(site.values), id(site.frames), varying)
        index = self._values_ids.get(key)
        if index is None:
            items = []
            for fv in (own if own is not None else site.values) or ():
                d = fv.to_dict(next((i for i, f in enumerate(site.frames) if f is fv.frame), None))
                if fv.decision is not None:
                    d["decision"] = decision_dict(fv.decision)
                items.append(d)
            text = _compact(items)
            index = self._values_ids[key] = len(self.values)
            self.values.append(text)
        return index

    def site(self, site: Site, values: bool = True) -> tuple[str, str]:
        """What a hit at ``site`` writes before its time and after it (``values``: its site's, else none:
        its hits have their own, ``write`` adds them)."""
        head = ',"breakpoint":%s,"thread":%s,"time":' % (_compact(site.breakpoint), _compact(site.thread.to_dict()))
        tail = ',"stack":%d' % self.stack(site.frames)
        if site.values and values:
            tail += ',"values":%d' % self.carried(site)
        if site.truncated:
            tail += ',"truncated":true'
        if site.signal:
            tail += ',"signal":' + _compact(site.signal)
        lb = site.launched_by
        if lb is not None:
            launch: dict = {"thread": lb.thread.to_dict() if lb.thread else None}
            if lb.frames:
                launch["stack"] = self.stack(lb.frames)
            if lb.why:
                launch["why"] = lb.why
            tail += ',"launched_by":' + _compact(launch)
        return head, tail + "}"


def _own_values(table: HitTable, interned: _Interned) -> dict[tuple[int, int | None], int]:
    """In a table whose hits carried values of their own (``HitTable.varyings``: data pointers, a small
    tensor's values): (site, varying) -> the index of each hit's whole description in ``values``;
    empty otherwise (each hit then names its site's)."""
    out: dict[tuple[int, int | None], int] = {}
    if table.vary is None:
        return out
    for i, row in enumerate(table.rows):
        varying = table.varying_of(i)
        if (row, varying) not in out and table.sites[row].values:
            out[(row, varying)] = interned.carried(table.sites[row], table[i].values if varying is not None else None,
                                                   varying)
    return out


def _array(out: TextIO, items) -> None:
    """A JSON array, one compact item a line."""
    first = True
    for item in items:
        out.write("[\n    " if first else ",\n    ")
        out.write(item)
        first = False
    out.write("[]" if first else "\n  ]")


def write(session: Session, out: TextIO, finder=None) -> None:
    """Write ``session`` to ``out`` as the contract, a batch of hits at a time."""
    table = session.hits if isinstance(session.hits, HitTable) else HitTable(session.hits)
    interned = _Interned(finder)
    own_values = _own_values(table, interned)
    sites = [interned.site(s, not own_values) for s in table.sites]  # first: finding sources may add warnings
    info = session.info.to_dict()
    if finder is not None and finder.notes:
        info["warnings"] = list(info.get("warnings") or []) + finder.notes
    session_obj = json.dumps(info, ensure_ascii=False, indent=2).replace("\n", "\n  ")
    out.write(f'{{\n  "schema": {CONTRACT},\n  "session": {session_obj},\n  "processes": ')
    _array(out, (_compact(p.to_dict()) for p in session.processes))
    out.write(',\n  "breakpoints": ')
    _array(out, (_compact(b.to_dict()) for b in session.breakpoints))
    out.write(',\n  "frames": ')
    _array(out, interned.frames)
    out.write(',\n  "stacks": ')
    _array(out, interned.stacks)
    if interned.values:  # a session recorded before values were read has none: its document is as it was
        out.write(',\n  "values": ')
        _array(out, interned.values)
    if session.graphs:  # TorchScript: each graph the interpreter ran, once; a frame's levels name it by id
        out.write(',\n  "graphs": ')
        _array(out, (_compact(g.to_dict()) for g in session.graphs.values()))
    out.write(',\n  "hits": ')
    if not len(table):
        out.write("[]")
    batch: list[str] = []
    sep = "[\n    "
    evals = session.evals  # --eval: each hit's values, inside its object
    for i, (seq, time, row) in enumerate(zip(table.seqs, table.times, table.rows)):
        head, tail = sites[row]
        own = own_values.get((row, table.varying_of(i))) if own_values else None
        if own is not None:  # after "stack", as a site's own values are
            cut = tail.index(",", 1) if "," in tail[1:] else len(tail) - 1
            tail = tail[:cut] + ',"values":%d' % own + tail[cut:]
        if evals and seq in evals:
            tail = tail[:-1] + ',"evals":' + _compact([v.to_dict() for v in evals[seq]]) + "}"
        batch.append(f'{sep}{{"seq":{seq}{head}{time!r}{tail}')
        sep = ",\n    "
        if len(batch) >= _FLUSH_EVERY:
            out.write("".join(batch))
            batch = []
    out.write("".join(batch))
    out.write("\n  ]\n}\n" if len(table) else "\n}\n")


def decision_dict(d) -> dict:
    """A hop's dispatch decision (``tracer.dispatch.decision.Decision``) in the contract's shape: raw sets,
    each with its decoded keys where the session has the target's numbering."""
    def keyset(bits):
        if bits is None:
            return None
        keys = d.names.get(bits)
        return {"raw": bits, "keys": list(keys)} if keys is not None else {"raw": bits}

    out = {"tensors": [{"argument": name, "key_set": keyset(ks)} for name, ks in d.tensors],
           "included": keyset(d.included), "excluded": keyset(d.excluded), "computed": keyset(d.computed),
           "how": d.how or None, "key": d.key, "passed_over": list(d.passed_over), "op": d.op, "kernel": d.kernel}
    if d.note:
        out["note"] = d.note
    return out


def render(session: Session, finder=None) -> str:
    buf = io.StringIO()
    write(session, buf, finder)
    return buf.getvalue()
