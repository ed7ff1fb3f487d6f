"""The processes of one recording: which one a hit is in, its caches, and what the session says of it.

gdb follows the target's children (``detach-on-fork off``): each is an inferior of its own, and a
breakpoint stops in any of them. ``PROCESSES.enter()`` runs first at every hit: it keeps the agent's
caches (``state.CACHES``, everything read from one process's memory) per inferior, swapping them when a
hit comes from another process (one integer compare when it does not), and writes a ``process`` record
the first time a process is seen, with what is known of it (its parent, command line and role).

A child's libraries have no symbols in gdb until pttrace loads them in its program space: its first hit
is deferred (``need_process``) until pttrace has done that (``pttrace-process-ready``).
An ``exec`` in a followed process is caught at libc's ``execve`` (``ExecWatch``): pttrace takes that process
through its exec with every other breakpoint off (``quiet``), and detaches it at the new program's first
instruction (tracer/recorder/exec_hold.py).
"""
from __future__ import annotations

import os

import gdb  # type: ignore[import-not-found]

from tracer.session import records
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.log import LOG
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.state import CACHES, STATE, Caches
from tracer.gdb.agent.repeat import EPOCH

_ROLE_RETRIES = 50  # hits of a process at which its role is looked for before giving up


def proc_facts(pid: int) -> dict:
    """ppid, argv and (torchrun's) rank of a live process, from /proc; what cannot be read is left out."""
    facts: dict = {"pid": pid}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("PPid:"):
                    facts["ppid"] = int(line.split()[1])
                    break
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            facts["argv"] = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = dict(item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item)
        if b"RANK" in env:
            facts["rank"] = int(env[b"RANK"])
            if b"LOCAL_RANK" in env:
                facts["local_rank"] = int(env[b"LOCAL_RANK"])
    except (OSError, ValueError):
        pass
    return facts


class Processes:
    def __init__(self) -> None:
        self.follow = False  # children are followed (pttrace-setup's "follow")
        self.current = 1  # the inferior whose caches CACHES holds
        self._saved: dict[int, dict] = {}  # inferior number -> its caches (a Caches.__dict__) while not in use
        self.ready: set[int] = {1}  # inferiors whose libraries have their symbols (the first one always)
        self.pid_of: dict[int, int] = {}  # inferior number -> its pid
        self._role_tries: dict[int, int] = {}  # pid -> hits at which its role was looked for
        self.described: set[int] = set()  # pids with a process record
        self.need: int | None = None  # the inferior whose first hit waits for its symbols

    def enter(self) -> int | None:
        """Called first at each hit: the caches of the stopped process in place; its pid."""
        inferior = gdb.selected_inferior()
        num = inferior.num
        if num != self.current:
            self._saved[self.current] = CACHES.__dict__
            CACHES.__dict__ = self._saved.pop(num, {}) or Caches().__dict__
            self.current = num
        pid = inferior.pid or None
        if pid and self.pid_of.get(num) != pid:
            self.pid_of[num] = pid
            self._role_tries.pop(pid, None)
        return pid

    def is_ready(self) -> bool:
        return self.current in self.ready

    def forget(self) -> None:
        """Symbols changed somewhere: the other processes' caches start afresh too."""
        self._saved.clear()

    def exited(self, num: int) -> None:
        self._saved.pop(num, None)
        self.ready.discard(num)
        self.pid_of.pop(num, None)

    def describe(self, pid: int | None, frames_reader) -> None:
        """The process record of ``pid``, once its role is known (or looked for long enough)."""
        if not pid or pid in self.described:
            return
        tries = self._role_tries.get(pid, 0) + 1
        self._role_tries[pid] = tries
        facts = proc_facts(pid)
        role = None
        if "rank" in facts:
            role = f"rank {facts['rank']}"
        worker = frames_reader() if frames_reader is not None else None
        if worker is not None:
            role = f"DataLoader worker {worker[0]}"
            facts["worker"] = worker[0]
        if role is None and tries < _ROLE_RETRIES and self.current != 1 and self._worker_thread():
            return  # a DataLoader worker whose worker info is not set yet: asked again at its next hit
        facts["role"] = role
        facts["inferior"] = self.current
        self.described.add(pid)
        OUT.write(records.process(**facts))

    def _worker_thread(self) -> bool:
        try:
            return any(t.name == "pt_data_worker" for t in gdb.selected_inferior().threads())
        except READ_ERRORS:
            return False


PROCESSES = Processes()


# libc's ways into another program: execve (execv, execvp, posix_spawn...), and those by file descriptor
# (os.execve(fd, ...)) that go to the kernel's execveat without passing through execve.
EXEC_FUNCTIONS = ("execve", "fexecve", "execveat")


class ExecWatch(gdb.Breakpoint):
    """libc's ``execve`` (and ``fexecve``, ``execveat``): a followed process about to run another program
    stops here, and pttrace takes it through its exec alone (its breakpoints, set by address, mean nothing
    in another program)."""

    def __init__(self, function: str = "execve") -> None:
        super().__init__(function, type=gdb.BP_BREAKPOINT, internal=True)
        self._function = function

    def stop(self) -> bool:
        EPOCH.bump()  # what it keeps may change the next trace hit: none is a repeat (repeat.py)
        try:
            frame = gdb.newest_frame()
            path = _c_string(int(frame.read_register("rdi"))) if self._function == "execve" else None
        except READ_ERRORS as exc:
            LOG.info("execve: %s", exc)
            path = None
        STATE.exec_request = {"inferior": gdb.selected_inferior().num, "pid": gdb.selected_inferior().pid,
                              "program": path}
        return True


def _c_string(address: int, limit: int = 4096) -> str | None:
    if not address:
        return None
    raw = bytes(gdb.selected_inferior().read_memory(address, 256))
    out = raw
    while b"\0" not in out and len(out) < limit:
        address += 256
        out += bytes(gdb.selected_inferior().read_memory(address, 256))
    return os.fsdecode(out.split(b"\0", 1)[0])


class Quiet:
    """Every breakpoint off but ``ExecWatch`` while a process goes through its exec, then on again: gdb 13
    puts the breakpoints set by address into the new program at the old addresses, and fails."""

    def __init__(self) -> None:
        self._off: list = []

    def on(self) -> None:
        for bp in gdb.breakpoints():
            if bp.enabled and bp.type in (gdb.BP_BREAKPOINT, gdb.BP_HARDWARE_BREAKPOINT) \
                    and not isinstance(bp, ExecWatch):
                bp.enabled = False
                self._off.append(bp)

    def off(self) -> None:
        off, self._off = self._off, []
        for bp in off:
            if bp.is_valid():
                bp.enabled = True


QUIET = Quiet()
