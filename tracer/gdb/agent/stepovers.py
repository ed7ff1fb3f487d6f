"""Traps that are no hit: gdb's step over a presented hit, cancelled or interrupted, met again at its address.

When gdb resumes a thread stopped at a breakpoint, it first steps it over the breakpoint's instruction (out of
line: displaced stepping). Two things make gdb 13 trap there again, and each trap runs pttrace's ``stop()``:
- **A cancelled step.** Another event waiting as the step begins (a fork child's exit, seen in the TUI's stop
  mode right after a hit the user continued from) is presented first: gdb stops the stepping thread before
  its instruction ran, puts its pc back on the breakpoint, and forgets that the step is owed. The next
  continue runs the thread into the same breakpoint instruction: gdb reports the same hit again.
- **A signal during the step** (the parent's SIGCHLD of that exit): gdb lets the thread take it and puts a
  step-resume breakpoint of its own at the address; the thread traps there, gdb's bpstat asks every
  breakpoint at it (pttrace's ``stop()`` says stop), then gdb steps over again and reports nothing.
In the stop-mode test of 10 such rounds pttrace recorded 14-26 hits of 10 calls, and plain gdb 13 driven by
its own Python reported 11-14 stops (``set debug infrun on``: "displaced-step ... canceled", the thread
resumed at the breakpoint with no step over; "signal arrived while stepping over breakpoint").

What tells those traps from a real second call is read from /proc (never from the target), and only for a
thread that stopped at a presented hit (stop mode, symbols to load, a child's first hit): the hot path of a
hit nothing stops at reads nothing.
- its pc, and the number of times it stopped since (voluntary context switches: each ptrace stop is one);
  a real second call takes two stops (the step over, the trap), and a signal taken on the way one more;
- whether a signal it does not block waits for it as it resumes (``SigPnd``, and ``ShdPnd`` when it is its
  process's only thread): the kernel stops it for that signal before its first instruction.
At each resume, a watched thread found once more stopped at the same pc was set going and stopped before its
instruction ran (or trapped there again, not reported yet): its step is owed. Its next trap at that pc is
not a hit at most one stop later; nor is a trap at that pc two stops after a resume at which a signal
waited for it (the signal's stop, then the trap), and the watch goes on from such a trap. Any other trap is
recorded as the hit it is. Not covered: a signal that comes in the microseconds of a step
over after the resume (gdb's step-resume trap then counts as a hit), and a signal pending for a process of
several threads (another thread may take it).
"""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.log import LOG

Key = tuple[int, int]  # (pid, lwp)


class Where(tuple):
    """(pc, stops, signal waiting) of a stopped thread."""

    @property
    def pc(self) -> int:
        return self[0]

    @property
    def stops(self) -> int:
        return self[1]

    @property
    def signal(self) -> bool:
        return self[2]


def _read(pid: int, tid: int, name: str) -> bytes:
    with open(f"/proc/{pid}/task/{tid}/{name}", "rb") as fh:
        return fh.read()


def _field(status: bytes, name: bytes) -> bytes:
    at = status.index(b"\n" + name + b":") + len(name) + 2
    return status[at:status.index(b"\n", at)].strip()


def where(pid: int, tid: int) -> Where | None:
    """A stopped thread's pc (/proc's syscall file: "-1 SP PC" outside a system call, the pc last in it too),
    its count of voluntary context switches, and whether a signal it does not block waits for it (its own, or
    its process's when it is the only thread); None when any cannot be read."""
    try:
        fields = _read(pid, tid, "syscall").split()
        status = _read(pid, tid, "status")
        if not fields or fields[0] == b"running":
            return None
        waiting = int(_field(status, b"SigPnd"), 16)
        if int(_field(status, b"Threads")) == 1:
            waiting |= int(_field(status, b"ShdPnd"), 16)
        waiting &= ~int(_field(status, b"SigBlk"), 16)
        return Where((int(fields[-1], 16), int(_field(status, b"voluntary_ctxt_switches")), bool(waiting)))
    except (OSError, ValueError):
        return None


def _thread_key() -> Key | None:
    try:
        ptid = gdb.selected_thread().ptid
    except (AttributeError, gdb.error):
        return None
    return int(ptid[0]), int(ptid[1])


class StepOvers:
    def __init__(self) -> None:
        # thread -> where it stood at a presented hit or at the last resume since, and whether its step over that
        # hit is owed (it was set going and stopped before its instruction ran)
        self.watched: dict[Key, tuple[Where, bool]] = {}
        self._repeat: tuple[Key, Where] | None = None  # the trap found no hit (asked again by each breakpoint there)

    def active(self) -> bool:
        return bool(self.watched or self._repeat)

    def stopped_here(self) -> None:
        """A hit of the selected thread stops the run (stop mode, symbols to load, a child's first hit)."""
        key = _thread_key()
        seen = where(*key) if key is not None else None
        if key is not None and seen is not None:
            self.watched[key] = (seen, False)

    def check(self) -> int:
        """Before gdb resumes: what each watched thread did since; returns how many are still watched."""
        for key, (then, owed) in list(self.watched.items()):
            now = where(*key)
            stops = now.stops - then.stops if now is not None else -1
            if now is None or now.pc != then.pc or stops < 0:
                del self.watched[key]  # it went on, or is gone
            elif stops == 0:
                self.watched[key] = (now, owed)  # still where it stood: whether a signal waits for it now
            elif stops == 1 or (stops == 2 and then.signal):
                # set going and stopped before its instruction ran (a cancelled step; or its trap there, after
                # the signal that waited for it, not reported yet)
                self.watched[key] = (now, True)
                LOG.info("thread %s: its step over the hit at %#x is owed", key, now.pc)
            else:
                del self.watched[key]
        self._repeat = None
        return len(self.watched)

    def repeated(self) -> bool:
        """At a breakpoint's stop(): whether this trap of the selected thread is gdb's step over its last
        presented hit met again, not a hit."""
        key = _thread_key()
        if key is None:
            return False
        if self._repeat is not None:
            if self._repeat[0] == key and where(*key) == self._repeat[1]:
                return True  # the same trap, asked by another breakpoint at this address
            self._repeat = None
        then, owed = self.watched.pop(key, (None, False))
        now = where(*key) if then is not None else None
        if then is None or now is None or now.pc != then.pc:
            return False
        stops = now.stops - then.stops
        if not ((owed and stops in (0, 1)) or (stops == 2 and then.signal)):
            return False
        LOG.info("thread %s: the trap at %#x is the step over its hit there met again, not a hit", key, now.pc)
        self._repeat = (key, now)
        self.watched[key] = (now, False)  # gdb steps it over now, unless another signal waits for it
        return True


STEPOVERS = StepOvers()
