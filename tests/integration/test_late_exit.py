"""A target's end that gdb reports late (real gdb, real processes): on a busy machine gdb can take seconds to
report a normal exit. pttrace must wait for it, or read the end from the zombie itself, and never call
such a run a crash or lose its exit code (it once did at load 14: test_processes' main process)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import PTTRACE, ROOT, gdb_pids
from tests.support import allowance, stop_process, wait_for
from tracer.recorder import guard
from tracer.session import storage

pytestmark = pytest.mark.gdb

TARGET = '''\
import os, sys, time
from pathlib import Path
here = Path(sys.argv[1])
(here / "pid").write_text(str(os.getpid()))
while not (here / "go").exists():
    time.sleep(0.01)
sys.exit(7)
'''
# The recorder asks whether every process gdb holds has gone without a word once gdb has been quiet for
# 2 s, then every second (recorder.py): holding gdb back for 5 s gives it that chance twice or more.
HELD = 5.0


def its_gdb(pttrace: int) -> int:
    def child_gdb():
        for pid in gdb_pids():
            if guard.status_number(pid, "PPid") == pttrace:
                return pid
        return None
    return wait_for(child_gdb, 60, "pttrace's gdb")


def test_an_exit_gdb_reports_late_keeps_its_exit_code(tmp_path):
    # GIVEN a run whose target will exit with code 7 when told to
    (tmp_path / "target.py").write_text(TARGET)
    sessions = tmp_path / "sessions"
    p = subprocess.Popen([*PTTRACE, "run", "--batch", "--break", "PyOS_AfterFork_Child", "--session-dir",
                          str(sessions), "target.py", str(tmp_path)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    gdb = None
    try:
        target = int(wait_for(lambda: (tmp_path / "pid").is_file() and (tmp_path / "pid").read_text(), 120,
                              "the target's pid"))
        gdb = its_gdb(p.pid)
        # WHEN gdb cannot run (stopped, as a starved gdb on a loaded machine cannot) while the target exits
        os.kill(gdb, signal.SIGSTOP)
        (tmp_path / "go").touch()
        wait_for(lambda: guard.process_state(target) == "Z", 60, "the target to end (a zombie gdb has not reaped)")
        assert guard.zombie_end(target) == (7, None)
        time.sleep(HELD)  # the recorder's own fixed intervals, not a guess at the machine's speed
        if guard.process_state(gdb) == "T":  # (a pttrace that gave up on gdb has ended it)
            os.kill(gdb, signal.SIGCONT)
        out, err = p.communicate(timeout=allowance(120))
    finally:
        if gdb is not None and guard.process_state(gdb) == "T":
            os.kill(gdb, signal.SIGCONT)
        stop_process(p)
    # THEN the run is a completed one with the target's own exit code, and no crash is claimed
    assert p.returncode == 0, err.decode(errors="replace")
    files = sorted(sessions.glob("*.jsonl"))
    session = storage.load(files[0])
    assert session.info.status == "completed", session.info
    assert session.info.exit_code == 7 and session.processes[0].exit_code == 7, session.processes
    assert not any("killed" in w for w in session.info.warnings), session.info.warnings


def test_a_zombies_end_is_read_from_proc():
    # GIVEN two children that ended, not reaped: one exited with 3, one killed by SIGTERM
    exited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        killed.send_signal(signal.SIGTERM)
        wait_for(lambda: guard.process_state(exited.pid) == "Z" and guard.process_state(killed.pid) == "Z", 30,
                 "both children to be zombies")
        # THEN their ends read as waitpid would report them; a live process has none
        assert guard.zombie_end(exited.pid) == (3, None)
        assert guard.zombie_end(killed.pid) == (None, "SIGTERM")
        assert guard.zombie_end(os.getpid()) is None
    finally:
        for child in (exited, killed):
            child.kill()
            child.wait()


# A process whose main thread has ended (the exit system call, not exit_group) while another thread runs: its
# leader is a zombie, the process is not over.
HALF_ENDED = '''\
import ctypes, threading, time
threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: this thread only
'''


def test_a_child_whose_last_thread_gdb_said_ended_has_the_end_its_zombie_holds():
    # GIVEN the process table of a run following a child that has exited with 3, not reaped yet (a zombie), and
    # one whose main thread ended while another runs
    from tracer.recorder.inferiors import Inferior
    from tracer.recorder.processes import ProcessTable

    exited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    half = subprocess.Popen([sys.executable, "-c", HALF_ENDED])
    try:
        wait_for(lambda: guard.process_state(exited.pid) == "Z" and guard.process_state(half.pid) == "Z", 30,
                 "a zombie and a zombie leader")
        warnings: list[str] = []
        table = ProcessTable(Inferior("i1", pid=os.getpid(), state="running"), lambda: None, warnings.append)
        for group, pid in (("i2", exited.pid), ("i3", half.pid)):
            table.inferiors[group] = Inferior(group, pid=pid, state="running")
        # WHEN gdb says a thread of each ended (=thread-exited), and never that the process did (gdb 13 under a
        # fork storm)
        table.thread_exited("i2")
        table.thread_exited("i3")
        # THEN the first is recorded as exited with 3, as its parent's waitpid gets it; the other runs on
        child = table.inferiors["i2"]
        assert (child.state, child.exit_code, child.signal, child.end_reported) == ("exited", 3, None, False)
        assert table.inferiors["i3"].live and guard.ended_whole(half.pid) is None
        # AND gdb's own word, should it come, changes nothing
        table.exited("i2", 3)
        assert (child.state, child.exit_code) == ("exited", 3) and table.last_exited is child and not warnings
        assert child.end_reported
    finally:
        for child in (exited, half):
            child.kill()
            child.wait()
