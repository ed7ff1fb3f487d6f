"""``--op NAME --follow-ops``: the operators a followed operator calls inside its kernels, recorded as hops
of its call, down to their backend kernels.

Every operator entry ``at::_ops::X::call`` calls ``at::getStepCallbacksUnlessEmpty`` (the profiler's
check, a real call into libtorch_cpu that is never inlined): one breakpoint there (the *trigger*) sees
each operator a kernel calls, named by the trigger's caller. It is on only while a followed operator runs
in some thread (from a hit of one of its own breakpoints, the *root*, until a hit finds no root's entry
on its thread's stack), so the program costs nothing more outside the followed calls.

The first time an operator X is called inside the root, the trigger's hit is recorded as X's entry hop
(its stack starts at ``at::_ops::X::call``) and the agent stops the target: pttrace resolves X's functions
(``tracer.dispatch.ops.resolve_op``, as for ``--op X``) and breaks on them (items flagged ``follow``), so X's later
hops (autograd, redispatch, the kernel wrapper, the native kernel) and every later call of X are
recorded. Those breakpoints record only while a root is on the stack: X called from elsewhere is not
this operator's child. Labels are ``op:ROOT>X``, so a hop tells which followed operator it ran under.
"""
from __future__ import annotations

import bisect
import os
import re

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent import native
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.log import LOG
from tracer.gdb.agent.memcache import MEMORY_CACHE
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.stack import call_path
from tracer.gdb.agent.state import STATE
from tracer.gdb.agent.repeat import EPOCH

_ENTRY = re.compile(r"^at::_ops::(\w+)::(call|redispatch)\(")


class Follow:
    """What ``--follow-ops`` is following: set by pttrace-setup, changed at hits."""

    def __init__(self) -> None:
        self.roots: dict[str, str] = {}  # at::_ops struct of a followed op -> its label ("op:conv2d")
        self.known: set[str] = set()  # structs whose functions are broken on (--op, or followed earlier)
        self.trigger_item: dict | None = None  # {library, offset, function}: placed when it maps
        # library -> (starts, [[offset, size, struct, "call"|"redispatch"]]): the at::_ops entries by
        # address, for frames gdb has no names for (a library given to it as unwind tables only)
        self.entries: dict[str, tuple[list[int], list[list]]] = {}
        self._real: dict[str, str] = {}  # library as gdb names it -> its real path
        self.trigger: gdb.Breakpoint | None = None
        self.followers: list = []  # breakpoints of followed operators: on only while following
        self.threads: set[int] = set()  # threads (global numbers) inside a root, as last seen
        self.pending: list[dict] = []  # [{root, op}]: operators pttrace is to resolve and break on

    @property
    def active(self) -> bool:
        return bool(self.roots)

    def configure(self, cfg: dict | None) -> None:
        cfg = cfg or {}
        self.roots = dict(cfg.get("roots") or {})
        self.known = set(cfg.get("known") or ()) | set(self.roots)
        self.trigger_item = cfg.get("trigger")
        self.entries = {os.path.realpath(lib): ([r[0] for r in ranges], ranges)
                        for lib, ranges in (cfg.get("entries") or {}).items()}
        self._real = {}

    def entry_of(self, frame: dict) -> tuple[str, str] | None:
        """(struct, "call"|"redispatch") if the native frame is in an ``at::_ops`` entry."""
        m = _ENTRY.match(frame.get("function") or "")
        if m:
            return m.group(1), m.group(2)
        lib, offset = frame.get("library"), frame.get("offset")
        if not lib or offset is None:
            return None
        real = self._real.get(lib)
        if real is None:
            real = self._real[lib] = os.path.realpath(lib)
        table = self.entries.get(real)
        if table is None:
            return None
        i = bisect.bisect_right(table[0], offset) - 1
        if i >= 0 and offset < table[1][i][0] + table[1][i][1]:
            return table[1][i][2], table[1][i][3]
        return None

    def is_root_label(self, label: str | None) -> bool:
        if not label:
            return False
        return label.split("[", 1)[0] in self.roots.values()

    def root_of(self, frames: list[dict]) -> str | None:
        """The label of the innermost root whose entry or redispatch is on this stack, or None."""
        for f in reversed(frames):
            if f.get("kind") != "native":
                continue
            entry = self.entry_of(f)
            if entry is not None and entry[0] in self.roots:
                return self.roots[entry[0]]
        return None

    def begin(self) -> None:
        """A root was entered on the selected thread: turn the trigger and the followers on."""
        thread = _thread()
        first = not self.threads
        self.threads.add(thread)
        if first:
            LOG.info("--follow-ops: a root runs in thread %d: %d breakpoints on", thread, len(self.followers) + 1)
            self._switch(True)

    def end(self) -> None:
        """The selected thread is in no root any more: off, when no other thread is in one."""
        self.threads.discard(_thread())
        if not self.threads:
            self._switch(False)

    def _switch(self, on: bool) -> None:
        for bp in ([self.trigger] if self.trigger is not None else []) + self.followers:
            try:
                if bp.is_valid() and bp.enabled != on:
                    bp.enabled = on
            except READ_ERRORS as exc:
                LOG.info("could not turn a followed breakpoint %s: %s", "on" if on else "off", exc)

    def place_trigger(self) -> None:
        item = self.trigger_item
        if item is None or self.trigger is not None:
            return
        base = native.mapped_base(item["library"])
        if base is None:
            return
        try:
            self.trigger = FollowTrigger(f"*{base + int(item['offset']):#x}")
        except gdb.error as exc:
            OUT.warn(f"--follow-ops cannot break on {item.get('function')}: {exc}; the operators called inside "
                     "followed operators are not recorded")
            self.trigger_item = None
            return
        self.trigger.enabled = bool(self.threads)
        LOG.info("--follow-ops: trigger at %s+%#x", item["library"], int(item["offset"]))

    def add_follower(self, bp) -> None:
        self.followers.append(bp)
        bp.enabled = bool(self.threads)


FOLLOW = Follow()


def _thread() -> int:
    try:
        return gdb.selected_thread().global_num
    except (AttributeError, *READ_ERRORS):
        return 0


class FollowTrigger(gdb.Breakpoint):
    """At ``at::getStepCallbacksUnlessEmpty``: which operator the code below a root calls."""

    def __init__(self, spec: str):
        super().__init__(spec, type=gdb.BP_BREAKPOINT, internal=False)

    def stop(self) -> bool:
        EPOCH.bump()  # what it keeps may change the next trace hit: none is a repeat (repeat.py)
        try:
            MEMORY_CACHE.off()
            return self._stop()
        except OSError as exc:
            STATE.write_error = f"{exc.strerror or exc}"
            return True
        except Exception as exc:  # the edge of a gdb callback: never let a bad read kill the run
            LOG.exception("following an operator call")
            OUT.warn(f"--follow-ops could not read an operator call: {exc.__class__.__name__}: {exc}")
            return False

    def _stop(self) -> bool:
        from tracer.gdb.agent.hits import record_hit

        try:
            caller = gdb.newest_frame().older()
            entry = FOLLOW.entry_of(native.describe(caller, 0, exact=False)) if caller is not None else None
        except READ_ERRORS:
            return False
        if entry is None or entry[1] != "call":
            return False  # the profiler's check from elsewhere (autograd nodes, boxed calls)
        op = entry[0]
        if op in FOLLOW.roots:
            return False  # the followed operator's own entry: its breakpoints record it
        frames, _ = call_path(caller)
        root = FOLLOW.root_of(frames)
        if root is None:
            FOLLOW.end()
            return False
        if op in FOLLOW.known:
            return False  # its own entry breakpoint recorded this call
        FOLLOW.known.add(op)
        FOLLOW.pending.append({"root": root, "op": op})
        spec = f"{root}>{op}"
        if not record_hit(spec, allow_defer=True, newest=caller):
            STATE.pending_skip = 1  # recorded again from the same caller frame after the libraries load
        STATE.stop_requested = STATE.wants_stop()
        return True  # pttrace resolves the operator's functions and breaks on them, then goes on


def in_scope(newest) -> bool:
    """For a followed operator's breakpoint: whether a root is on this thread's stack (else it is
    turned off with the others, when no thread is in a root)."""
    frames, _ = call_path(newest)
    if FOLLOW.root_of(frames) is not None:
        return True
    FOLLOW.end()
    return False
