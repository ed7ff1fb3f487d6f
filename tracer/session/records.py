"""The session file's records: what each holds, how it is written, how it is read back.

One module for both sides of the file. The agent inside gdb writes ``hit``, ``breakpoint`` and
``warning`` records with it; pttrace writes the others with it; every reader (``storage.load``, the
recorder's tail of a live session in ``recorder/tailer.py``) decodes with it. It imports
the standard library only (and ``tracer.text.escape``, which does too): gdb's Python runs it.

A session file is JSON lines, each one record, each written with one ``write()`` on an ``O_APPEND``
descriptor (several writers never interleave, and a file cut anywhere keeps every complete line):

``header``         ``{"schema": N, "session": {SessionInfo}}``, the first line
``breakpoint``     ``{spec, number, locations: [...], hits, pending, enabled}``, again when it changes;
                   ``{spec, removed: true}`` once it is removed (readers forget it)
``frame``          ``{id, frame: {kind, function, short, library, address, file, line, layer, ...}}``:
                   each distinct frame once (schema 2)
``stack``          ``{id, frames: [frame ids, outermost first], truncated?}``: each distinct call path once
``site``           ``{id, breakpoint, thread: {id, name, lwp, python_name?}, stack, args?}``: each distinct
                   (breakpoint, thread, stack, args) once
``args``           ``{id, frames: [{frame, args: [...], tls?}]}``: what frames of a hit carried, each distinct
                   description once (schema 2, additive): ``frame`` its index in the hit's stack
                   (outermost first, as recorded), ``args`` one object a parameter (``{type, name?, where,
                   value? | keyset? | tensor? | tensors? | none? | address? | unreadable?, ...}``:
                   tracer/gdb/agent/argvalues.py), ``tls`` the thread's local dispatch key sets as stored
                   (``[included, excluded]``, each XORed with torch's defaults: storage decodes them). A
                   site refers to it (``site.args``): hits that carried the same values share a site.
                   What changes from hit to hit (``VARYING``: a tensor's ``data_ptr`` and ``impl``, a small
                   tensor's ``values``, an object's ``address``) is not in it: the argument or tensor it
                   was taken from holds ``"vary": i`` instead, and the hit names a ``vary`` record
``vary``           ``{id, items: [{field: value}, ...]}`` (additive): the fields ``VARYING`` took out of a
                   hit's ``args``, ``items[i]`` for the object marked ``"vary": i``; each distinct list once
                   (a loop over one tensor writes one; a loop whose small tensors change value, one a hit)
``hit``            schema 2: ``{seq, time, site, vary?, signal?, launched_by?}``, after the definitions it
                   refers to (the same ``write()``: a hit is never on disk before them). Schema 1:
                   ``{seq, breakpoint, thread, time, frames: [...], truncated?, signal?, launched_by?}``;
                   both load. ``launched_by``
                   (a parallel worker's hit): the thread that launched its region and its stack at
                   that moment (schema 2: ``{thread, stack}``; 1: ``{thread, frames}``), or
                   ``{thread: null, why}``.
``process``        ``{pid, ppid?, argv?, role?, rank?, worker?, inferior?, started?, ended?, exit_code?,
                   signal?, host?}``: what is known of one process of the run, again when more is known
                   (readers merge the records of one pid; a later value wins). A site's thread names the
                   process its hits ran in (``thread.pid``); a session without any is one process.
``warning``        ``{message}``: what pttrace could not see or follow
``dispatch_keys``  the target torch's DispatchKeySet numbering (``storage.decode_keyset``)
``fill``           ``{frames: [[library, offset, caller, {function, short, layer, dispatch_key, file,
                   line, inlined?}], ...]}``: names for frames recorded by library and offset
                   (``model.Frame.fill_key``); a pc in inlined code has ``inlined``, the frames of the
                   inlined functions (``[{function, short, layer, dispatch_key, file, line}]``, innermost
                   last), inserted after its frame (``model.fill_path``), whose file:line is then the call
                   of the outermost inlined function
``end``            ``{status, exit_code, ended, ...}``; a file without one is ``interrupted``

A hot breakpoint's hit is one ``hit`` line of ~60 bytes: its frames, stack and site were written at
its first hit (bench/RESULTS.md, "A million hits").
"""
from __future__ import annotations

import json
import operator

from tracer.text.escape import clean, json_line_may_hide_controls

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: `pttrace run` reads LAYERS before gdb starts, where typing was ~10% of its work
    from typing import IO, Any, Callable, Iterator

# The layers a frame is classified into (tracer.dispatch.classify), innermost concern last; here, in a module
# of the standard library only, so that `pttrace run` checks --layer before gdb starts without importing the
# session model (~25-80 ms, which the way to gdb's start waited for).
LAYERS = ("python", "interpreter", "binding", "torchscript", "compiler", "dispatcher", "autograd", "kernel", "parallel",
          "generated", "runtime")
SCHEMA = 2  # 2: frames, stacks and sites interned; 1: every hit with its frames

HEADER = "header"
BREAKPOINT = "breakpoint"
HIT = "hit"
WARNING = "warning"
DISPATCH_KEYS = "dispatch_keys"
FILL = "fill"
END = "end"
FRAME = "frame"
STACK = "stack"
SITE = "site"
PROCESS = "process"
ARGS = "args"
VARY = "vary"
# An argument's or tensor's fields that change from hit to hit while its shape, dtype and key set do not:
# kept out of the interned ``args`` record (a loop over fresh small tensors would write one a hit).
VARYING = ("data_ptr", "impl", "values", "address")


class BadRecord(ValueError):
    """A line that is not a session record; ``why`` says what it is instead."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # built once: json.dumps with
# options builds an encoder at every call, and the agent encodes a hit's argument values at every hit


def _dumps(value: Any) -> str:
    return _ENCODE(value)


def encode(record: dict[str, Any]) -> bytes:
    """One JSON line. Names that are not valid UTF-8 (surrogate-escaped) are kept as \\u escapes."""
    text = _dumps(record) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(record, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


class CachedFrame(dict):
    """A frame shared by many hits (the agent caches them per pc); ``text`` keeps its JSON, encoded once
    (interning looks frames up by it)."""

    __slots__ = ("text",)
    text: str


def frame_text(frame: dict[str, Any]) -> str:
    text = getattr(frame, "text", None)
    if text is None:
        text = _dumps(frame)
        if isinstance(frame, CachedFrame):
            frame.text = text
    return text


def warning(message: str) -> dict[str, Any]:
    return {"type": WARNING, "message": message}


def breakpoint(spec: str, number: int | None, locations: list, pending: bool, enabled: bool,
               hits: int = 0) -> dict[str, Any]:
    return {"type": BREAKPOINT, "spec": spec, "number": number, "locations": locations, "hits": hits,
            "pending": pending, "enabled": enabled}


def process(pid: int, **facts: Any) -> dict[str, Any]:
    """What is known of one process (``None`` values left out): see ``process`` above."""
    return {"type": PROCESS, "pid": pid, **{k: v for k, v in facts.items() if v is not None}}


def breakpoint_removed(spec: str) -> dict[str, Any]:
    return {"type": BREAKPOINT, "spec": spec, "removed": True}


# --------------------------------------------------------------------------------------------
# Interning (schema 2): each distinct frame, stack and site written once
# --------------------------------------------------------------------------------------------
def split_varying(values: list) -> tuple[list, list[dict]]:
    """``values`` (``args`` above) as (what hits share, what changes from hit to hit): each argument or
    tensor that had ``VARYING`` fields is a copy without them, marked ``"vary": i``, and ``items[i]``
    holds them. The dicts given are not changed (the agent may keep them)."""
    items: list[dict] = []

    def take(d: dict) -> dict:
        moved = {k: d[k] for k in VARYING if k in d}
        if not moved:
            return d
        kept = d.copy()
        for k in moved:
            del kept[k]
        kept["vary"] = len(items)
        items.append(moved)
        return kept

    shared = []
    for fv in values:
        args = fv.get("args")
        if not args:
            shared.append(fv)
            continue
        new_args = []
        for arg in args:
            if type(arg) is not dict:
                new_args.append(arg)
                continue
            t, ts = arg.get("tensor"), arg.get("tensors")
            if type(t) is dict:
                arg = dict(arg, tensor=take(t))
            if type(ts) is list:
                arg = dict(arg, tensors=[take(x) if type(x) is dict else x for x in ts])
            new_args.append(take(arg))
        shared.append(dict(fv, args=new_args))
    return shared, items


def merge_varying(arg: dict, items: list) -> dict:
    """An argument of a shared ``args`` record with a hit's ``vary`` items put back (``split_varying``
    undone); the same dict when nothing in it was taken out."""
    t, ts = arg.get("tensor"), arg.get("tensors")
    if "vary" not in arg and not (type(t) is dict and "vary" in t) and not (
            type(ts) is list and any(type(x) is dict and "vary" in x for x in ts)):
        return arg

    def back(d: dict) -> dict:
        i = d.get("vary")
        if type(i) is not int:
            return d
        out = {k: v for k, v in d.items() if k != "vary"}
        if 0 <= i < len(items) and type(items[i]) is dict:
            out.update(items[i])
        else:
            out["unreadable"] = out.get("unreadable") or "this hit's own fields (data pointer, values) are missing"
        return out

    merged = back(arg)
    arg = dict(arg) if merged is arg else merged  # never the site's own dict: its hits share it
    if type(t) is dict:
        arg["tensor"] = back(t)
    if type(ts) is list:
        arg["tensors"] = [back(x) if type(x) is dict else x for x in ts]
    return arg


class Interner:
    """The agent's side of schema 2: a hit becomes one small line, after the definitions it is the
    first to need. Everything goes out in one ``write()``, so a hit is never on disk before them."""

    def __init__(self) -> None:
        self._frames: dict[str, int] = {}  # frame JSON -> id
        self._stacks: dict[tuple, int] = {}  # (frame ids, truncated) -> id
        self._sites: dict[tuple, int] = {}  # (breakpoint, thread id, name, lwp, python name, pid, stack id, args id) -> id
        self._args: dict[str, int] = {}  # args JSON -> id
        self._vary: dict[str, int] = {}  # vary items JSON -> id (the latest VARY_KEPT only)
        self._vary_next = 1
        # The last description and vary list encoded, with their ids: a hot loop repeats them hit after hit.
        self._last_args: tuple[Any, int | None] = (None, None)
        self._last_vary: tuple[Any, int | None] = (None, None)
        self._new: list[tuple[dict, Any]] = []  # what the last encode_hit defined: undone if it is not written
        # The last call path's frames (the very objects) and its id: a hot hit's frames are the cached ones
        # of the hit before, so an identity check spares looking up each frame's JSON.
        self._last_stack: tuple[list, bool, int] | None = None
        self._last_split: tuple[Any, list, list] = (None, [], [])  # values given, split_varying's result
        # The end of the last hit's line after its time ('"site":N,"vary":M}'), when it has no signal nor
        # launcher: the agent writes an exact repeat of that hit with it (tracer/gdb/agent/repeat.py).
        self.last_tail: str | None = None

    def rollback(self) -> None:
        """The last hit was not written (disk full): what it defined is not in the file either."""
        for table, key in self._new:
            table.pop(key, None)
        self._new = []
        self._last_args = self._last_vary = (None, None)  # they may name what was not written
        self._last_stack = None
        self.last_tail = None

    def _stack(self, frames: list, truncated: bool, out: list[str]) -> int:
        """The id of this call path, its frame and stack records added to ``out`` if new."""
        last = self._last_stack
        if last is not None and last[1] == truncated and len(last[0]) == len(frames) \
                and all(map(operator.is_, frames, last[0])):
            return last[2]
        ids = []
        new = self._new
        known = self._frames
        for f in frames:
            text = frame_text(f)
            fid = known.get(text)
            if fid is None:
                fid = known[text] = len(known) + 1
                new.append((known, text))
                out.append('{"type":"frame","id":%d,"frame":%s}' % (fid, text))
            ids.append(fid)
        key = (tuple(ids), truncated)
        sid = self._stacks.get(key)
        if sid is None:
            sid = self._stacks[key] = len(self._stacks) + 1
            new.append((self._stacks, key))
            stack_rec = {"type": STACK, "id": sid, "frames": ids}
            if truncated:
                stack_rec["truncated"] = True
            out.append(_dumps(stack_rec))
        self._last_stack = (list(frames), truncated, sid)
        return sid

    VARY_KEPT = 256  # distinct vary lists remembered: a loop over fresh tensors makes one a hit, never repeated

    def _varying(self, items: list[dict], out: list[str]) -> int | None:
        """The id of this hit's ``vary`` items, their record added to ``out`` if new."""
        if not items:
            return None
        if items == self._last_vary[0]:  # a loop over one tensor: as the hit before (a compare, not an encode)
            return self._last_vary[1]
        text = _dumps(items)
        vid = self._vary.get(text)
        if vid is None:
            if len(self._vary) >= self.VARY_KEPT:
                self._vary.clear()
            vid = self._vary[text] = self._vary_next
            self._vary_next += 1
            self._new.append((self._vary, text))
            out.append('{"type":"vary","id":%d,"items":%s}' % (vid, text))
        self._last_vary = (items, vid)
        return vid

    def _values(self, values: list | None, out: list[str]) -> int | None:
        """The id of this ``args`` description, its record added to ``out`` if new."""
        if not values:
            return None
        if values == self._last_args[0]:  # the hit before's: a compare, not an encode
            return self._last_args[1]
        text = _dumps(values)
        aid = self._args.get(text)
        if aid is None:
            aid = self._args[text] = len(self._args) + 1
            self._new.append((self._args, text))
            out.append('{"type":"args","id":%d,"frames":%s}' % (aid, text))
        self._last_args = (values, aid)
        return aid

    def encode_hit(self, seq: int, breakpoint: str | None, thread: dict[str, Any], time: float, frames: list,
                   truncated: bool = False, signal: str | None = None, launched_by: dict | None = None,
                   values: list | None = None) -> bytes:
        """The hit's line, after the records of what it is the first to refer to. ``values``: what
        frames carried (``args`` above), interned with the site."""
        out: list[str] = []
        self._new = []
        sid = self._stack(frames, truncated, out)
        items: list[dict] = []
        if values:
            if values is self._last_split[0]:  # the very list of the hit before (the agent keeps it)
                values, items = self._last_split[1], self._last_split[2]
            else:
                given = values
                values, items = split_varying(values)
                self._last_split = (given, values, items)
        aid = self._values(values, out)
        vid = self._varying(items, out)
        key = (breakpoint, thread.get("id"), thread.get("name"), thread.get("lwp"), thread.get("python_name"),
               thread.get("pid"), sid, aid)
        site_id = self._sites.get(key)
        if site_id is None:
            site_id = self._sites[key] = len(self._sites) + 1
            self._new.append((self._sites, key))
            site = {"type": SITE, "id": site_id, "breakpoint": breakpoint, "thread": thread, "stack": sid}
            if aid is not None:
                site["args"] = aid
            out.append(_dumps(site))
        tail = '"site":%d' % site_id
        if vid is not None:
            tail += ',"vary":%d' % vid
        self.last_tail = None if signal or launched_by is not None else tail + "}"
        rec = '{"type":"hit","seq":%d,"time":%r,' % (seq, time) + tail
        if signal:
            rec += ',"signal":' + _dumps(signal)
        if launched_by is not None:
            launch = {k: v for k, v in launched_by.items() if k != "frames"}
            if launched_by.get("frames"):
                launch["stack"] = self._stack(launched_by["frames"], False, out)
            rec += ',"launched_by":' + _dumps(launch)
        out.append(rec + "}")
        text = "\n".join(out) + "\n"
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:  # a name that is not UTF-8: as \\u escapes, as encode() does
            return text.encode("utf-8", "backslashreplace")


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------
def decode_json(raw: bytes) -> Any:
    """One JSON line from a session or the agent, every string in it safe to print
    (``escape.visible``: no control character reaches a terminal or a markdown file); ``BadRecord``
    if it is not JSON, or nested too deeply to be a record."""
    try:
        try:
            text, unsafe = raw.decode("utf-8"), json_line_may_hide_controls(raw)
        except UnicodeDecodeError:  # not UTF-8: the bytes are kept as surrogates, then spelled out
            text, unsafe = raw.decode("utf-8", errors="surrogateescape"), True
        value = json.loads(text)
        return clean(value) if unsafe else value
    except RecursionError:
        raise BadRecord("nested too deeply to be a session record") from None
    except ValueError:
        raise BadRecord("not valid JSON") from None


def decode(raw: bytes) -> dict[str, Any]:
    """One line back into its record; ``BadRecord`` if it is not one. The values' types are checked
    where the record becomes the model (``model.*.from_dict``, ``storage.load``)."""
    rec = decode_json(raw)
    if not isinstance(rec, dict) or not isinstance(rec.get("type"), str):
        raise BadRecord("not a session record")
    return rec


HIT_PREFIX = b'{"type":"hit"'  # how every hit line starts, as encode and Interner write it


def read(fh: IO[bytes], skip: bytes | None = None) -> Iterator[tuple[int, dict[str, Any] | BadRecord]]:
    """Each non-blank line of a file: (line number, its record or the ``BadRecord`` it is); lines
    starting with ``skip`` are passed over undecoded. A last line without its line break that is not a
    whole record is one still being written (or cut by a crash): passed over, not damage."""
    for lineno, raw in enumerate(fh, 1):
        if not raw.strip() or (skip is not None and raw.startswith(skip)):
            continue
        try:
            yield lineno, decode(raw)
        except BadRecord as bad:
            if not raw.endswith(b"\n"):
                break
            yield lineno, bad


class Tail:
    """Reads a file that is still being written: complete lines only, the cut last line kept for later.
    A chunk at a time: a million-hit session is never all in memory."""

    CHUNK = 1 << 20

    def __init__(self) -> None:
        self.pos = 0
        self._partial = b""

    def lines(self, fh: IO[bytes]) -> Iterator[bytes]:
        fh.seek(self.pos)
        while True:
            chunk = fh.read(self.CHUNK)
            if not chunk:
                return
            self.pos += len(chunk)
            lines = (self._partial + chunk).split(b"\n")
            self._partial = lines.pop()
            yield from lines


class Reader:
    """Reads records in file order, keeping the frames, stacks and sites they define: an interned hit
    comes back whole, ``{seq, breakpoint, thread, time, frames, truncated, signal, stack, site,
    launched_by?}``, its
    ``frames`` list shared by every hit of its stack (never change it; a frame changed in place is
    changed for all of them). ``make_frame`` turns a frame's dict into what the caller keeps."""

    def __init__(self, make_frame: Callable[[dict[str, Any]], Any] = lambda d: d) -> None:
        self.make_frame = make_frame
        self.frames: dict[int, Any] = {}
        self.stacks: dict[int, tuple[list, bool]] = {}  # id -> (frames outermost first, truncated)
        self.sites: dict[int, tuple[Any, Any, int]] = {}  # id -> (breakpoint, thread, stack id)
        self.args: dict[int, list] = {}  # args id -> [{frame, args, tls?}]
        self.site_args: dict[int, int] = {}  # site id -> its args id
        self.vary: dict[int, list] = {}  # vary id -> its items

    def feed(self, rec: dict[str, Any]) -> dict[str, Any] | None:
        """The record, complete; None for a frame or site definition (kept for the hits that follow).
        ``BadRecord`` for a hit or definition that refers to one this file does not define."""
        kind = rec["type"]
        if kind == HIT:
            site_id = rec.get("site")
            if site_id is None:
                return rec  # schema 1: the hit carries its frames
            site = self.sites.get(site_id)
            if site is None:
                raise BadRecord(f"a hit of an undefined site {site_id}")
            breakpoint, thread, stack_id = site
            frames, truncated = self.stacks[stack_id]
            out = {"type": HIT, "seq": rec["seq"], "breakpoint": breakpoint, "thread": thread,
                   "time": rec.get("time"), "frames": frames, "truncated": truncated,
                   "signal": rec.get("signal"), "stack": stack_id, "site": site_id}
            aid = self.site_args.get(site_id)
            if aid is not None:
                out["values"], out["values_id"] = self.args[aid], aid
            vid = rec.get("vary")
            if vid is not None:
                if vid not in self.vary:
                    raise BadRecord(f"a hit of undefined vary items {vid}")
                out["vary"], out["vary_id"] = self.vary[vid], vid
            launch = rec.get("launched_by")
            if launch is not None:
                launch = dict(launch)
                launch_stack = launch.pop("stack", None)
                if launch_stack is not None:
                    if launch_stack not in self.stacks:
                        raise BadRecord(f"a launch of an undefined stack {launch_stack}")
                    launch["frames"] = self.stacks[launch_stack][0]
                out["launched_by"] = launch
            return out
        if kind == FRAME:
            self.frames[int(rec["id"])] = self.make_frame(rec["frame"])
            return None
        if kind == STACK:
            try:
                frames = [self.frames[int(i)] for i in rec["frames"]]
            except KeyError as exc:
                raise BadRecord(f"a stack of an undefined frame {exc.args[0]}") from None
            self.stacks[int(rec["id"])] = (frames, bool(rec.get("truncated")))
            return rec
        if kind == SITE:
            stack_id = int(rec["stack"])
            if stack_id not in self.stacks:
                raise BadRecord(f"a site of an undefined stack {stack_id}")
            self.sites[int(rec["id"])] = (rec.get("breakpoint"), rec.get("thread"), stack_id)
            aid = rec.get("args")
            if aid is not None:
                if aid not in self.args:
                    raise BadRecord(f"a site of undefined args {aid}")
                self.site_args[int(rec["id"])] = aid
            return None
        if kind == ARGS:
            carried = rec.get("frames")
            if type(carried) is not list or not all(type(f) is dict and type(f.get("frame")) is int
                                                    and type(f.get("args", [])) is list for f in carried):
                raise BadRecord("an args record whose frames are not [{frame, args}]")
            self.args[int(rec["id"])] = carried
            return None
        if kind == VARY:
            items = rec.get("items")
            if type(items) is not list or not all(type(x) is dict for x in items):
                raise BadRecord("a vary record whose items are not [{field: value}]")
            self.vary[int(rec["id"])] = items
            return None
        return rec


# --------------------------------------------------------------------------------------------
# Fill records: names for frames recorded by library and offset (``model.Frame.fill_key``, ``fill``)
# --------------------------------------------------------------------------------------------
FILL_NAME_FIELDS = ("function", "short", "layer", "dispatch_key")
