"""The processes of a recording, as pttrace follows them: gdb's inferiors, their start and end in the
session, a child's symbols set up as its parent's, one that executed another program handed over or let
go (exec_hold.py), and the end of every one (killed at the end of a run, detached at the end of an attach).

gdb follows children with ``detach-on-fork off`` and ``schedule-multiple on``: every process runs, and
a breakpoint stops in any of them (the agent's side: tracer/gdb/agent/processes.py).
"""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Callable

from tracer.session import records, storage
from tracer.errors import PttraceError
from tracer.gdb.mi import MiConnection
from tracer.recorder.guard import ended_whole, status_number
from tracer.recorder.inferiors import Inferior
from tracer.recorder.launch import cmdline

if TYPE_CHECKING:
    from tracer.recorder.agent_link import AgentLink
    from tracer.recorder.libraries import LibraryPolicy

log = logging.getLogger("pttrace.recorder")

# What gdb is told so that children are followed (the default; --no-follow-children leaves gdb's defaults).
FOLLOW_SETTINGS = ("detach-on-fork off", "follow-fork-mode parent", "schedule-multiple on")
# A vfork's child runs another program at once (subprocess, multiprocessing's spawn and forkserver): it is
# taken through its exec alone (exec_hold.py), from the vfork to gdb's exec event.
FOLLOW_CATCHES = ("catch vfork", "catch exec")


def _host() -> str:
    """This machine's name, as socket.gethostname() gives it on Linux (uname's nodename), without importing
    socket: its import, ~3 ms, was on the way to the target's start."""
    return os.uname().nodename


def parent_of(pid: int) -> int | None:
    return status_number(pid, "PPid")


class ProcessTable:
    """Every inferior of the recording, and the ``process`` records that say what became of each."""

    def __init__(self, main: Inferior, writer: Callable[[], "storage.SessionWriter | None"],
                 warn: Callable[[str], None]):
        self.inferiors: dict[str, Inferior] = {main.group: main}
        self.main = main
        self.last_exited: Inferior | None = None
        self.thread_groups: dict[str, str] = {}  # gdb's global thread id -> its inferior's group (=thread-created)
        self._writer = writer
        self._warn = warn

    def _write(self, record: dict) -> None:
        writer = self._writer()
        if writer is not None:
            try:
                writer.write(record)
            except PttraceError as exc:
                log.debug("process record not written: %s", exc)

    def get(self, group: str | None) -> Inferior:
        return self.inferiors.get(group or "i1", self.main)

    def pid_of_thread(self, thread_id: str | None) -> int | None:
        """The process of gdb's thread ``thread_id`` (a stop names its thread, not its process)."""
        group = self.thread_groups.get(str(thread_id)) if thread_id else None
        inferior = self.inferiors.get(group) if group else None
        return inferior.pid if inferior is not None else None

    def live(self) -> list[Inferior]:
        return [i for i in self.inferiors.values() if i.live]

    def started(self, group: str, pid: int) -> None:
        inferior = self.inferiors.setdefault(group, Inferior(group))
        inferior.pid, inferior.state = pid, "running"
        inferior.exit_code = inferior.signal = None
        inferior.end_reported = False
        argv = cmdline(pid)
        self._write(records.process(pid, ppid=parent_of(pid), argv=argv or None, inferior=inferior.number,
                                    started=storage.now_iso(), attached=True if inferior.attached else None,
                                    host=_host()))

    def exited(self, group: str, exit_code: int | None = None, signal: str | None = None,
               by_gdb: bool = True) -> None:
        """A process ended. ``by_gdb``: gdb said so (``=thread-group-exited``): its ``*stopped`` that follows
        names no process and means this one (``last_exited``)."""
        inferior = self.inferiors.get(group)
        if inferior is None or inferior.pid is None or inferior.state == "detached":
            return
        if by_gdb:
            self.last_exited = inferior
            inferior.end_reported = True
        if inferior.state == "exited" and (signal is None or inferior.signal):
            return  # already said (=thread-group-exited, then the stop that reports the same end)
        inferior.state = "exited"
        if exit_code is not None:
            inferior.exit_code = exit_code
        if signal is not None:
            inferior.signal = signal
        self._write(records.process(inferior.pid, ended=storage.now_iso(), exit_code=inferior.exit_code,
                                    signal=inferior.signal, state="exited"))

    def thread_exited(self, group: str | None) -> None:
        """gdb said a thread of ``group`` ended (``=thread-exited``). When that was the process's last one, its
        end is read from its zombie (the status its parent's waitpid will get): gdb 13 under a fork storm
        reported a child's last thread ending and never the child's end, 1-3 children in each of 5 runs of
        100 (tests/integration/test_fork_storm.py), whose exit codes were then recorded as unknown."""
        inferior = self.inferiors.get(group or "")
        if inferior is None or not inferior.live or inferior.pid is None:
            return
        end = ended_whole(inferior.pid)
        if end is None:  # threads still run, or no zombie left to read (reaped: gdb was its parent too)
            return
        log.debug("process %s: its last thread ended; its end read from /proc: %s", inferior.pid,
                  f"exit code {end[0]}" if end[1] is None else f"killed by {end[1]}")
        self.exited(inferior.group, *end, by_gdb=False)

    def detached(self, inferior: Inferior, why: str | None = None, argv: list[str] | None = None) -> None:
        inferior.state = "detached"
        if inferior.pid is not None:
            self._write(records.process(inferior.pid, argv=argv or None, ended=storage.now_iso(), state="detached",
                                        detached=why))

    def handed_over(self, inferior: Inferior, argv: list[str]) -> None:
        """Executed Python and detached held: its recorder of its own says the rest (children.py)."""
        inferior.state = "detached"
        if inferior.pid is not None:
            self._write(records.process(inferior.pid, argv=argv or None))

    def adopted(self, pid: int, argv: list[str]) -> None:
        """A child gdb never announced (its fork event lost: watchdog.py), handed to a recorder of its own."""
        self._write(records.process(pid, ppid=parent_of(pid), argv=argv or None, started=storage.now_iso(),
                                    host=_host()))

    def group_of_number(self, number: int) -> Inferior | None:
        return self.inferiors.get(f"i{number}")

    # --- what gdb is asked ----------------------------------------------------------------------
    def select(self, mi: MiConnection, inferior: Inferior) -> None:
        mi.console(f"inferior {inferior.number}", check=False)

    def set_up_child(self, mi: MiConnection, agent: "AgentLink", policy: "LibraryPolicy", number: int) -> None:
        """A child's first hit: give gdb the symbols (and unwind-table copies) of its libraries that its
        parent has, in the child's program space, then tell the agent it is ready."""
        if policy is not None:
            for path in sorted(policy.loaded - policy.cfi_libs):
                policy.load_symbols_here(path)
            for path in sorted(policy.cfi_libs):
                copy = policy.copy_of(path)
                if copy is not None:
                    refused = agent.cfi_add(path, copy)
                    if refused:
                        self._warn(f"gdb refused the unwind-table copy of {os.path.basename(path)} in a child "
                                   f"process ({refused}); its frames there may be cut short")
        agent.process_ready(number)

    def end_all(self, mi: MiConnection, attached: bool) -> None:
        """The end of the recording for every process still followed: killed (a run's children, as
        ``kill inferiors`` does) or detached and left running (an attach)."""
        live = [i for i in self.live() if i is not self.main]
        for inferior in live:
            if attached:
                res = mi.command(f"-target-detach --thread-group {inferior.group}", timeout=20, check=False)
                if res.error:
                    log.debug("detaching %s: %s", inferior.group, res.error)
                self.detached(inferior, "end of the recording")
            else:
                mi.console(f"kill inferiors {inferior.number}", timeout=20, check=False)
                self.exited(inferior.group, signal="SIGKILL")

    def leftovers(self) -> list[int]:
        """Pids of children gdb may have left alive (for a run's last SIGKILL)."""
        return [i.pid for i in self.live() if i is not self.main and i.pid is not None]
