"""The call path of a stopped thread: gdb's native unwind with each eval frame replaced by the Python
frames it runs, and the caches that spare a hot breakpoint most of that work.

Two reuse caches: the frames older than the outermost ``PyEval_EvalCode`` (the interpreter's start-up,
the same at every hit of a thread) are unwound once per activation; and a whole walk is reused while its
return addresses are all still in their slots (``reuse.py``).
"""
from __future__ import annotations

import sys

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent import bulk, loader_entry, native, regs, reuse
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.python_frames import FRAMES
from tracer.gdb.agent.reuse import EVAL, SLOT, STATS
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.shared_walks import SHARED
from tracer.gdb.agent.state import CACHES, STATE

EVAL_FRAME = "_PyEval_EvalFrameDefault"
ANCHOR = "PyEval_EvalCode"  # the interpreter runs the main module from here: only C start-up below
_ORDER = sys.byteorder
_TAILCALL = getattr(gdb, "TAILCALL_FRAME", -1)


def _suffix_slots(frames: list):
    """Where the return addresses of these older frames sit on the stack, and their values.

    A frame's pc is the return address its callee pushed just below the frame's sp (x86-64; on
    other machines the check below fails and the suffix is simply not reused)."""
    slots = []
    for f in frames:
        try:
            slots.append((int(f.read_register("sp")) - SLOT, f.pc()))
        except READ_ERRORS:
            return None
    if not slots:
        return None
    lo = min(a for a, _ in slots)
    hi = max(a for a, _ in slots) + SLOT
    if hi - lo > 1 << 16:
        return None
    return lo, hi - lo, tuple((a - lo, pc.to_bytes(SLOT, _ORDER)) for a, pc in slots)


def _suffix_still_valid(slots) -> bool:
    """Every return address of the cached suffix is still in its slot: the same callers, live."""
    lo, size, checks = slots
    try:
        mem = bytes(gdb.selected_inferior().read_memory(lo, size))
    except READ_ERRORS:
        return False
    return all(mem[off:off + SLOT] == want for off, want in checks)


def _reuse_walk(walk: reuse.Walk, thread) -> tuple[list, bool] | None:
    """The frames of this hit (outermost first, cut at max_depth) from a cached walk, and whether they
    were cut; None if the stack is not that walk's any more."""
    if not _slot_regions(walk).unchanged(gdb.selected_inferior()):
        return None
    groups: list | tuple | None = ()  # a walk without eval frames has no Python frames to put in
    if walk.n_eval:
        groups = FRAMES.thread_groups(thread, walk.n_eval)
        if groups is None:
            return None
    max_depth = STATE.max_depth
    last = _LAST
    if last[0] is walk and last[1] is groups and last[2] == max_depth:
        return list(last[3]), last[4]
    frames = reuse.assemble(walk, groups)
    truncated = len(frames) > max_depth
    if truncated:
        del frames[max_depth:]
    frames.reverse()
    _LAST[:] = [walk, groups, max_depth, tuple(frames), truncated]
    return frames, truncated


def _slot_regions(walk: reuse.Walk) -> bulk.Regions:
    """The walk's return-address slots as regions of memory and the bytes they must hold: checked with the
    stop's other reads in one ``process_vm_readv`` (bulk.StopBatch), not one gdb read of the stack."""
    kept = _SLOTS.get(id(walk))
    if kept is not None and kept[0] is walk:
        return kept[1]
    regions = bulk.Regions(tuple((walk.lo + off, SLOT) for off, _want in walk.checks),
                           b"".join(want for _off, want in walk.checks))
    if len(_SLOTS) >= reuse.MAX_WALKS:
        _SLOTS.clear()
    _SLOTS[id(walk)] = (walk, regions)
    return regions


_SLOTS: dict[int, tuple] = {}  # id(walk) -> (the walk, its slots' regions)


# The last reused hit's walk and Python groups (the very objects: thread_groups hands out the kept ones
# while their memory is unchanged) and the call path made of them: a hot loop's next hit is a copy of it.
_LAST: list = [None, None, 0, (), False]


def call_path(newest=None) -> tuple[list[dict], bool]:
    """Frames of the selected thread, outermost first, and whether the walk was cut at max_depth.
    ``newest``: gdb.newest_frame(), when the caller has it already (asking again costs a lookup)."""
    py = FRAMES.available()
    try:
        f = newest if newest is not None and newest.is_valid() else gdb.newest_frame()
    except gdb.error:
        return [], False
    key = None
    image = None  # a fork child's image, looked up when its own walks have none of this stack (shared_walks.py)
    if STATS.enabled:
        thread = gdb.selected_thread()
        key = _stack_key(thread, f)
        walk = CACHES.walks.get(key) if key is not None else None
        if walk is None and key is not None:
            image = SHARED.image()
            walk = SHARED.get(image, key[1], key[2])
        if walk is not None and key is not None:
            reused = _reuse_walk(walk, thread)
            if reused is not None:
                STATS.reused += 1
                CACHES.walks[key] = walk
                return reused
            STATS.rejected += 1
            CACHES.walks.pop(key, None)
        STATS.walked += 1
    f = regs.real(f)  # a walk asks gdb for every frame: frame #0 is gdb's too
    frames, truncated, entries = _walk(f, py, key is not None)
    if key is not None and entries is not None and not truncated:
        walk = reuse.make_walk(entries)
        if walk is not None:
            if len(CACHES.walks) >= reuse.MAX_WALKS:
                CACHES.walks.clear()
            CACHES.walks[key] = walk
            SHARED.put(image, key[1], key[2], walk)
    frames.reverse()
    return frames, truncated


def _slot(f, pc: int, prev_inline: bool) -> tuple[object, bool, bool]:
    """(the frame's return-address slot or None, whether the next frame is inlined in this one, whether
    the walk stays reusable). A frame whose caller is a plain call has its pc in the slot below its sp.
    gdb makes up an inlined frame (same pc and sp as the frame it is inlined in) and a tail-call frame
    (from the DWARF call sites at the pcs around it: nothing on the stack) from their neighbours; any
    other kind (a signal frame) is not reused."""
    ftype = f.type()
    if ftype == _TAILCALL:
        return None, False, True
    if ftype not in (gdb.NORMAL_FRAME, gdb.INLINE_FRAME):
        return None, prev_inline, False
    slot = None if prev_inline else (int(f.read_register("sp")) - SLOT, pc.to_bytes(SLOT, _ORDER))
    return slot, ftype == gdb.INLINE_FRAME, True


def _stack_key(thread, f) -> tuple[int, int, int] | None:
    """(thread, pc, sp) of a frame: an activation, as the caches of walks and suffixes know it."""
    try:
        return thread.global_num, f.pc(), int(f.read_register("sp"))
    except READ_ERRORS:
        return None


def _extend_with_suffix(frames: list, entries: list | None, cached: tuple,
                        max_depth: int) -> tuple[bool, list | None]:
    """Put a cached start-up suffix (``CACHES.suffix``) at the old end of ``frames``: whether that cut
    them at max_depth, and the walk's reuse entries with the suffix's slots (None: not reusable)."""
    suffix = cached[0]
    room = max_depth - len(frames)
    if len(suffix) > room:
        frames.extend(suffix[:room])
        return True, entries
    frames.extend(suffix)
    if entries is not None:
        lo, _size, checks = cached[1]
        if len(checks) != len(suffix):
            return False, None
        entries.extend((x, (lo + off, want)) for x, (off, want) in zip(suffix, checks))
    return False, entries


def _remember_suffix(frames: list, key: tuple[int, int, int], start: int, suffix_gdb: list) -> None:
    """Cache the frames from ``start`` on (those older than the outermost ``PyEval_EvalCode``, at
    ``key``) for the next hits of this activation, if they are all plain native start-up frames."""
    if all(x["kind"] == "native" and x["function"] not in (EVAL_FRAME, ANCHOR) for x in frames[start:]):
        slots = _suffix_slots(suffix_gdb)
        if slots is not None:
            CACHES.suffix[key] = (frames[start:], slots)


def _walk(f, py: bool, collect: bool):
    """Unwind with gdb from ``f``: frames innermost first, whether cut at max_depth, and (``collect``)
    the entries of ``reuse.make_walk``, or None if this walk cannot be reused (incomplete, an unreadable
    eval frame, a frame that is not a plain call such as a signal or tail-call frame)."""
    frames: list[dict] = []
    max_depth = STATE.max_depth
    last_pc = None
    inline_index = 0
    truncated = False
    anchor_key = None  # the outermost PyEval_EvalCode met so far: (key, index in frames)
    suffix_gdb: list = []  # the gdb frames after it, for the cache's stack check
    complete = False
    entries: list | None = [] if collect else None
    prev_inline = True  # frame 0's return address is not on the stack (nor that of frames inlined in it)
    exact = True  # frame 0 and the frames inlined in it: their pc is where the thread stopped
    groups = FRAMES.walk_groups(gdb.selected_thread()) if py else None
    while f is not None:
        if len(frames) >= max_depth:
            truncated = True
            break
        try:
            pc = f.pc()
        except READ_ERRORS:
            break
        inline_index = inline_index + 1 if pc == last_pc else 0
        last_pc = pc
        info = native.describe(f, inline_index, exact)  # cached per pc: no symbol lookup for frames seen before
        name = info["function"]
        slot = None
        if entries is not None:
            try:
                slot, prev_inline, keep = _slot(f, pc, prev_inline)
            except READ_ERRORS:
                keep = False
            if not keep:
                entries = None
        at_exact_pc = exact
        if exact and not info.get("inlined"):
            exact = False  # the first real frame ends the run of frames at the stop's own pc
        if name == EVAL_FRAME and groups is not None and not info.get("inlined"):
            pyframes = groups.next()
            if pyframes:
                if entries is not None:
                    entries.append((EVAL, slot))
                room = max_depth - len(frames)
                if len(pyframes) > room:
                    frames.extend(pyframes[:room])
                    truncated = True
                    break
                frames.extend(pyframes)
            else:
                frames.append(info)
                entries = None
            anchor_key = None  # Python runs below the last anchor: it was not the outermost
        else:
            frames.append(info)
            if entries is not None:
                entries.append((info, slot))
            if anchor_key is not None:
                suffix_gdb.append(f)
        if name == ANCHOR and not info.get("inlined"):
            # Its callers are C start-up frames, the same at every hit as long as this activation
            # (same thread, pc and stack address) is live: reuse them instead of unwinding again.
            key = _stack_key(gdb.selected_thread(), f)
            cached = CACHES.suffix.get(key) if key is not None else None
            if cached is not None and _suffix_still_valid(cached[1]):
                reusable = entries is not None
                truncated, entries = _extend_with_suffix(frames, entries, cached, max_depth)
                complete = reusable and not truncated
                break
            anchor_key = (key, len(frames)) if key is not None else None
            suffix_gdb = []
        if loader_entry.is_loader_entry(pc, at_exact_pc, info["library"]):
            f = None  # the kernel started the process here: gdb's older frames are argc and argv's words
            continue
        try:
            f = f.older()
        except gdb.error:
            OUT.warn("gdb could not unwind past some frames; the outermost frames of those stacks are missing")
            break
    else:
        complete = True
        if anchor_key is not None and suffix_gdb:
            _remember_suffix(frames, *anchor_key, suffix_gdb)
    if groups is not None and complete and not truncated:
        groups.finish()
    return frames, truncated, (entries if complete and not truncated else None)
