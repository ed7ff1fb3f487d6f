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

from tests.support import allowance
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
    end = time.monotonic() + allowance(timeout)
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


# A tracer that misses one wake-up, as gdb 13 does under a fork storm: it traces a child, lets it run to its
# next stop, and swallows the SIGCHLD of that stop before waiting for the next one; then it sleeps, its
# tracee in a ptrace stop, the event still waiting in the kernel. Each SIGCHLD after that wakes it once.
_SLEEPY_TRACER = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
kid = os.fork()
if kid == 0:
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME
    os.kill(os.getpid(), signal.SIGSTOP)
    if sys.argv[1:] != ["--exit"]:
        os.kill(os.getpid(), signal.SIGUSR1)  # its second stop: the one whose wake-up is missed
    os._exit(5)  # (with --exit, its end is the missed one)
print(kid, flush=True)
os.waitpid(kid, 0)  # the first stop
libc.ptrace(7, kid, None, None)  # PTRACE_CONT
while open(f"/proc/{kid}/stat").read().rsplit(")", 1)[1].split()[0] not in ("t", "Z"):
    pass
signal.sigtimedwait([signal.SIGCHLD], 0)  # the missed wake-up
while True:
    signal.sigwait([signal.SIGCHLD])
    got, status = os.waitpid(kid, os.WNOHANG | 0x40000000)
    if got and os.WIFSTOPPED(status):
        libc.ptrace(7, kid, None, os.WSTOPSIG(status) if os.WSTOPSIG(status) != signal.SIGUSR1 else 0)
    elif got:
        sys.exit(os.waitstatus_to_exitcode(status))
"""


class _Stub:
    """The watchdog's view of a recording (the process table, the MI connection): only what it reads."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


@pytest.mark.parametrize("missed", ["stop", "exit"])
def test_a_tracer_that_missed_a_wake_up_is_woken_and_goes_on(missed):
    # GIVEN a tracer asleep while its tracee waits in a ptrace stop whose SIGCHLD it missed, or has ended
    # (a zombie the tracer has not reaped: the end of a storm's target that gdb never reported, at load 6)
    import subprocess
    import sys
    tracer = subprocess.Popen([sys.executable, "-c", _SLEEPY_TRACER, *(["--exit"] if missed == "exit" else [])],
                              stdout=subprocess.PIPE, text=True)
    try:
        tracee = int(tracer.stdout.readline())
        _wait_state(tracee, "t" if missed == "stop" else "Z")
        running = _Stub(state="running", pid=tracee, group="i1")
        processes = _Stub(live=lambda: [running], inferiors={"i1": running})
        warnings: list[str] = []
        dog = watchdog.Watchdog(_Stub(proc=tracer, last_notify=0.0), None, processes, None, None, warnings.append)
        # WHEN the recorder's loop looks, again and again, having heard nothing from it
        end = time.monotonic() + allowance(30)
        while tracer.poll() is None:
            assert time.monotonic() < end, f"the tracer was never woken ({dog.wake_ups} wake-ups)"
            assert dog.check(heard=1.0) is False  # never a rescue: a wake-up is enough
            time.sleep(0.05)
        # THEN it was woken (a SIGCHLD), took the stop it had missed and let its tracee run to its end
        assert dog.wake_ups >= 1
        assert tracer.returncode == 5 and not warnings
    finally:
        tracer.kill()
        tracer.wait()


def test_a_handed_over_process_whose_recorder_lost_an_event_is_said_and_counted(tmp_path):
    # GIVEN a process handed to a recorder of its own (as the watchdog hands a storm's target over) whose
    # gdb then lost an event it could not take the run past: that recorder ended there, hits missing
    import subprocess
    import sys
    from tracer.recorder import shutdown
    from tracer.recorder.children import Execd, ExecChildren
    from tracer.recorder.config import TraceConfig
    from tracer.session.storage import SessionWriter

    class EndedByALostEvent:
        """Stands for the child's Recorder: only what ExecChildren asks of it."""
        control = None
        end_reason = shutdown.LOST_EVENT

        def start(self):
            return tmp_path / "s.children" / "1.jsonl"

        def run(self):
            return "interrupted"

        def request_stop(self, reason="interrupted"):
            pass

    held = subprocess.Popen(["sleep", "60"])
    try:
        warnings: list[str] = []
        kids = ExecChildren(TraceConfig(breakpoints=("f",), script="x.py", session_dir=tmp_path), sys.executable,
                            tmp_path / "s.jsonl", SessionWriter(tmp_path / "s.jsonl"),
                            lambda cfg, listener: EndedByALostEvent(), lambda ev: None, warnings.append)
        # WHEN its recorder runs to that end
        kids.hand_over(Execd(held.pid, ["python3", "x.py"], None))
        end = time.monotonic() + allowance(20)
        while not kids.idle():
            assert time.monotonic() < end, "the child's recorder never ended"
            time.sleep(0.02)
        # THEN the recording knows (its end is then interrupted, exit 3: ending.py) and says which process
        assert kids.lost == [held.pid]
        assert any(f"process {held.pid}" in w and "missing" in w for w in warnings), warnings
    finally:
        held.kill()
        held.wait()
