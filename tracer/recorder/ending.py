"""A recording's end: the target killed (launched) or detached from (attached), whatever gdb left in an
attached target put back when gdb is gone, and the session closed with its end record."""
from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tracer.errors import GdbDied, PttraceError
from tracer.gdb.mi import GdbCommandError, MiConnection
from tracer.recorder import guard, shutdown
from tracer.recorder.agent_link import AgentError, AgentLink
from tracer.recorder.children import ExecChildren
from tracer.recorder.events import RecorderEvent, RecorderFinished
from tracer.recorder.later_libraries import LaterLibraries
from tracer.recorder.launch import TargetTerminal
from tracer.recorder.outcome import Outcome
from tracer.recorder.processes import ProcessTable
from tracer.recorder.tailer import SessionTailer
from tracer.session import storage

log = logging.getLogger("pttrace.recorder")


@dataclass
class SessionFiles:
    """The session file of a recording and what writes to it (startup.open_session makes them)."""

    path: Path
    writer: storage.SessionWriter
    keys: shutdown.KeyTable
    tailer: SessionTailer


class Ending:
    """Ends a recording's target and closes its session; decides ``outcome`` where the end says more."""

    def __init__(self, mi: MiConnection, agent: AgentLink, processes: ProcessTable, outcome: Outcome,
                 attached: bool, warn: Callable[[str], None]):
        self._mi = mi
        self._agent = agent
        self._processes = processes
        self._main = processes.main
        self._outcome = outcome
        self._attached = attached
        self._warn = warn
        self._dumped = False  # finish_target wrote the breakpoints while the target was still there
        # The target was running when the recording was ended (a signal, --timeout): gdb may still be in a hit's
        # stop() that began before the interrupt, and the agent writes that hit itself. The end record then waits
        # for gdb's exit, so that it stays the session's last line.
        self._stopped_running = False

    def finish_target(self, wait_stopped: Callable[[float], bool] | None = None) -> None:
        """End the target's part: kill a launched target, detach from an attached one. ``wait_stopped``: the
        processes still running are interrupted first, and this waits (seconds) for their stop."""
        mi, processes, main = self._mi, self._processes, self._main
        if not mi.alive:
            return
        if guard.process_state(mi.proc.pid) == "T":
            # Stopped (SIGSTOP, a debugger): it could neither detach nor kill the target. Let it go on.
            self._warn("gdb was stopped by a signal; pttrace continued it to end the run cleanly")
            os.kill(mi.proc.pid, signal.SIGCONT)
        try:
            if wait_stopped is not None and any(i.state == "running" for i in processes.live()):
                self._stopped_running = True
                mi.command("-exec-interrupt", timeout=self._patience(), check=False)
                wait_stopped(5.0)
            self._agent.dump_breakpoints(timeout=20)
            self._dumped = True
            # Every child still followed first: killed (a run's, as `kill inferiors` does) or detached.
            processes.end_all(mi, attached=self._attached)
            if not main.live:
                pass  # it ended before the recording did
            elif not self._attached:
                # gdb's own exit kills the target it launched (close asks for it right after this; _gdb_gone
                # kills whatever is left if gdb did not): a `kill` now made the end wait for gdb to tear the
                # target's program space down (0.18-0.29 s for a sigmoid run, load 18), which its exit does
                # while the session is closed.
                processes.exited(main.group, signal="SIGKILL")
            else:
                processes.select(mi, main)
                res = mi.command("-target-detach", timeout=20, check=False)
                if res.error:
                    raise GdbCommandError(res.error)
                processes.detached(main, "end of the recording")
                self._outcome.status = "detached"
        except (GdbDied, GdbCommandError, AgentError) as exc:
            log.debug("ending the target: %s", exc)
            self._outcome.gdb_lost = True  # whatever gdb left in the target is ours to remove (close)
            if self._impatient() and mi.alive:
                self._warn("gdb was busy (reading a library's symbols, or stuck) and did not answer within "
                           f"{self._patience():g} s of the {(self._outcome.end_reason or '').upper()}: it was ended "
                           "with the target; everything recorded until then is in the session")
        main.state = "detached" if self._attached else "exited"

    def _impatient(self) -> bool:
        """Ended by a signal (Ctrl-C, SIGTERM, the terminal closed) in a launched run: the user waits for the prompt,
        and nothing of the target is to be kept. gdb reading libtorch_cpu.so's symbols (--all-symbols) answers no
        command for seconds (the end took 6-12 s, the whole of that read); killing it loses nothing recorded."""
        return self._outcome.end_reason in shutdown.SIGNAL_EXIT and not self._attached

    def _patience(self) -> float:
        """Seconds gdb has to answer the interrupt at the end."""
        return 3.0 if self._impatient() else 10.0

    def _leave_attached_target(self) -> None:
        """gdb is gone: the attached target, and every child of it gdb followed, must run on without any
        breakpoint instruction of gdb's (a fork child has its own copy of each page gdb wrote to)."""
        outcome, main = self._outcome, self._main
        status, messages = guard.leave_attached(main.pid, outcome.gdb_lost)
        for message in messages:
            self._warn(message)
        if status is not None and (status != "detached" or outcome.gdb_lost or outcome.status == "running"):
            outcome.status = status
        if not outcome.gdb_lost:
            return  # gdb detached from every child itself
        for inferior in [i for i in self._processes.live() if i is not main]:
            child_status, messages = guard.leave_attached(inferior.pid, True)
            for message in messages:
                self._warn(message)
            if child_status == "detached":
                self._processes.detached(inferior, "gdb was lost")
            else:
                self._processes.exited(inferior.group)

    def _gdb_gone(self) -> None:
        """gdb closed (killed if it does not exit); then no process of a launched run left, and an attached
        target put back as it was."""
        main = self._main
        # gdb that stopped answering at a signal's end is not given seconds more to exit by itself.
        self._mi.close(grace=0.3 if self._outcome.gdb_lost and self._impatient() else 3.0)
        if not self._attached:
            # gdb went away without taking the launched target (or a child it followed) with it.
            pids = [main.pid] if main.pid and main.state != "detached" else []
            for pid in pids + self._processes.leftovers():
                if guard.alive(pid):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError as exc:
                        log.debug("cannot kill %s: %s", pid, exc)
        if self._attached and main.state != "exited":
            self._leave_attached_target()

    def _end_session(self, files: SessionFiles, later: LaterLibraries, children: ExecChildren, torch_libs: list[str],
                     op_tables: object, live: bool) -> None:
        """The session's status decided, its last records and its end record written, the file closed."""
        outcome = self._outcome
        outcome.status = shutdown.final_status(outcome.status, outcome.end_reason, attached=self._attached)
        if outcome.status == "gdb-died" and self._mi.stderr_tail:
            self._warn("gdb died: " + " ".join(self._mi.stderr_tail[-3:]))
        for spec in later.unfound_ops():
            self._warn(f"--op {spec}: no library the target loaded registers a kernel for it (TORCH_LIBRARY_IMPL "
                       "blocks read: none of them names it); nothing of it was broken on")
        children.close(kill=not self._attached)  # a run's children go with it; an attach's run on
        if children.lost and outcome.end_reason not in shutdown.SIGNAL_EXIT:
            # A child's recorder lost hits (its gdb lost an event): the run did not end as asked.
            outcome.end_reason = shutdown.LOST_EVENT
            if outcome.status == "completed":
                outcome.status = "interrupted"
        files.keys.settle()
        shutdown.write_op_tables(files.writer, op_tables)
        # Names for the frames recorded by library and offset that no fill record has yet.
        files.tailer.scan(emit=live)
        try:
            shutdown.write_suggestions(files.path, files.writer, torch_libs)
            files.writer.end(outcome.status, self._main.exit_code, reason=outcome.end_reason)
        except PttraceError as exc:
            outcome.write_failed(exc.message)
        files.writer.close()

    def close(self, files: SessionFiles, later: LaterLibraries, children: ExecChildren,
              terminal: TargetTerminal | None, torch_libs: list[str], op_tables: object, live: bool,
              finished: threading.Event, emit: Callable[[RecorderEvent], None]) -> str:
        """gdb closed, no process of ours left, the session ended; returns the final status. ``op_tables``:
        --op's dispatch tables (``TraceConfig.dispatch_tables_later``); ``live``: the frames named at the end
        are sent as events too; ``finished`` is set before the last event."""
        mi, main, outcome = self._mi, self._main, self._outcome
        # After a detach gdb has forgotten the target's libraries: a dump now would file every
        # location under the executable. The one finish_target wrote before detaching stands, and so does the one
        # it wrote before a kill: nothing ran since, and a second dump of a killed target's breakpoints repeated
        # the same records (0.09-0.13 s of gdb's time after `kill` for a --max-hits 1 sigmoid run, load 18).
        if mi.alive and main.state != "detached" and not self._dumped and not outcome.gdb_lost:
            try:
                self._agent.dump_breakpoints(timeout=20)
            except (GdbDied, AgentError) as exc:
                log.debug("last breakpoint dump: %s", exc)
        # A launched run with every process of it ended leaves gdb nothing to do: it exits while the session is
        # closed, and is waited for after the end record (0.1-0.16 s of gdb's exit at load 11, otherwise waited for
        # first). An attached target is only left once gdb is gone (it may leave breakpoints behind).
        if mi.alive and not self._attached and not outcome.gdb_lost and not self._processes.live() \
                and not self._stopped_running:
            mi.request_exit()
            try:
                self._end_session(files, later, children, torch_libs, op_tables, live)
            finally:
                self._gdb_gone()
        else:
            self._gdb_gone()
            self._end_session(files, later, children, torch_libs, op_tables, live)
        if terminal is not None:
            terminal.close()
        finished.set()
        files.tailer.stop()
        emit(RecorderFinished(outcome.status))
        return outcome.status
