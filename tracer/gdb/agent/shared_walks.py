"""Walks shared by a recording's fork children: a child's first hit reuses a sibling's walk of the same stack.

A fork child runs its parent's libraries at its parent's addresses, on a copy of the forking thread's stack:
the children of one loop (a fork storm, a pool of DataLoader workers) stop at the same pc and sp with the same
return addresses. Each child is a program space of its own in gdb, whose first unwind expands the compilation
units of its interpreter frames again: ~0.13 s of a child's ~0.2 s first hit inside gdb (cProfile, load 8,
``gdb.Frame.older``). A walk is shared under the *image* it was made in (the process's executable file
mappings and the objfiles gdb has for it), and reused only where the image is the same and every return
address is in its slot (stack.py checks the walk's slots), as a walk of the same process is: the frames gdb would give.
The first process is left out (one process has nothing to share with, and pays nothing for it).
"""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.reuse import MAX_WALKS, Walk


def _mappings(pid: int) -> tuple | None:
    """The executable file mappings of a process: (start, offset, path) each, from /proc/PID/maps."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    out = []
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) == 6 and "x" in parts[1] and parts[5].startswith("/"):
            out.append((parts[0].split("-", 1)[0], parts[2], parts[5]))
    return tuple(out)


class SharedWalks:
    def __init__(self) -> None:
        self.walks: dict[tuple, Walk] = {}  # (image, pc, sp) -> a walk made in a process of that image

    def image(self) -> tuple | None:
        """The selected process's image, or None (the first process, or one that cannot be read)."""
        try:
            inferior = gdb.selected_inferior()
            if inferior.num == 1 or not inferior.pid:
                return None
            objfiles = frozenset(o.filename for o in gdb.current_progspace().objfiles() if o.filename)
        except (AttributeError, *READ_ERRORS):
            return None
        mappings = _mappings(inferior.pid)
        return None if mappings is None else (mappings, objfiles)

    def get(self, image: tuple | None, pc: int, sp: int) -> Walk | None:
        return self.walks.get((image, pc, sp)) if image is not None else None

    def put(self, image: tuple | None, pc: int, sp: int, walk: Walk) -> None:
        if image is None:
            return
        if len(self.walks) >= MAX_WALKS:
            self.walks.clear()
        self.walks[(image, pc, sp)] = walk


SHARED = SharedWalks()
