"""Which gdb the TUI's control keys steer: the main recording's, or that of a child that executed Python,
which a recorder of its own traces in a gdb of its own (tracer/recorder/children.py).

Each gdb runs its processes on its own: while a child stands at a hit in its gdb, the main gdb's processes
may run on (the parent of a spawned child), and say so. The TUI shows one target: the gdb whose process
stopped last is the one steered, and only its state news is shown. When it runs on while another gdb is
still stopped, the keys turn to that one."""
from __future__ import annotations

from typing import Any

MAIN = None  # the key of the main recording's gdb; a child's gdb is keyed by the child's pid


class Steering:
    def __init__(self) -> None:
        self.child: int | None = MAIN
        """The pid of the child whose gdb the keys steer; None: the main gdb."""
        self._stopped: dict[int | None, dict[str, Any]] = {}  # each gdb stopped for the user: its stop, in order

    def stopped(self, child: int | None, data: dict[str, Any]) -> None:
        """A gdb stopped for the user (a hit in stop mode, a step, an interrupt): the keys steer it."""
        self._stopped.pop(child, None)
        self._stopped[child] = data
        self.child = child

    def state(self, child: int | None, state: str) -> bool:
        """A gdb's target changed state; True when the TUI shows it (the steered gdb's)."""
        if state != "stopped":
            self._stopped.pop(child, None)
        if state == "finished":  # a child's recorder ended: nothing of it is left to steer
            if self.child == child:
                self.child = MAIN
            return False
        return child == self.child

    def ran_on(self) -> tuple[int | None, dict[str, Any]] | None:
        """The steered gdb was continued. Another gdb still stopped (the one that stopped last) is steered
        from now on: returned with its stop; None when none is."""
        self._stopped.pop(self.child, None)
        if not self._stopped:
            return None
        child = list(self._stopped)[-1]
        self.child = child
        return child, self._stopped[child]


def python_thread(engine, hit):
    """The stop an interrupt shows: gdb's stopped thread when it runs Python code, else the process's main
    thread when that one does (made gdb's selected thread: s, n, f and the prompt act on it), with a note
    saying which thread gdb stopped and how to pick another; None for the note when nothing was switched.

    An interrupt stops every thread, and gdb reports the one the kernel handed its SIGINT to: the main
    thread unless it blocks SIGINT, then any other (a torch intra-op worker, whose stack has no Python
    frame). Shown as it was, such a stop looked like pttrace had lost the Python stack."""
    if hit is None or hit.thread.pid is None or any(f.kind == "python" for f in hit.frames):
        return hit, None
    stopped = f"thread {hit.thread.id}" + (f" ({hit.thread.name}, LWP {hit.thread.lwp})" if hit.thread.lwp else "")
    pick = "t lists every thread, enter picks one"
    main = next((row for row in engine.threads() if row.lwp == hit.thread.pid), None)
    if main is None or main.id == str(hit.thread.id):
        return hit, f"the interrupt stopped {stopped}, which runs no Python code: {pick}"
    shown = engine.select_thread(main.id)
    if shown is not None and any(f.kind == "python" for f in shown.frames):
        return shown, (f"the interrupt stopped {stopped}, which runs no Python code; shown: the process's main "
                       f"thread {main.id}, which does ({pick})")
    engine.select_thread(str(hit.thread.id))  # the main thread runs none either: back to gdb's own
    return hit, f"the interrupt stopped {stopped}; neither it nor the main thread runs Python code: {pick}"
