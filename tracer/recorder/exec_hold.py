"""A followed process that executes another program, held at that program's first instruction.

gdb 13 cannot carry pttrace's breakpoints into a new program: it sets those set by address again at the
same addresses in it, fails to insert them, and the exec event is lost in the error. So a process goes
through its exec with every breakpoint off (the agent's ``pttrace-quiet``) and alone
(``scheduler-locking on``: every other process stays stopped, none of their hits is missed). At gdb's
exec event (``catch exec``) it stands at the dynamic loader's entry and has run nothing of its new
program: a Python one gets a SIGSTOP and is detached stopped, for a recorder of its own to attach to
(children.py); another program is detached running, with a warning.

A vfork child (``subprocess``, multiprocessing's spawn and forkserver, torchrun's ranks) is followed
from its vfork to its ``execve`` (its parent is blocked by the kernel until its exec anyway: ~10 ms);
a fork child from its ``execve``. ``execve`` is stepped through one instruction at a time up to its
``syscall``, so an exec that fails (a vfork child tries each directory of PATH) comes back at once.

Cost, measured on a loaded 2-core machine: ``subprocess.Popen(["/bin/true"])`` takes 12-56 ms under
pttrace (2-11 ms when the child was let go at its vfork, 0.1-19 ms without gdb), ~15 round trips with gdb;
turning breakpoints off and on is gdb's own work per breakpoint (1,444 of them: 0.6 s an exec).
"""
from __future__ import annotations

import logging
import re
import time
from typing import Callable, Protocol

from tracer.errors import GdbDied
from tracer.gdb.mi import GdbCommandError, MiConnection
from tracer.recorder.agent_link import AgentError, AgentLink
from tracer.recorder.children import Execd, ExecChildren
from tracer.recorder.inferiors import Inferior
from tracer.recorder.launch import cmdline
from tracer.recorder.processes import ProcessTable

log = logging.getLogger("pttrace.recorder")

STOP_WAIT = 10.0  # seconds a held process has to reach its execve, or to be stepped one instruction
SYSCALL = b"\x0f\x05"  # x86-64's syscall instruction
MAX_STEPS = 64  # instructions from execve's first to its syscall (glibc's: 2 or 3)


class Events(Protocol):
    """Where gdb's other events go while a process is held (the recording's reactions)."""

    def console(self, text: object) -> None: ...

    def notify(self, message: str | None, payload: dict) -> bool: ...

    def continue_live(self) -> bool: ...

    def exec_stopped(self) -> None:
        """gdb's exec stop came: its "executing new program" news was this one's."""


class ExecHold:
    """One process taken through its exec while every other one waits."""

    def __init__(self, mi: MiConnection, agent: AgentLink, processes: ProcessTable, children: ExecChildren,
                 events: Events, follow_children: bool, warn: Callable[[str], None]):
        self._mi = mi
        self._agent = agent
        self._processes = processes
        self._children = children
        self._events = events
        self._follow_children = follow_children
        self._warn = warn
        self._child: str | None = None  # the held process's thread group, once gdb has it
        self._execd: str | None = None  # its group once detached after its exec: gdb forgets it at the end

    # --- the two ways in ------------------------------------------------------------------------
    def from_vfork(self) -> None:
        """Stopped at a vfork (``catch vfork``): gdb attaches the child and runs it alone to its exec."""
        self._begin()
        try:
            self._mi.command("-gdb-set follow-fork-mode child")
            self._run_to_exec(self._go("-exec-continue"), vfork=True)
        finally:
            self._end()

    def from_execve(self, request: dict) -> None:
        """A fork child stopped at ``execve`` (the agent's ExecWatch): stepped through its exec."""
        number = request.get("inferior")
        self._child = f"i{number}" if isinstance(number, int) else None
        self._begin()
        try:
            self._run_to_exec(None, vfork=False)
        finally:
            self._end()

    def at_exec(self, stop: dict) -> None:
        """gdb's exec event outside a hold (an exec that bypassed libc's execve: ``fexecve``, a raw syscall):
        handed over or let go as at the end of a hold."""
        self._child = self._group_of_thread(stop.get("thread-id"))
        self._held(stop, raw=True)

    def lost_exec(self, pid: int, program: str) -> None:
        """An exec gdb announced and then dropped (it failed on pttrace's breakpoints in the new program,
        see Reactions.log): every process is stopped, the one that executed is let go (held and handed over
        when it runs Python) like one at the end of a hold, the stop that came meanwhile is acted on."""
        self._mi.command("-exec-interrupt", check=False)
        stop = self._next_stop(STOP_WAIT) or {}
        self._child = next((i.group for i in self._processes.live() if i.pid == pid), None)
        if self._child is not None:
            self._held({"new-exec": program}, raw=True)
            self._end()
        reason, signal = stop.get("reason"), stop.get("signal-name")
        if reason == "exec" or (reason in (None, "signal-received") and signal in (None, "SIGINT", "0")):
            self._events.continue_live()  # our interrupt, gdb's stop at its failure, or the exec's own stop
        else:
            self._events.notify("stopped", stop)

    def _group_of_thread(self, thread_id: object) -> str | None:
        res = self._mi.command(f"-thread-info {thread_id}", check=False) if thread_id else None
        threads = (res.payload or {}).get("threads") if res is not None else None
        target = str(threads[0].get("target-id") or "") if threads else ""
        pids = [int(x) for x in re.findall(r"\d+", target)]
        for inferior in self._processes.live():
            if inferior.pid in pids:
                return inferior.group
        return None

    # --- the hold -------------------------------------------------------------------------------
    def _begin(self) -> None:
        self._agent.quiet(True)
        self._mi.command("-gdb-set scheduler-locking on")

    def _end(self) -> None:
        """Breakpoints on again, every process followed runs as before (the caller continues them)."""
        mi = self._mi
        try:
            self._agent.quiet(False)
            self._agent.exec_seen()
            mi.command("-gdb-set follow-fork-mode parent", check=False)
            live = self._processes.live()
            if live:  # scheduler-locking is refused while a process that is gone is selected
                self._processes.select(mi, live[0])
                if self._execd:  # else gdb would keep the new program's symbols of every exec'd child
                    mi.command(f"-remove-inferior {self._execd}", check=False)
            mi.command("-gdb-set scheduler-locking off", check=False)
        except (GdbCommandError, AgentError) as exc:  # the breakpoints stay as they are: said, the run goes on
            self._warn(f"gdb did not end the hold of a process at its exec as asked ({exc.message}); "
                     "breakpoints may stay off")

    def _run_to_exec(self, stop: dict | None, vfork: bool) -> None:
        """``stop``: where the held process is now (None: at its execve)."""
        for _ in range(MAX_STEPS):
            if stop is not None:
                reason = stop.get("reason")
                if reason in ("exited", "exited-normally", "exited-signalled"):
                    return  # it ended before any exec (every execve failed)
                if reason == "exec":
                    self._held(stop)
                    return
                status = self._agent.status()
                if not status.exec_request:
                    self._give_up(f"it stopped before its exec ({reason or 'no reason'})")
                    return
                self._agent.exec_seen()
            outcome = self._step_through_execve()
            if isinstance(outcome, dict):
                self._held(outcome)
                return
            if outcome == "failed" and not vfork:
                return  # a fork child whose exec failed goes on as it was, followed
            if outcome != "failed":
                self._give_up(outcome)
                return
            stop = self._go("-exec-continue")  # a vfork child tries its next directory of PATH, or ends
        self._give_up("it called execve too many times")

    def _step_through_execve(self) -> dict | str:
        """From execve's first instruction through its syscall: gdb's exec stop, or "failed" (the syscall
        came back), or why neither."""
        for _ in range(MAX_STEPS):
            res = self._mi.command("-data-read-memory-bytes $pc 2", check=False)
            memory = (res.payload or {}).get("memory") or [{}]
            at_syscall = bytes.fromhex(memory[0].get("contents") or "") == SYSCALL
            stop = self._go("-exec-step-instruction")
            if stop.get("reason") == "exec":
                return stop
            if stop.get("reason") != "end-stepping-range":
                return f"it stopped in its execve ({stop.get('reason') or 'no reason'})"
            if at_syscall:
                return "failed"
        return "its execve was not stepped through"

    def _held(self, stop: dict, raw: bool = False) -> None:
        """``raw``: an exec libc's execve did not see (a raw system call), caught at gdb's exec event."""
        children = self._children
        inferior = self._inferior()
        if inferior is None or inferior.pid is None:
            log.debug("exec stop of no known process: %r", stop)
            return
        pid = inferior.pid
        argv = cmdline(pid)
        program = stop.get("new-exec")
        python = self._follow_children and children.wants(argv)
        # Stopped again the moment gdb lets it go: a SIGSTOP sent while it is stopped waits for it.
        python = python and children.hold(pid)
        res = self._mi.command(f"-target-detach --thread-group {inferior.group}", timeout=20, check=False)
        if res.error:
            log.debug("detaching %s: %s", inferior.group, res.error)
            if python:
                children.resume(pid)
            self._processes.detached(inferior, f"exec of {program}", argv)
            children.not_followed(pid, f" ({' '.join(argv[:3])}: gdb could not let it go: {res.error})")
            return
        self._execd = inferior.group
        how = (f"process {pid} executed {program or 'a program'} by a raw system call, not libc's execve, "
               "and was caught at the new program's first instruction")
        if python:
            self._processes.handed_over(inferior, argv)
            children.hand_over(Execd(pid, argv, program))
            if raw:
                self._warn(f"{how}: it is traced by a recorder of its own")
        else:
            self._processes.detached(inferior, f"exec of {program}", argv)
            self._warn(f"process {pid} executes {' '.join(argv[:3]) or program}, not Python: it is not traced"
                     + (f" ({how})" if raw else ""))

    def _give_up(self, why: str) -> None:
        """The held process is let go where it is (it runs untraced): said in the session."""
        inferior = self._inferior()
        if inferior is None or not inferior.live:
            return
        self._mi.command(f"-target-detach --thread-group {inferior.group}", timeout=20, check=False)
        self._processes.detached(inferior, why)
        self._children.not_followed(inferior.pid, f" ({why})")

    def _inferior(self) -> Inferior | None:
        return self._processes.inferiors.get(self._child) if self._child else None

    # --- gdb's events while it holds ------------------------------------------------------------
    def _go(self, command: str) -> dict:
        """Run ``command`` (the held process alone runs) and wait for its stop; what else gdb says meanwhile
        is acted on as usual. A stop that does not come in time is an interrupt."""
        self._mi.command(command)
        stop = self._next_stop(STOP_WAIT)
        if stop is None:
            self._mi.command("-exec-interrupt", check=False)
            stop = self._next_stop(STOP_WAIT) or {}
            stop = {**stop, "reason": "timeout"}
        return stop

    def _next_stop(self, timeout: float) -> dict | None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ev = self._mi.next_event(timeout=0.1)
            if ev is None:
                continue
            if ev.kind == "gdb-exited":
                raise GdbDied("gdb exited while a process went through its exec.")
            if ev.kind == "console":
                self._events.console(ev.payload)
            if ev.kind != "notify":
                continue
            payload = ev.payload or {}
            if ev.message == "thread-group-started" and self._child is None:
                self._child = payload.get("id")
            if ev.message == "stopped":
                if payload.get("reason") == "exec":
                    self._events.exec_stopped()
                for inferior in self._processes.live():
                    inferior.state = "stopped"
                return payload
            self._events.notify(ev.message, payload)
        return None
