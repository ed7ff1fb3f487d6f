"""The launched target's streams and signals as it has them alone (real gdb, real processes): its stderr
apart from its stdout when pttrace's are apart (``2>file``), both still terminals; and a stop signal sent to
it keeps it stopped until SIGCONT, the fork-storm watchdog taking no such stop for an event gdb lost."""
from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PTTRACE, ROOT
from tests.support import Lines, allowance, run_child, stop_process, wait_for
from tracer.recorder import watchdog
from tracer.session import storage

pytestmark = pytest.mark.gdb

TARGETS = ROOT / "tests" / "targets"
# The targets' stops are in libz, not torch (streams.py's STREAMS_NO_TORCH; ticks.py has no torch): the
# claims are about the target's streams and signals, and importing torch took 2.5 s of CPU at load 8 a run.
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "STREAMS_NO_TORCH": "1"}
STOP = "zlibCompileFlags"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return "gone"


def test_stderr_stays_apart_from_stdout_and_both_are_terminals(tmp_path: Path):
    # GIVEN a target that writes to its stdout and its stderr
    # WHEN pttrace's own stdout and stderr are two pipes
    proc = run_child([*PTTRACE, "run", "--batch", "--session-dir", str(tmp_path / "s"), "-b",
                      STOP, str(TARGETS / "streams.py")], cwd=tmp_path, input=b"",
                     capture_output=True, timeout=600, env=ENV)
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    assert proc.returncode == 0, err
    # THEN the target's stdout is on pttrace's stdout, its stderr on pttrace's stderr, each a terminal
    assert "OUT1 tty=True" in out and "OUT2" in out and "ERR" not in out, out
    assert "ERR tty=True" in err and "OUT" not in err, err
    (hit,) = storage.load(next((tmp_path / "s").glob("*.jsonl"))).hits
    assert hit.frames[-1].function == STOP


def test_one_stream_keeps_the_targets_order(tmp_path: Path):
    # GIVEN the same target, WHEN pttrace's stderr is its stdout (2>&1)
    proc = run_child([*PTTRACE, "run", "--batch", "--session-dir", str(tmp_path / "s"), "-b",
                      STOP, str(TARGETS / "streams.py")], cwd=tmp_path, input=b"",
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600, env=ENV)
    out = proc.stdout.decode(errors="replace")
    assert proc.returncode == 0, out
    # THEN the three lines come in the order the target wrote them
    lines = [x for x in out.splitlines() if re.match(r"(OUT|ERR)", x)]
    assert lines == ["OUT1 tty=True", "ERR tty=True", "OUT2"], out


def test_a_stopped_target_stays_stopped_until_sigcont_and_the_watchdog_keeps_out(tmp_path: Path):
    # GIVEN a target recorded as it ticks (a hit a tick)
    flag = tmp_path / "stop-now"
    proc = subprocess.Popen([*PTTRACE, "run", "--batch", "--session-dir", str(tmp_path / "s"), "-b",
                             STOP, str(TARGETS / "ticks.py"), str(flag)], cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    try:
        lines = Lines(proc.stdout, "pttrace")
        pid = int(lines.until(lambda x: x.startswith("PID "), 300).split()[1])
        lines.until(lambda x: x.startswith("tick "), 120)
        # WHEN it gets SIGSTOP, as `kill -STOP` sends it
        os.kill(pid, signal.SIGSTOP)
        wait_for(lambda: _state(pid) == "t", 30, "the target to stop")
        while True:  # the ticks it printed before it stopped
            try:
                lines.next(1.0)
            except AssertionError:
                break
        # THEN it stays stopped for longer than the watchdog takes to call a stop lost (nothing else can
        # show that the watchdog left it alone: this one wait is that window, load-scaled)
        with pytest.raises(AssertionError, match="said nothing"):
            lines.next(watchdog.STUCK_FOR + watchdog.CHECK_EVERY + 3.0)
        assert _state(pid) == "t"
        # and goes on once it gets SIGCONT, to its end, every tick recorded
        os.kill(pid, signal.SIGCONT)
        lines.until(lambda x: x.startswith("tick "), 60)
        flag.touch()
        ticks = int(lines.until(lambda x: x.startswith("TICKS "), 120).split()[1])
        assert proc.wait(timeout=allowance(120)) == 0, proc.stderr.read()
    finally:
        stop_process(proc)
    session = storage.load(next((tmp_path / "s").glob("*.jsonl")))
    assert len(session.hits) == ticks
    assert session.info.status == "completed", session.info.warnings
    assert not [w for w in session.info.warnings if "gdb lost" in w], session.info.warnings
