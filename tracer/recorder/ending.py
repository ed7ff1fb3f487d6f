"""A recording's end: the target killed (launched) or detached from (attached), whatever gdb left in an
attached target put back when gdb is gone, and the session closed with its end record."""
from __future__ import annotations

import logging
import os
import signal
from typing import TYPE_CHECKING

from tracer.errors import GdbDied, PttraceError
from tracer.gdb.mi import GdbCommandError
from tracer.recorder import guard, shutdown
from tracer.recorder.agent_link import AgentError
from tracer.recorder.events import RecorderFinished

if TYPE_CHECKING:
    from tracer.recorder.recorder import Recorder

log = logging.getLogger("pttrace.recorder")


def finish_target(rec: Recorder, interrupt: bool) -> None:
    """End the target's part: kill a launched target, detach from an attached one."""
    mi = rec.mi
    if mi is None or not mi.alive:
        return
    if guard.process_state(mi.proc.pid) == "T":
        # Stopped (SIGSTOP, a debugger): it could neither detach nor kill the target. Let it go on.
        rec.warn("gdb was stopped by a signal; pttrace continued it to end the run cleanly")
        os.kill(mi.proc.pid, signal.SIGCONT)
    try:
        if interrupt and any(i.state == "running" for i in rec.processes.live()):
            mi.command("-exec-interrupt", timeout=10, check=False)
            rec.reactions.wait_stopped(5.0)
        rec.agent.dump_breakpoints(timeout=20)
        # Every child still followed first: killed (a run's, as `kill inferiors` does) or detached.
        rec.processes.end_all(mi, attached=rec.config.pid is not None)
        if not rec.main.live:
            pass  # it ended before the recording did
        elif rec.config.pid is None:
            rec.processes.select(mi, rec.main)
            mi.console("kill", timeout=20, check=False)
            rec.processes.exited(rec.main.group, signal="SIGKILL")
        else:
            rec.processes.select(mi, rec.main)
            res = mi.command("-target-detach", timeout=20, check=False)
            if res.error:
                raise GdbCommandError(res.error)
            rec.processes.detached(rec.main, "end of the recording")
            rec.status = "detached"
    except (GdbDied, GdbCommandError, AgentError) as exc:
        log.debug("ending the target: %s", exc)
        rec.gdb_lost = True  # whatever gdb left in the target is ours to remove (close)
    rec.main.state = "exited" if rec.config.pid is None else "detached"


def _leave_attached_target(rec: Recorder) -> None:
    """gdb is gone: the attached target, and every child of it gdb followed, must run on without any
    breakpoint instruction of gdb's (a fork child has its own copy of each page gdb wrote to)."""
    status, messages = guard.leave_attached(rec.main.pid, rec.gdb_lost)
    for message in messages:
        rec.warn(message)
    if status is not None and (status != "detached" or rec.gdb_lost or rec.status == "running"):
        rec.status = status
    if not rec.gdb_lost:
        return  # gdb detached from every child itself
    for inferior in [i for i in rec.processes.live() if i is not rec.main]:
        child_status, messages = guard.leave_attached(inferior.pid, True)
        for message in messages:
            rec.warn(message)
        if child_status == "detached":
            rec.processes.detached(inferior, "gdb was lost")
        else:
            rec.processes.exited(inferior.group)


def close(rec: Recorder) -> str:
    """gdb closed, no process of ours left, the session ended; returns the final status."""
    mi = rec.mi
    # After a detach gdb has forgotten the target's libraries: a dump now would file every
    # location under the executable. The one finish_target wrote before detaching stands.
    if mi is not None and mi.alive and rec.main.state != "detached":
        try:
            rec.agent.dump_breakpoints(timeout=20)
        except (GdbDied, AgentError) as exc:
            log.debug("last breakpoint dump: %s", exc)
    if mi is not None:
        mi.close()
    if rec.config.pid is None:
        # gdb went away without taking the launched target (or a child it followed) with it.
        pids = [rec.main.pid] if rec.main.pid and rec.main.state != "detached" else []
        for pid in pids + rec.processes.leftovers():
            if guard.alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError as exc:
                    log.debug("cannot kill %s: %s", pid, exc)
    if rec.config.pid is not None and rec.main.state != "exited":
        _leave_attached_target(rec)
    rec.status = shutdown.final_status(rec.status, rec.end_reason, attached=rec.config.pid is not None)
    if rec.status == "gdb-died" and mi is not None and mi.stderr_tail:
        rec.warn("gdb died: " + " ".join(mi.stderr_tail[-3:]))
    for spec in rec.later.unfound_ops():
        rec.warn(f"--op {spec}: no library the target loaded registers a kernel for it (TORCH_LIBRARY_IMPL "
                 "blocks read: none of them names it); nothing of it was broken on")
    rec.children.close(kill=rec.config.pid is None)  # a run's children go with it; an attach's run on
    if rec.writer:
        rec.keys.settle()
        shutdown.write_op_tables(rec.writer, rec.config.dispatch_tables_later)
        # Names for the frames recorded by library and offset that no fill record has yet.
        rec.tailer.scan(emit=rec.config.live)
        try:
            shutdown.write_suggestions(rec.session_path, rec.writer, rec.torch_libs)
            rec.writer.end(rec.status, rec.exit_code, reason=rec.end_reason)
        except PttraceError as exc:
            rec.write_error = rec.write_error or exc.message
        rec.writer.close()
    if rec.terminal is not None:
        rec.terminal.close()
    rec.mark_finished()
    if rec.tailer is not None:
        rec.tailer.stop()
    rec.emit(RecorderFinished(rec.status))
    return rec.status
