"""Hops of a TORCH_LIBRARY operator through boxing templates its library shares between kernels.

``m.impl("op", &kernel)`` registers a kernel by pointer: the boxing templates (``make_boxed_from_unboxed_
functor<WrapFunctionIntoRuntimeFunctor_<R (*)(ARGS)>>::call`` and kin) are instantiated once per function
*type*, and run for every operator with a kernel of that type. At its entry such a template is one of this
operator's hops only if this operator's kernel then runs below it, which is not known yet. So a *stash*
breakpoint keeps what the hop would record (its function, the key set and the arguments read at entry)
and lets the target go on; when a kernel of the operator is hit (an ``unstash`` breakpoint), the stashed
templates that are the kernel's direct callers on its stack become hits first, outermost first, each with
the stack down to its own frame. Stashed entries no kernel claims are dropped.
"""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.entry import entry_values, read_memory
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.keyset import entry_keyset
from tracer.gdb.agent.log import LOG
from tracer.gdb.agent.memcache import MEMORY_CACHE
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.repeat import EPOCH

_MAX = 64  # entries kept per thread: a template whose kernel is never ours does not grow it


class Stash:
    def __init__(self) -> None:
        # thread -> [(start, end, keyset, why, values)], oldest first
        self.by_thread: dict[int, list[tuple[int, int, int | None, str | None, dict | None]]] = {}
        self.placed: dict[int, "StashBreakpoint"] = {}  # absolute address -> its breakpoint (one per address)

    def keep(self, thread: int, start: int, end: int, keyset: int | None, why: str | None,
             values: dict | None = None) -> None:
        entries = self.by_thread.setdefault(thread, [])
        entries.append((start, end, keyset, why, values))
        if len(entries) > _MAX:
            del entries[: len(entries) - _MAX]

    def claim(self, thread: int, frames: list[dict]) -> list[tuple[int, int | None, str | None, dict | None]]:
        """(index in ``frames``, keyset, why, values) of the stashed templates that called the innermost
        frame, innermost last; forgets the thread's stash."""
        entries = self.by_thread.pop(thread, [])
        out = []
        for i in range(len(frames) - 2, -1, -1):
            f = frames[i]
            pc = f.get("address") if f.get("kind") == "native" else None
            if pc is None:
                break
            match = next((j for j in range(len(entries) - 1, -1, -1) if entries[j][0] <= pc < entries[j][1]), None)
            if match is None:
                break
            _s, _e, keyset, why, values = entries.pop(match)
            out.append((i, keyset, why, values))
        out.reverse()
        return out


STASH = Stash()


def thread_number() -> int:
    try:
        return gdb.selected_thread().global_num
    except (AttributeError, *READ_ERRORS):
        return 0


class StashBreakpoint(gdb.Breakpoint):
    """At a shared boxing template's entry: keep its key set for a kernel below it to claim."""

    def __init__(self, spec: str, start: int, size: int, function: str | None, library: str | None):
        super().__init__(spec, type=gdb.BP_BREAKPOINT, internal=False)
        self.pt_start, self.pt_end = start, start + max(size, 1)
        self.pt_function, self.pt_library = function, library

    def stop(self) -> bool:
        EPOCH.bump()  # what it keeps may change the next trace hit: none is a repeat (repeat.py)
        try:
            MEMORY_CACHE.off()
            frame = gdb.newest_frame()
            keyset, why = entry_keyset(frame, self.pt_function, self.pt_library, read_memory)
            values = entry_values(frame, self.pt_function, self.pt_library)  # at its entry: only now
            STASH.keep(thread_number(), self.pt_start, self.pt_end, keyset, why, values)
        except READ_ERRORS as exc:
            LOG.info("stash at %s: %s", self.pt_function, exc)
        except Exception as exc:  # the edge of a gdb callback: never let a bad read kill the run
            LOG.exception("stashing a hop of %s", self.pt_function)
            OUT.warn(f"could not read a hop at {self.pt_function}: {exc.__class__.__name__}: {exc}")
        return False


def place(item: dict, base: int) -> None:
    address = base + int(item["offset"])
    if address in STASH.placed:
        return
    try:
        STASH.placed[address] = StashBreakpoint(f"*{address:#x}", address, int(item.get("size") or 1),
                                                item.get("function"), item["library"])
    except gdb.error as exc:
        OUT.warn(f"could not set a breakpoint on {item.get('function')}: {exc}")
