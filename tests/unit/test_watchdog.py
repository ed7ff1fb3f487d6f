"""The parts the watchdog (tracer/recorder/watchdog.py) and its raw ptrace (tracer/gdb/agent/rescue.py)
are made of, on real processes traced by this test itself as gdb traces its inferiors: a child that asks
to be traced and forks, its fork's event stop and its own child's first stop (what gdb lost under a
fork storm), read, continued and let go held."""
from __future__ import annotations

import ctypes
import os
import signal
import time

import pytest

from tracer.gdb.agent import rescue
from tracer.recorder import watchdog

PTRACE_TRACEME, PTRACE_SETOPTIONS, PTRACE_GETEVENTMSG = 0, 0x4200, 0x4201
PTRACE_O_TRACEFORK = 0x2
_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return None


def _wait_state(pid: int, states: str, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    while _state(pid) not in states:
        assert time.monotonic() < end, f"process {pid} never reached state {states} ({_state(pid)})"
        time.sleep(0.02)


@pytest.fixture
def forking_tracee():
    """A child traced by this process, stopped at its fork's event stop, and the grandchild it forked,
    stopped at its first stop: both held, as gdb held them when it lost the fork."""
    pid = os.fork()
    if pid == 0:  # the child: traced from here, forks once, waits for its own child, exits
        try:
            _libc.ptrace(PTRACE_TRACEME, 0, None, None)
            os.kill(os.getpid(), signal.SIGSTOP)
            kid = os.fork()
            if kid == 0:
                os._exit(7)
            os._exit(os.waitstatus_to_exitcode(os.waitpid(kid, 0)[1]))
        finally:
            os._exit(99)
    kids = [pid]
    try:
        _, status = os.waitpid(pid, 0)
        assert os.WIFSTOPPED(status) and os.WSTOPSIG(status) == signal.SIGSTOP
        assert _libc.ptrace(PTRACE_SETOPTIONS, pid, None, PTRACE_O_TRACEFORK) == 0
        rescue.resume(pid, 0)
        _, status = os.waitpid(pid, 0)  # the fork's event stop
        assert os.WIFSTOPPED(status) and status >> 16 == 1, hex(status)
        msg = ctypes.c_ulong()
        assert _libc.ptrace(PTRACE_GETEVENTMSG, pid, None, ctypes.addressof(msg)) == 0
        grandchild = msg.value
        kids.append(grandchild)
        _, status = os.waitpid(grandchild, os.__dict__.get("__WALL", 0x40000000))  # its first stop
        assert os.WIFSTOPPED(status)
        yield pid, grandchild
    finally:
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
            except OSError:
                pass
        for kid in kids:
            try:
                os.waitpid(kid, 0)
            except ChildProcessError:
                pass


def test_the_watchdog_sees_what_gdb_lost_and_rescue_takes_it_on(forking_tracee):
    parent, child = forking_tracee
    # The look: both are held by this process (their tracer), every thread of theirs in a ptrace stop
    assert {parent, child} <= set(watchdog.traced_by(os.getpid()))
    assert watchdog.all_in_ptrace_stop([parent, child])
    # Why each stopped: the parent at its fork's event, the child for the SIGSTOP of its first stop
    assert rescue.stop_info(parent)["event"] == "fork"
    info = rescue.stop_info(child)
    assert info["event"] is None and info["signal"] == "SIGSTOP"
    # The child gdb never announced is let go held (stopped, no longer traced) for a recorder of its own
    rescue.release_held(child)
    _wait_state(child, "T")
    assert watchdog.traced_by(os.getpid()) == [parent] or child not in watchdog.traced_by(os.getpid())
    # The parent is continued from its fork; its child runs on once continued; the parent (still traced,
    # its SIGCHLDs passed on as gdb does) sees it exit
    rescue.resume(parent, 0)
    os.kill(child, signal.SIGCONT)
    while True:
        _, status = os.waitpid(parent, 0)
        if not os.WIFSTOPPED(status):
            break
        rescue.resume(parent, os.WSTOPSIG(status))
    assert os.waitstatus_to_exitcode(status) == 7  # the child's exit, seen by its parent


def test_a_request_the_agent_cannot_do_is_one_json_answer():
    assert '"error"' in rescue.command("resume 1")
    assert '"error"' in rescue.command("bogus 1 2")
    assert '"error"' in rescue.command("info x")
    assert rescue.command("info 999999999").startswith("[")  # no such thread: its error, not an exception


def test_a_run_ended_by_a_lost_event_is_not_a_run_that_ended_as_asked():
    # GIVEN the end reason the watchdog gives when gdb lost a stop it cannot take the run past
    from tracer.recorder import shutdown
    reason = shutdown.LOST_EVENT
    # THEN the session's status is not "completed" and pttrace's exit code says gdb failed (README: Exit codes)
    assert shutdown.final_status("running", reason, attached=False) == "interrupted"
    assert shutdown.exit_code(reason, gdb_lost=False) == shutdown.EXIT_GDB_LOST == 3
    # while a run that ended as asked still exits 0, and a signal still wins
    assert shutdown.exit_code("exited", gdb_lost=False) == 0
    assert shutdown.exit_code("sigterm", gdb_lost=False) == 143
