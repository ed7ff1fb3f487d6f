"""Whole-stack reuse: a hot breakpoint stops on the same stack again and again (no gdb: tested outside it).

A hit whose innermost frame has the pc and sp of a hit walked before, and whose every native frame's
return address is still in its stack slot (read with the stop's other checks, bulk.StopBatch), has the native frames of that walk:
gdb would unwind the same pcs at the same stack addresses. Its Python frames are read afresh from the
thread's state (``python_frames.FRAMES.thread_groups``), one group per eval frame of the walk.
"""
from __future__ import annotations

import json
from typing import NamedTuple

EVAL = object()  # a walk's place for the Python frames of one eval frame
SLOT = 8  # bytes of a return address on the stack (x86-64 and aarch64)
MAX_STACK_READ = 256 << 10
MAX_WALKS = 4096


class Walk(NamedTuple):
    items: list  # the frames, innermost first, EVAL for each eval frame's Python frames
    lo: int  # lowest return-address slot
    size: int  # bytes from there to past the highest
    checks: tuple  # (offset from lo, return address bytes) that must be unchanged
    n_eval: int  # how many EVAL items
    segments: tuple  # the native frames between the EVALs (n_eval + 1 tuples), for assemble


def make_walk(entries: list) -> Walk | None:
    """A complete walk, from its (frame or EVAL, (slot address, return address bytes) or None) entries;
    None if no slot is known or they spread too far."""
    items = [e[0] for e in entries]
    slots = [e[1] for e in entries if e[1] is not None]
    if not slots:
        return None
    lo = min(a for a, _ in slots)
    hi = max(a for a, _ in slots) + SLOT
    if hi - lo > MAX_STACK_READ:
        return None
    checks = tuple(sorted({(a - lo, want) for a, want in slots}))
    segments: list[list] = [[]]
    for item in items:
        if item is EVAL:
            segments.append([])
        else:
            segments[-1].append(item)
    return Walk(items, lo, hi - lo, checks, len(segments) - 1, tuple(tuple(s) for s in segments))


def stack_matches(walk: Walk, mem: bytes) -> bool:
    """``mem``: the stack from ``walk.lo``, ``walk.size`` bytes."""
    for off, want in walk.checks:
        if mem[off:off + SLOT] != want:
            return False
    return True


def assemble(walk: Walk, groups) -> list:
    """The hit's frames, innermost first: the walk's, each EVAL replaced by its group of Python frames.
    By the runs of native frames between them (``segments``), not a frame at a time (stack.py reuses even
    this while a hot hit's walk and Python frames are those of the hit before)."""
    segments = walk.segments
    out = list(segments[0])
    for group, segment in zip(groups, segments[1:]):
        out += group
        out += segment
    return out


class ReuseStats:
    """How often walks were reused. ``pttrace-setup`` may turn reuse off (``stack_reuse``, from
    ``$PTTRACE_NO_STACK_REUSE``: the reference for tests) and name a file the counters are written to
    after each hit (``stack_reuse_stats``, from ``$PTTRACE_STACK_REUSE_STATS``; tests)."""

    def __init__(self) -> None:
        self.enabled = True
        self.path: str | None = None
        self.reused = 0  # hits recorded from a cached walk
        self.walked = 0  # hits walked with gdb (the first of a stack, or a failed check)
        self.rejected = 0  # cached walks found stale at a hit
        self.repeated = 0  # of the reused, hits recorded as an exact repeat of the hit before (repeat.py)

    def as_dict(self) -> dict:
        out = {"reused": self.reused, "walked": self.walked, "rejected": self.rejected}
        if self.enabled:  # repeats are a part of the reuse: nothing to count without it
            out["repeated"] = self.repeated
        return out

    def write(self) -> None:
        if self.path:
            try:
                with open(self.path, "w", encoding="utf-8") as fh:
                    json.dump(self.as_dict(), fh)
            except OSError:
                pass


STATS = ReuseStats()
