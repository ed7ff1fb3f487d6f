"""Closing the terminal under the TUI ends pttrace (real tmux, real gdb): exit 129, the session closed with
its end record, gdb and the target gone, in every mode of the TUI (stop mode at a hit, record mode while
the target runs, a run whose target has ended, a terminal whose session leader passes no SIGHUP on); SIGTERM
ends it too (143). Before, pttrace stayed alive under PID 1 for ever, blocked
in Textual's shutdown writing to the terminal that was gone, and ignored SIGTERM.

The pane's shell is its session leader: killing the tmux server hangs its terminal up, the shell dies, and
the kernel sends SIGHUP to the foreground job, as when a terminal window is closed. A small wrapper in that
job ignores the hang-up and writes pttrace's exit status to a file (nothing can print it any more).

The targets call libz's zlibVersion through ctypes (libz_once.py, loop.py --no-torch), not torch: the claims
are about pttrace, its terminal and its processes (importing torch took 2.5 s of CPU at load 8)."""
from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import alive, gdb_pids
from tests.support import allowance, run_child
from tests.tui.test_terminal import EXIT_MARK, PTTRACE, TMUX, Terminal, _quote, descendants
from tests.tui.support import ROOT

pytestmark = [pytest.mark.gdb, pytest.mark.skipif(TMUX is None, reason="tmux is not installed"),
              pytest.mark.skipif(not PTTRACE.exists(), reason="pttrace is not installed beside this Python")]

LIBZ_ONCE = ROOT / "tests" / "targets" / "libz_once.py"
WRAPPER = ("import signal, subprocess, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
           "rc = subprocess.call(sys.argv[2:]); open(sys.argv[1], 'w').write(str(rc))")


class LeaderTerminal(Terminal):
    """A pane whose command is its session's leader (exec'd by the pane's shell). The kernel sends SIGHUP at
    a hang-up to the leader only; the others get it when the leader dies of it. This leader (the wrapper)
    ignores it: nothing reaches pttrace, and only the terminal itself can tell it is gone."""

    def __init__(self, command: list[str]):  # noqa: super().__init__ would put a shell in front
        self.folder = tempfile.mkdtemp(prefix="pttrace-tmux-")
        self.socket = os.path.join(self.folder, "socket")
        self.tmux("new-session", "-d", "-x", "160", "-y", "48", "-c", str(ROOT), "sleep 600")
        self.tmux("respawn-pane", "-k", "-t", "0", "-c", str(ROOT), "exec " + " ".join(_quote(a) for a in command))


def _nothing_left(held, before) -> None:
    """Every process of the run (``held``) ends within a load-scaled deadline, and no gdb is left."""
    deadline = time.monotonic() + allowance(20)
    while [p for p in held if alive(p)] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [p for p in held if alive(p)], "a process of the run was left"
    assert gdb_pids() <= before


@pytest.mark.parametrize("mode", ["stop", "record", "ended", "stop-no-sighup"])
def test_closing_the_terminal_ends_pttrace(tmp_path: Path, mode: str):
    sessions, rc_file = tmp_path / "sessions", tmp_path / "rc"
    target = [str(ROOT / "tests/targets/loop.py"), "--no-torch"] if mode == "record" else [str(LIBZ_ONCE)]
    command = [sys.executable, "-c", WRAPPER, str(rc_file), str(PTTRACE), "run", "-b", "zlibVersion",
               "--session-dir", str(sessions), *(["--stop"] if mode.startswith("stop") else []), "--", *target]
    before = gdb_pids()
    term = LeaderTerminal(command) if mode == "stop-no-sighup" else Terminal(command)
    try:
        # GIVEN the TUI in that mode
        term.wait_for("hits 1" if mode != "record" else "hits", timeout=120)
        if mode == "ended":
            term.wait_for("exited", timeout=120)
        elif mode == "record":
            term.wait_for("running", timeout=60)
        held = [p for p in term.processes()]
        # WHEN its terminal goes away
        run_child([TMUX, "-S", term.socket, "kill-server"], capture_output=True, timeout=20)
        # THEN pttrace ends with 129
        end = time.monotonic() + allowance(60)
        while not rc_file.exists():
            assert time.monotonic() < end, f"pttrace did not end after its terminal closed: {held}"
            time.sleep(0.02)
        assert rc_file.read_text() == "129"
        # AND its session is closed (an end record that says why), and nothing of it is left
        lines = next(sessions.glob("*.jsonl")).read_text().splitlines()
        end_record = json.loads(lines[-1])
        assert end_record["type"] == "end" and end_record["reason"] in ("sighup", "exited"), end_record
        _nothing_left(held, before)
    finally:
        term.close()


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def test_sigterm_at_a_stop_ends_pttrace_with_143_and_gives_the_terminal_back(tmp_path: Path):
    sessions, rc_file = tmp_path / "sessions", tmp_path / "rc"
    command = [sys.executable, "-c", WRAPPER, str(rc_file), str(PTTRACE), "run", str(LIBZ_ONCE),
               "-b", "zlibVersion", "--session-dir", str(sessions), "--stop"]
    before = gdb_pids()
    term = Terminal(command)
    try:
        # GIVEN the TUI at a stop (the target held by gdb at its first hit)
        term.wait_for("hits 1", timeout=120)
        (pid,) = [p for p in term.processes() if _argv(p)[1:3] == [str(PTTRACE), "run"]]
        held = [pid, *descendants(pid)]  # pttrace, its gdb and the target
        assert len(held) >= 3, held
        # WHEN it gets SIGTERM
        os.kill(pid, signal.SIGTERM)
        # THEN it ends with 143, the terminal back to the shell, its session closed, nothing of it left
        end = time.monotonic() + allowance(60)
        while not rc_file.exists():
            assert time.monotonic() < end, f"pttrace did not end after SIGTERM: {held}"
            time.sleep(0.02)
        assert rc_file.read_text() == "143"
        term.wait_for(EXIT_MARK, timeout=30)
        end_record = json.loads(next(sessions.glob("*.jsonl")).read_text().splitlines()[-1])
        assert end_record["type"] == "end" and end_record["reason"] == "sigterm", end_record
        _nothing_left(held, before)
    finally:
        term.close()


def test_a_view_whose_terminal_hangs_up_without_sighup_ends(tmp_path: Path):
    # GIVEN `pttrace view` on a terminal whose session leader ignores SIGHUP (it passes nothing on)
    rc_file = tmp_path / "rc"
    command = [sys.executable, "-c", WRAPPER, str(rc_file), str(PTTRACE), "view",
               str(ROOT / "tests" / "data" / "tui_session.jsonl")]
    term = LeaderTerminal(command)
    try:
        term.wait_for("hits", timeout=60)
        (pid,) = [p for p in term.processes() if _argv(p)[1:3] == [str(PTTRACE), "view"]]
        # WHEN the terminal goes away THEN the view ends (it stayed, spinning on its input at 30% CPU)
        run_child([TMUX, "-S", term.socket, "kill-server"], capture_output=True, timeout=20)
        end = time.monotonic() + allowance(30)
        while not rc_file.exists():
            assert time.monotonic() < end, "pttrace view did not end after its terminal closed"
            time.sleep(0.02)
        assert rc_file.read_text() == "129" and not alive(pid)
    finally:
        term.close()
