"""Recording one hit: the call path of the stopped thread, as a ``hit`` record in the session."""
from __future__ import annotations

import time

import gdb  # type: ignore[import-not-found]

from tracer.dispatch.classify import kernel_below_adapter
from tracer.gdb.agent import arguments, launcher, native
from tracer.gdb.agent.compiled import mark_compiled
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.evals import write_evals, write_not_evaluated
from tracer.gdb.agent.python_frames import FRAMES
from tracer.gdb.agent.reuse import STATS
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.stack import call_path
from tracer.gdb.agent.state import CACHES, STATE
from tracer.gdb.agent.torchscript import mark_torchscript


def thread_info() -> dict:
    try:
        th = gdb.selected_thread()
        info = {"id": th.num, "name": th.name, "lwp": th.ptid[1] or None, "pid": th.ptid[0] or None}
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
    CACHES.forget_library_frames(missing)


def kernels_by_caller(frames: list) -> None:
    """A frame the classifier left as runtime but that a boxing adapter calls is the kernel it wraps
    (a TORCH_LIBRARY kernel has a name of its own): relabel it, in a copy (cached frames are shared)."""
    for i in range(1, len(frames)):
        f = frames[i]
        if f["layer"] == "runtime" and f["kind"] == "native" and kernel_below_adapter("runtime", frames[i - 1]["function"]):
            frames[i] = dict(f, layer="kernel")


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


MAX_DEBUG_FRAMES = 16  # outer frames whose DWARF arguments are read, innermost first


def debug_values(newest, frames: list[dict]) -> list[dict]:
    """The arguments of the outer frames that have DWARF (a debug build's, not the interpreter's), read by
    name as gdb's ``bt`` shows them; ``not available`` where optimised out. Nothing on a release wheel:
    no recorded native frame outside the interpreter has a file, so this costs one pass over the frames."""
    # The cheap refusals inline, before a call: every Python frame has a file, and so has every interpreter
    # frame of an interpreter built with DWARF (pyenv's: 19 of a hot hit's 21 frames); on a release wheel
    # torch's frames have none. Calling _debug_frame for each was ~5% of a hit's stop() (cProfile).
    wanted = {f["address"]: i for i, f in enumerate(frames[:-1])
              if f["kind"] == "native" and f.get("layer") != "interpreter" and f.get("file") and _debug_frame(f)}
    if newest is None or not wanted:
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


def record_hit(spec: str | None, signal: str | None = None, allow_defer: bool = False,
               keyset: int | None = None, newest=None, keyset_note: str | None = None,
               launched_by: dict | None = None, defer_missing: bool = False, values: dict | None = None) -> bool:
    """Record the current stack; returns False if deferred: until missing symbols are loaded, or, for a
    parallel worker's hit, until its launching thread can be read (outside the breakpoint's stop).
    ``defer_missing``: only the first (a hit recorded again, after the libraries it asked for).
    ``values``: what the innermost frame carried (``arguments.read_entry``, the TLS key sets)."""
    FRAMES.left_over = False
    frames, truncated = call_path(newest)
    kernels_by_caller(frames)
    mark_compiled(frames)
    mark_torchscript(frames, newest)
    if keyset is not None and frames:
        frames[-1] = dict(frames[-1], keyset=keyset)
    elif keyset_note and frames:  # it takes one, which could not be read: why, never a guess
        frames[-1] = dict(frames[-1], keyset_note=keyset_note)
    if allow_defer or defer_missing:
        missing = missing_symbols(frames)
        if missing:
            defer_for(missing, spec)
            return False
    if allow_defer:
        if launcher.in_worker(frames):
            STATE.pending_spec = spec
            STATE.pending_launcher = True
            return False
    if FRAMES.left_over:  # only now: a deferred hit's first walk may end early, its second is whole
        OUT.warn("a hit had fewer C eval frames than Python frame groups: its outermost Python frames are missing")
    STATE.hits += 1
    STATE.asked_libs.clear()
    carried = [dict(values, frame=len(frames) - 1)] if values and frames else []
    if STATE.arguments:
        carried += debug_values(newest, frames)
    OUT.write_hit(STATE.hits, spec, thread_info(), time.time(), frames, truncated, signal, launched_by, carried)
    write_evals(STATE.hits, newest)
    STATS.write()
    return True
