"""An exact repeat of the hit before, recorded without the hit's usual work.

A hot loop stops at the same breakpoint on the same thread with the same registers, the same stack and the
same Python frames, hit after hit. A hit recorded wholly from the agent's kept results (its call path from a
reused walk and kept Python frames, its argument values kept: every region of memory they were read from
checked unchanged, none read afresh, no gdb frame made) depends on nothing else than

- the registers it read of frame #0 (``regs.StopFrame`` notes which),
- the bytes of the regions it checked (``bulk.StopBatch.checked``),
- the thread's OS name (its comm file),
- the agent's settings and caches, which change only in a pttrace command or a gdb event (``EPOCH``).

So when the next stop has the same thread, breakpoint and epoch, those registers hold the same words, those
regions the same bytes (one ``process_vm_readv``, the stop's batched read) and the thread the same name, the
usual work would give the same record: the hit is written as the one before was, with its own number and
time (the same ``site`` and ``vary`` ids, as the session's interning would write it: records.Interner).
Anything that differs, or any setting whose effect is not a function of those (``--eval``, ``--follow``, a
TorchScript reader, a stashed template hop, stop mode's next stop), takes the usual path.
"""
from __future__ import annotations

import operator
import time

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent import bulk, regs
from tracer.gdb.agent.osnames import OS_NAMES
from tracer.gdb.agent.reuse import STATS
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.state import STATE


class Epoch:
    """A counter every pttrace command and every gdb event that can change what a hit records moves on."""

    def __init__(self) -> None:
        self.n = 0

    def bump(self, *_args) -> None:
        self.n += 1


EPOCH = Epoch()

# gdb's events after which a kept hit may be stale (symbols, threads, breakpoints, memory or registers set
# by the user, an inferior call, a real stop where the user may do anything). None fires on a hot stop
# whose stop() returns False. Those a gdb lacks (thread_exited before 14) are left out.
EVENTS = ("new_objfile", "free_objfile", "clear_objfiles", "exited", "new_thread", "thread_exited",
          "new_inferior", "inferior_deleted", "breakpoint_created", "breakpoint_modified", "breakpoint_deleted",
          "memory_changed", "register_changed", "inferior_call_pre", "inferior_call_post", "stop", "cont",
          "before_prompt")


def connect() -> None:
    for name in EVENTS:
        registry = getattr(gdb.events, name, None)
        if registry is not None:
            registry.connect(EPOCH.bump)


class Kept:
    """The hit before, as a repeat of it is checked."""

    __slots__ = ("bp", "thread", "lwp", "pid", "epoch", "pick", "words", "name", "line", "regions")

    def __init__(self, bp, thread, lwp: int, pid: int, pick, words, name: str, line: str, regions: list) -> None:
        self.bp, self.thread, self.lwp, self.pid, self.epoch = bp, thread, lwp, pid, EPOCH.n
        self.pick, self.words, self.name, self.line, self.regions = pick, words, name, line, regions


class Repeats:
    """The kept hit (``kept``: None when the last stop was not one a repeat can be made of)."""

    def __init__(self) -> None:
        self.kept: Kept | None = None
        self.enabled = True  # $PTTRACE_NO_REPEAT=1 (pttrace-setup): every hit takes the usual path (tests' reference)

    def forget(self) -> None:
        self.kept = None

    def keep(self, bp, newest, thread: dict) -> None:
        """After a hit the usual path recorded, of a breakpoint no setting rules repeats out for: keep it if
        it was made wholly of kept results."""
        self.kept = None
        line = OUT.last_hit_tail()
        stop = bulk.STOP
        if not (self.enabled and line and stop.clean and len(stop.checked) >= 2
                and isinstance(newest, regs.StopFrame) and newest.made_nothing()):
            return
        lwp, pid, name = thread.get("lwp"), thread.get("pid"), thread.get("name")
        if not lwp or not pid or name is None or len(stop.checked) != len(set(map(id, stop.checked))):
            return
        used = newest.used()
        if not used:
            return
        pick = operator.itemgetter(*used)
        try:
            selected = gdb.selected_thread()
        except gdb.error:
            return
        self.kept = Kept(bp, selected, lwp, pid, pick, pick(newest.all_words()), name, line, list(stop.checked))

    def record(self, bp) -> bool | None:
        """Inside the breakpoint's ``stop()``: the repeat recorded and whether to stop, or None when this hit
        is not a repeat of the one kept (the usual path records it)."""
        kept = self.kept
        if kept is None or kept.bp is not bp or kept.epoch != EPOCH.n:
            return None
        if gdb.selected_thread() is not kept.thread:
            return None
        words = regs.words_of(kept.lwp)
        if words is None or kept.pick(words) != kept.words:
            return None
        if not bulk.STOP.same_as_before(kept.regions, kept.pid):
            return None
        if OS_NAMES.name(kept.thread, kept.pid, kept.lwp) != kept.name:
            return None
        STATE.need_libs = []
        STATE.pending_unstash = False
        STATE.hits += 1
        OUT.write_raw(('{"type":"hit","seq":%d,"time":%r,%s\n' % (STATE.hits, time.time(), kept.line)).encode())
        STATS.reused += 1
        STATS.repeated += 1
        STATS.write()
        STATE.stop_requested = STATE.wants_stop()
        return STATE.stop_requested


REPEATS = Repeats()
