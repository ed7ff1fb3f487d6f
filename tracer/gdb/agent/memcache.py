"""gdb's memory cache over the whole address space while the target loads its libraries, off from the first hit.

At each dynamic-linker event (78 for hello-world.py's ``import torch``) gdb walks the process's list of libraries
again and reads each entry's name 8 bytes at a time from /proc/PID/mem: ~26,000 reads of 8 bytes and ~30,000 in all
for one run, with the target waiting at each event. pttrace starts gdb with ``mem 0 0 cache`` and lines of a page
(spawn.py), so each page is read once per event: ~1/3 of the reads, and ~40 ms less of gdb's CPU (and of the
target's blocked time) before the first hit. gdb empties that cache whenever the target resumes (target_resume),
so nothing read is older than the stop it is read at.

A hit reads other memory (a tensor's data, the interpreter's frames, whole stacks) where page-sized lines would
read more than it asks for: at the first stop that is not a library load's (a hit, a signal, the end of a step)
the agent deletes the region and puts gdb's line size back, and from then on gdb reads as it always did.
"""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.log import LOG

GDB_LINE_SIZE = 64  # gdb's default ``dcache line-size``


class MemoryCache:
    """Whether the whole-memory region of pttrace's gdb command line is still there (``off`` removes it once)."""

    def __init__(self) -> None:
        self.on = True

    def off(self) -> None:
        if not self.on:
            return
        self.on = False
        try:
            gdb.execute("delete mem", to_string=True)
            gdb.execute(f"set dcache line-size {GDB_LINE_SIZE}", to_string=True)
        except gdb.error as exc:  # gdb reads through its cache still: slower for big reads, never stale
            LOG.info("gdb's memory cache stays on: %s", exc)
            return
        LOG.debug("gdb's memory cache off: a stop that is not a library load's")


MEMORY_CACHE = MemoryCache()


def on_stop(event, library_catchpoint) -> None:
    """gdb's stop event: any stop but a library load's takes the cache away (commands.py connects it)."""
    if not MEMORY_CACHE.on:
        return
    if isinstance(event, gdb.BreakpointEvent) and library_catchpoint is not None:
        try:
            if all(bp.number == library_catchpoint.number for bp in event.breakpoints):
                return
        except RuntimeError:  # a breakpoint deleted meanwhile
            pass
    MEMORY_CACHE.off()
