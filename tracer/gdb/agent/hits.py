"""Recording one hit: the call path of the stopped thread, as a ``hit`` record in the session."""
from __future__ import annotations

import operator
import time

import gdb  # type: ignore[import-not-found]

from tracer.dispatch.classify import kernel_below_adapter
from tracer.gdb.agent import arguments, launcher, native
from tracer.gdb.agent.compiled import mark_compiled
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.osnames import OS_NAMES
from tracer.gdb.agent.evals import write_evals, write_not_evaluated
from tracer.gdb.agent.python_frames import FRAMES
from tracer.gdb.agent.reuse import STATS
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.stack import call_path
from tracer.gdb.agent.state import CACHES, STATE
from tracer.gdb.agent.torchscript import READER, loop_frames, mark_torchscript
from tracer.session.records import CachedFrame


_LAST_THREAD: list = [{}]  # the thread of the last hit recorded (repeat.py keeps it with the hit)


def last_thread() -> dict:
    return _LAST_THREAD[0]


def torchscript_quiet() -> bool:
    """Whether no TorchScript reading can change a hit: no layout to look for, or the last call path,
    looked at with one, passes through no interpreter loop."""
    if READER.layout is None:
        return not READER.file
    return _Seen.loops == []


def thread_info() -> dict:
    try:
        th = gdb.selected_thread()
        pid, lwp = th.ptid[0], th.ptid[1]
        name = OS_NAMES.name(th, pid, lwp) if pid and lwp else th.name
        info = {"id": th.num, "name": name, "lwp": lwp or None, "pid": pid or None}
    except (AttributeError, *READ_ERRORS):  # no thread selected: None
        return {"id": None, "name": None, "lwp": None}
    try:
        python_name = FRAMES.python_name(th)
    except READ_ERRORS:
        python_name = None
    if python_name is not None:  # threading's name (Thread(name=...)), next to the OS name
        info["python_name"] = python_name
    return info


def missing_symbols(frames: list[dict]) -> list[str]:
    """The libraries without symbols this stack passes through, not asked for before: gdb unwinds a
    frame there without its unwind tables, so the frames past it may be wrong. One asked for already
    and still without symbols is one gdb cannot read: asking again would never end."""
    libs = []
    for f in frames:
        if f["kind"] == "native" and not f.get("function") and f.get("library") and f["library"] not in libs:
            if f["library"] in STATE.cfi_libs or f["library"] in STATE.asked_libs:
                continue  # unwound from its CFI-only copy; pttrace names its frames (a fill record)
            if not native.symbols_loaded(f["library"]):
                libs.append(f["library"])
    return libs


def defer_for(missing: list[str], spec: str | None) -> None:
    """Record this hit once pttrace has given gdb these libraries' symbols (pttrace-rerecord)."""
    STATE.need_libs = missing
    STATE.asked_libs.update(missing)
    STATE.pending_spec = spec
    STATE.pending_thread = gdb.selected_thread()
    CACHES.forget_library_frames(missing)


def kernels_by_caller(frames: list) -> None:
    """A frame the classifier left as runtime but that a boxing adapter calls is the kernel it wraps
    (a TORCH_LIBRARY kernel has a name of its own): relabel it, in a copy (cached frames are shared)."""
    for i in range(1, len(frames)):
        f = frames[i]
        if f["layer"] == "runtime" and f["kind"] == "native" and kernel_below_adapter("runtime", frames[i - 1]["function"]):
            frames[i] = with_field(f, "layer", "kernel")


_copies: dict[tuple, tuple] = {}


def with_field(frame: dict, field: str, value) -> CachedFrame:
    """A copy of a shared frame with one field set, the same copy for the same frame and value at every hit
    (a CachedFrame: its JSON is encoded once, and the session's interning finds the hit's stack by the
    frames' identity, records.Interner)."""
    key = (id(frame), field, value)
    kept = _copies.get(key)
    if kept is not None and kept[0] is frame:
        return kept[1]
    copy = CachedFrame(frame)
    copy[field] = value
    if len(_copies) >= 4096:
        _copies.clear()
    _copies[key] = (frame, copy)
    return copy


def record_frames(spec: str | None, frames: list[dict], keyset: int | None = None,
                  keyset_note: str | None = None, values: dict | None = None) -> None:
    """Record a hit whose stack was read at a later stop (a TORCH_LIBRARY operator's shared templates:
    stash.py): ``frames``, outermost first, the innermost with the key set and ``values`` read at its entry."""
    frames = list(frames)
    kernels_by_caller(frames)
    if keyset is not None and frames:
        frames[-1] = dict(frames[-1], keyset=keyset)
    elif keyset_note and frames:
        frames[-1] = dict(frames[-1], keyset_note=keyset_note)
    STATE.hits += 1
    carried = [dict(values, frame=len(frames) - 1)] if values and frames else None
    OUT.write_hit(STATE.hits, spec, thread_info(), time.time(), frames, False, None, None, carried)
    write_not_evaluated(STATE.hits, "this hit's call path was read at a later stop")


_last_carried: list = [None, 0, None]  # values, frame index, the list made of them


def _carried(values: dict, frame: int) -> list[dict]:
    """The hit's values placed at its innermost frame: the same list as the hit before's when the values
    are the same dict (entry.py hands a hot hit the one kept), so the session's interning, which compares
    and splits them, finds them by identity (records.Interner)."""
    if _last_carried[0] is values and _last_carried[1] == frame:
        return _last_carried[2]
    out = [dict(values, frame=frame)]
    _last_carried[:] = [values, frame, out]
    return out


MAX_DEBUG_FRAMES = 16  # outer frames whose DWARF arguments are read, innermost first


def debug_frames(frames: list[dict]) -> dict[int, int]:
    """The outer frames ``debug_values`` reads: address -> index in ``frames``."""
    return {f["address"]: i for i, f in enumerate(frames[:-1])
            if f["kind"] == "native" and f.get("layer") != "interpreter" and f.get("file") and _debug_frame(f)}


def debug_values(newest, frames: list[dict], wanted_debug: dict | None = None) -> list[dict]:
    """The arguments of the outer frames that have DWARF (a debug build's, not the interpreter's), read by
    name as gdb's ``bt`` shows them; ``not available`` where optimised out. Nothing on a release wheel:
    no recorded native frame outside the interpreter has a file, so this costs one pass over the frames."""
    # The cheap refusals inline, before a call: every Python frame has a file, and so has every interpreter
    # frame of an interpreter built with DWARF (pyenv's: 19 of a hot hit's 21 frames); on a release wheel
    # torch's frames have none. Calling _debug_frame for each was ~5% of a hit's stop() (cProfile).
    if newest is None:
        return []
    wanted = dict(wanted_debug if wanted_debug is not None else debug_frames(frames))  # popped below
    if not wanted:
        return []
    out: list[dict] = []
    try:
        frame = newest.older()
        for _ in range(STATE.max_depth):
            if frame is None or not wanted or len(out) >= MAX_DEBUG_FRAMES:
                break
            # A function inlined at this pc is a gdb frame of its own, recorded as an inlined frame: the
            # recorded frame of this address is the function it is inlined into, gdb's next frame.
            index = None if frame.type() == gdb.INLINE_FRAME else wanted.pop(int(frame.pc()), None)
            if index is not None:
                args = arguments.read_debug(frame)
                if args:
                    out.append({"frame": index, "args": args})
            frame = frame.older()
    except READ_ERRORS:  # the walk ends where gdb cannot go further: what was read is kept
        pass
    return out


def _debug_frame(f: dict) -> bool:
    """A frame of code built with DWARF worth reading (not the interpreter's, not the system's libc)."""
    lib = f.get("library") or ""
    return (f.get("kind") == "native" and bool(f.get("file")) and not f.get("inlined")
            and f.get("address") is not None and f.get("layer") != "interpreter"
            and not lib.startswith(("/lib/", "/usr/lib/", "/lib64/")))


class _Seen:
    """The last call path call_path gave (the very frame objects) and what is worked out from its frames
    alone. A hot hit's frames are the objects of the hit before (cached walks and Python frame records), so
    one identity check spares the passes over its ~25 frames: the kernels a boxing adapter calls, dynamo's
    compiled frames, whether it is a pool worker's stack, which outer frames have DWARF arguments (together
    ~0.04 ms of a hit's ~0.25 ms stop(), thread CPU time, bench/hot_add.py)."""

    given: list = []
    made: list = []
    worker = False
    wanted: dict = {}
    nameless: list = []  # the frames missing_symbols looks at (native, a library, no function name)
    loops: list | None = None  # indexes of TorchScript's interpreter loop (None: not looked for yet)


def _worked_out(frames: list) -> tuple[list, bool, dict]:
    """(``frames`` with kernels relabelled and compiled frames marked, whether they are a pool worker's,
    ``debug_frames`` of them)."""
    seen = _Seen
    if frames and len(frames) == len(seen.given) and all(map(operator.is_, frames, seen.given)):
        return list(seen.made), seen.worker, seen.wanted
    given = list(frames)
    kernels_by_caller(frames)
    mark_compiled(frames)
    seen.given, seen.made = given, list(frames)
    seen.worker, seen.wanted = launcher.in_worker(frames), debug_frames(frames)
    seen.nameless = [f for f in frames if f["kind"] == "native" and not f.get("function") and f.get("library")]
    seen.loops = None
    return frames, seen.worker, seen.wanted


def _mark_torchscript(frames: list, newest) -> None:
    """mark_torchscript with the interpreter-loop frames of this call path found once (a pc lookup for
    each of a hot hit's ~25 frames cost ~0.01 ms a hit)."""
    if not READER.ready():
        return
    if _Seen.loops is None:
        _Seen.loops = loop_frames(frames)
    mark_torchscript(frames, newest, _Seen.loops)


def record_hit(spec: str | None, signal: str | None = None, allow_defer: bool = False,
               keyset: int | None = None, newest=None, keyset_note: str | None = None,
               launched_by: dict | None = None, defer_missing: bool = False, values: dict | None = None) -> bool:
    """Record the current stack; returns False if deferred: until missing symbols are loaded, or, for a
    parallel worker's hit, until its launching thread can be read (outside the breakpoint's stop).
    ``defer_missing``: only the first (a hit recorded again, after the libraries it asked for).
    ``values``: what the innermost frame carried (``arguments.read_entry``, the TLS key sets)."""
    FRAMES.left_over = False
    frames, truncated = call_path(newest)
    frames, worker, wanted_debug = _worked_out(frames)
    _mark_torchscript(frames, newest)
    if keyset is not None and frames:
        frames[-1] = with_field(frames[-1], "keyset", keyset)
    elif keyset_note and frames:  # it takes one, which could not be read: why, never a guess
        frames[-1] = with_field(frames[-1], "keyset_note", keyset_note)
    if allow_defer or defer_missing:
        missing = missing_symbols(_Seen.nameless)  # those of ``frames`` it would look at
        if missing:
            defer_for(missing, spec)
            return False
    if allow_defer:
        if worker:
            STATE.pending_spec = spec
            STATE.pending_thread = gdb.selected_thread()
            STATE.pending_launcher = True
            return False
    if FRAMES.left_over:  # only now: a deferred hit's first walk may end early, its second is whole
        OUT.warn("a hit had fewer C eval frames than Python frame groups: its outermost Python frames are missing")
    STATE.hits += 1
    STATE.asked_libs.clear()
    carried = _carried(values, len(frames) - 1) if values and frames else []
    if STATE.arguments:
        extra = debug_values(newest, frames, wanted_debug)
        if extra:
            carried = carried + extra  # never += : the list may be the one kept for the next hit
    thread = _LAST_THREAD[0] = thread_info()
    if thread.get("id") is None and not frames:  # never a hit shown as if it had an empty call path
        OUT.warn(f"hit #{STATE.hits} of {spec or 'a breakpoint'} was read while gdb had no thread selected: its "
                 "thread and call path are not known (the hit is counted, nothing of it is shown); run with "
                 "--log and report it")
    OUT.write_hit(STATE.hits, spec, thread, time.time(), frames, truncated, signal, launched_by, carried)
    write_evals(STATE.hits, newest)
    STATS.write()
    return True
