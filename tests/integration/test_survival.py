"""An attached target outlives whatever happens to gdb or pttrace; every session gets its end; the
target's arguments and library paths reach it intact or are refused before it starts; exit codes
tell how a run ended. Real gdb, real processes; nothing is left running. The targets stop in libz's
zlibCompileFlags, not in torch: the claims are about the processes and gdb (importing torch took 2.5 s of
CPU at load 8 a target)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PTTRACE, ROOT, gdb_pids, run_pttrace
from tests.integration.test_faults import children_of, gone, no_leftovers, session_in, wait_for_hits  # noqa: F401
from tests.support import Lines, allowance, signalled_when, stop_process, wait_for
from tracer.recorder.guard import process_state, traced_by

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGETS = ROOT / "tests" / "targets"
STOP = "zlibCompileFlags"


def last_record(directory: Path) -> dict:
    (path,) = directory.glob("*.jsonl")
    return json.loads(path.read_text().splitlines()[-1])


def attach(target: subprocess.Popen, sessions: Path) -> subprocess.Popen:
    return subprocess.Popen([*PTTRACE, "attach", str(target.pid), "--batch", "-b", STOP,
                             "--session-dir", str(sessions)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def its_gdb(p: subprocess.Popen) -> int:
    (gdb,) = [c for c in children_of(p.pid) if c in gdb_pids()]
    return gdb


def runs_on_untraced(target: subprocess.Popen, lines: Lines) -> None:
    """Two more of its own beats printed after pttrace ended (each one past a zlibCompileFlags call,
    where the breakpoint was), then untraced and not stopped."""
    fresh_beat(lines)
    fresh_beat(lines)
    assert target.poll() is None, f"the attached target died ({target.returncode})"
    assert traced_by(target.pid) == 0
    assert process_state(target.pid) in ("S", "R")


def fresh_beat(lines: Lines) -> str:
    """A "beat" the target prints now, not one waiting in the pipe: it just left a hit."""
    return lines.fresh(lambda line: line.startswith("beat"), timeout=30)


@pytest.fixture
def slow_target(tmp_path):
    hold = tmp_path / "hold"  # while it exists the target waits between two calls (slow_beat.py)
    target = subprocess.Popen([sys.executable, str(TARGETS / "slow_beat.py"), str(hold)], stdout=subprocess.PIPE,
                              text=True)
    target.lines = Lines(target.stdout, "slow_beat.py")
    target.hold = hold
    try:
        assert target.lines.next(60).strip() == "ready"
        yield target
    finally:
        stop_process(target)


def test_gdb_killed_while_attached_leaves_no_breakpoint_behind(tmp_path, no_leftovers, slow_target):
    # GIVEN pttrace attached and recording
    p = attach(slow_target, tmp_path)
    try:
        wait_for_hits(tmp_path, 2)
        gdb = its_gdb(p)
        # WHEN its gdb is killed with SIGKILL while the target runs (between two hits, the breakpoints
        # in its code; held there: a hit gdb is handling at that moment ends the target, the kernel's
        # SIGTRAP, and so does one reached before pttrace's repair, as the README says)
        fresh_beat(slow_target.lines)
        slow_target.hold.touch()
        slow_target.lines.until(lambda line: line.strip() == "held")
        os.kill(gdb, signal.SIGKILL)
        out, err = p.communicate(timeout=allowance(60))
        slow_target.hold.unlink()
    finally:
        stop_process(p)
    # THEN pttrace puts the original bytes back: the target runs on; the session says what happened
    assert p.returncode == 3, err
    runs_on_untraced(slow_target, slow_target.lines)
    s = session_in(tmp_path)
    assert s.info.status == "detached"
    assert any("killed by signal 9" in w for w in s.info.warnings)
    assert any("breakpoint instruction(s)" in w and "put the original bytes back" in w for w in s.info.warnings)
    assert last_record(tmp_path)["type"] == "end"


def test_gdb_stopped_then_pttrace_terminated_detaches_cleanly(tmp_path, no_leftovers, slow_target):
    p = attach(slow_target, tmp_path)
    gdb = None
    try:
        wait_for_hits(tmp_path, 2)
        # WHEN gdb is stopped (the target soon waits at a breakpoint for it) and pttrace gets SIGTERM
        gdb = its_gdb(p)
        os.kill(gdb, signal.SIGSTOP)
        wait_for(lambda: process_state(slow_target.pid) == "t", 30, "the target to wait at a breakpoint for gdb",
                 why=lambda: f"state {process_state(slow_target.pid)}")
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=allowance(60))
        took = time.monotonic() - t0
    finally:
        stop_process(p)
        if gdb and process_state(gdb) == "T":
            os.kill(gdb, signal.SIGCONT)
    # THEN pttrace lets gdb go on, detaches, and ends with 143; the target runs on
    assert p.returncode == 143, err
    assert took < allowance(30), took
    runs_on_untraced(slow_target, slow_target.lines)
    s = session_in(tmp_path)
    assert s.info.status == "detached"
    assert any("gdb was stopped by a signal" in w for w in s.info.warnings)


def test_sighup_while_attached_ends_the_session_and_the_target_runs_on(tmp_path, no_leftovers, slow_target):
    p = attach(slow_target, tmp_path)
    out, err = signalled_when(p, lambda: wait_for_hits(tmp_path, 2), signal.SIGHUP)
    assert p.returncode == 129, err
    assert last_record(tmp_path)["type"] == "end"
    assert session_in(tmp_path).info.status == "detached"
    runs_on_untraced(slow_target, slow_target.lines)


def test_sighup_during_a_run_ends_the_session_and_the_target(tmp_path, no_leftovers):
    p = subprocess.Popen([*PTTRACE, "run", "--batch", "-b", STOP, "--session-dir", str(tmp_path),
                          str(TARGETS / "slow_beat.py")], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = signalled_when(p, lambda: wait_for_hits(tmp_path, 1), signal.SIGHUP)
    assert p.returncode == 129, err
    end = last_record(tmp_path)
    assert end["type"] == "end" and end["status"] == "interrupted" and end["reason"] == "sighup"
    gone(str(TARGETS / "slow_beat.py"))


def test_a_library_dlopened_from_a_path_with_a_line_break(tmp_path, no_leftovers):
    proc = run_pttrace("run", "--batch", "-b", "zlibCompileFlags", "--session-dir", str(tmp_path / "s"),
                       str(TARGETS / "dlopen_newline.py"), str(tmp_path / "lib"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "loaded" in proc.stdout
    s = session_in(tmp_path / "s")
    assert s.info.status == "completed" and len(s.hits) == 1


def test_twenty_thousand_arguments_and_arguments_with_line_breaks_reach_the_target(tmp_path, no_leftovers):
    # One run for both (each is a whole run under gdb): the odd ones first, then 20,000 more (no torch in the
    # target: the claim is about its arguments)
    odd = ["two\nlines", "a b", "", "tab\there", "'quoted'"]
    args = odd + [str(i) for i in range(20000)]
    proc = run_pttrace("run", "--batch", "-q", "-b", "zlibVersion", "--session-dir", str(tmp_path),
                       "--", str(TARGETS / "argv_echo.py"), *args, env={"ARGV_ECHO_NO_TORCH": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ARGV="))
    got = json.loads(line[5:])
    assert got[:len(odd)] == odd  # line breaks, spaces, an empty one, a tab and quotes, each as given
    assert got == args  # and every one of the 20,000, in order


def test_arguments_too_long_for_gdb_are_refused_before_anything_starts(tmp_path, no_leftovers):
    args = ["a b" * 1000] * 60  # 180 kB with spaces: more than gdb's start-up shell can be given
    proc = run_pttrace("run", "--batch", "-b", "THPVariable_tensor", "--session-dir", str(tmp_path),
                       str(TARGETS / "argv_echo.py"), *args)
    assert proc.returncode == 2
    assert proc.stderr.startswith("pttrace: the script's arguments are too long") and "Traceback" not in proc.stderr
    assert len(proc.stdout) < 1000
    assert not list(tmp_path.glob("*.jsonl"))


FORKING = '''\
import ctypes, os, sys, time
call = ctypes.CDLL("libz.so.1").zlibCompileFlags
go, stop, hold = sys.argv[1:4]
print("ready", flush=True)
while not os.path.exists(go):
    call()
    time.sleep(0.05)
pid = os.fork()
if pid == 0:
    n = 0
    while not os.path.exists(stop):
        if os.path.exists(hold):  # the test kills gdb while no call of the child is near a breakpoint
            print("held", flush=True)
            while os.path.exists(hold):
                time.sleep(0.02)
        call()
        n += 1
        print(f"beat {n}", flush=True)
        time.sleep(0.4)
    os._exit(7)
print("child", pid, flush=True)
_, status = os.waitpid(pid, 0)
print("child-exit", os.waitstatus_to_exitcode(status), flush=True)
'''


def test_gdb_killed_while_attached_leaves_no_breakpoint_in_a_followed_child(tmp_path, no_leftovers):
    # GIVEN pttrace attached to a parent that then forks a child calling zlibCompileFlags, followed by gdb (a
    # name gdb resolves: the child stops at its entry by address, agent/breakpoints.py add_child_entries)
    go, stop, hold, sessions = tmp_path / "go", tmp_path / "stop", tmp_path / "hold", tmp_path / "sessions"
    (tmp_path / "parent.py").write_text(FORKING)
    target = subprocess.Popen([sys.executable, str(tmp_path / "parent.py"), str(go), str(stop), str(hold)],
                              stdout=subprocess.PIPE, text=True)
    lines = Lines(target.stdout, "parent.py")
    p = None
    try:
        assert lines.next(60).strip() == "ready"
        p = attach(target, sessions)
        wait_for_hits(sessions, 2)  # the parent's own: gdb is attached
        go.touch()
        child = int(lines.until(lambda line: line.startswith("child ")).split()[1])
        fresh_beat(lines)  # the child's hits are recorded (its first one set its symbols up)
        fresh_beat(lines)
        # WHEN gdb is killed with SIGKILL between two of the child's hits (the child held between them:
        # a call that reaches a breakpoint before pttrace's repair dies of it, as the README says, and
        # on a loaded machine the repair came after the child's next call once: it died of SIGTRAP)
        hold.touch()
        lines.until(lambda line: line.strip() == "held")
        os.kill(its_gdb(p), signal.SIGKILL)
        out, err = p.communicate(timeout=allowance(60))
        assert p.returncode == 3, err
        hold.unlink()
        # THEN the child's copy of gdb's breakpoints is put back too: it runs on past its next hits
        fresh_beat(lines)
        fresh_beat(lines)
        assert process_state(child) in ("S", "R") and traced_by(child) == 0, process_state(child)
        s = session_in(sessions)
        assert any(f"in process {child} " in w and "put the original bytes back" in w for w in s.info.warnings), \
            s.info.warnings
        stop.touch()
        line = lines.until(lambda line: not line.startswith("beat"))
        assert line.split() == ["child-exit", "7"], line
        assert target.wait(allowance(60)) == 0
    finally:
        stop.touch()
        for proc in (p, target):
            stop_process(proc)
