"""The installed ``pttrace`` in a real terminal: tmux runs it, sends keys, and reads the screen back.

Each test has its own tmux server (``-S`` socket in a temporary directory, removed afterwards), so
it neither sees nor touches anyone else's sessions, and ``-f /dev/null`` keeps the user's tmux
configuration out.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import alive
from tests.support import LIBFFI, allowance, run_child, wait_for
from tests.tui.support import FIXTURE, ROOT

TMUX = shutil.which("tmux")
PTTRACE = Path(sys.executable).parent / "pttrace"
HELLO = ROOT / "scripts" / "hello-world.py"
# One call to libz's zlibVersion, no torch: for a claim about the terminal, not torch (importing torch took
# 2.5 s of CPU at load 8)
LIBZ_ONCE = ROOT / "tests" / "targets" / "libz_once.py"

pytestmark = [
    pytest.mark.skipif(TMUX is None, reason="tmux is not installed"),
    pytest.mark.skipif(not PTTRACE.exists(), reason="pttrace is not installed beside this Python"),
]


EXIT_MARK = "pttrace-test-exit-status="


def _next_poll(step: float) -> float:
    """Sleep before the screen's next capture, and return the sleep after that: 20 ms at first, growing to 0.2 s.
    A key's answer is on screen within a few captures; a wait for gdb, seconds long, is read five times a
    second (each capture is a tmux client: a fixed 0.2 s found a key's answer up to 0.2 s late)."""
    step = min(max(step * 1.5, 0.02), 0.2)
    time.sleep(step)
    return step


class Terminal:
    """A 160x48 tmux pane running one command under a shell that prints its exit status after it.

    The shell, not tmux, tells the exit status: on a loaded machine tmux was seen to leave the
    exited command a zombie for many seconds, so ``#{pane_dead}`` is not a reliable witness.
    """

    def __init__(self, command: list[str], cwd: Path = ROOT, size: tuple[int, int] = (160, 48)):
        self.folder = tempfile.mkdtemp(prefix="pttrace-tmux-")
        self.socket = os.path.join(self.folder, "socket")
        line = " ".join(_quote(a) for a in command)
        # (the status is kept before the blank line's echo: "$?" after it was that echo's 0, whatever pttrace returned)
        line = f"sh -c {_quote(line + '; status=$?; echo; echo ' + EXIT_MARK + '$status; exec sleep 600')}"
        # The pane is born 80x24 and resized; a program that starts at once can miss the resize.
        # So the pane first holds a placeholder, and the command replaces it at the final size.
        self.tmux("new-session", "-d", "-x", str(size[0]), "-y", str(size[1]), "-c", str(cwd), "sleep 600")
        self.tmux("respawn-pane", "-k", "-t", "0", "-c", str(cwd), line)

    def tmux(self, *args: str) -> str:
        # An explicit env: under pytest the C-level environment carries COLUMNS=80 LINES=24 (readline
        # puts them there, os.environ does not show them), and a program in the pane would believe them.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        proc = run_child([TMUX, "-S", self.socket, "-f", "/dev/null", *args], capture_output=True,
                         text=True, timeout=20, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def screen(self, history: int = 0) -> str:
        """The visible screen, and ``history`` lines above it that scrolled away."""
        return self.tmux("capture-pane", "-p", "-t", "0", "-S", str(-history))

    def keys(self, *keys: str) -> None:
        """One key at a time, as a quick typist types (each its own write to the terminal). Escape is followed by
        a longer gap: with the next key in the same read, the app takes both as one alt+ key."""
        for key in keys:
            self.tmux("send-keys", "-t", "0", key)
            time.sleep(0.15 if key == "Escape" else 0.05)

    def wait_for(self, *texts: str, timeout: float = 15.0) -> str:
        timeout = allowance(timeout)
        end = time.monotonic() + timeout
        step = 0.0
        while True:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            if time.monotonic() > end:
                raise AssertionError(f"{texts} not on screen after {timeout:.0f} s:\n{screen}")
            step = _next_poll(step)

    def wait_gone(self, text: str, timeout: float = 15.0) -> str:
        """The screen once ``text`` has left it (a dialog closed: the repaint can lag the key on a busy machine)."""
        timeout = allowance(timeout)
        end = time.monotonic() + timeout
        step = 0.0
        while True:
            screen = self.screen()
            if text not in screen:
                return screen
            if time.monotonic() > end:
                raise AssertionError(f"{text!r} still on screen after {timeout:.0f} s:\n{screen}")
            step = _next_poll(step)

    def exit_status(self, timeout: float = 30.0) -> int:
        screen = self.wait_for(EXIT_MARK, timeout=timeout)
        return int(screen.split(EXIT_MARK, 1)[1].split()[0])

    def processes(self) -> list[int]:
        """The tmux server and everything under it (the pane's shell, pttrace, its gdb, the target)."""
        try:
            server = int(self.tmux("display-message", "-p", "#{pid}").strip())
        except (AssertionError, ValueError, subprocess.TimeoutExpired):
            return []
        return [server, *descendants(server)]

    def close(self) -> None:
        """Kill the server (its panes get SIGHUP: pttrace ends its run), wait for every process it held to
        end, and kill what is left: a failed test leaves nothing running."""
        held = self.processes()
        run_child([TMUX, "-S", self.socket, "kill-server"], capture_output=True, timeout=20)
        try:
            wait_for(lambda: not [pid for pid in held if alive(pid)], 30, "the terminal's processes to end")
        except AssertionError:
            for pid in held:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


def descendants(pid: int) -> list[int]:
    """Every process under ``pid``, from the kernel's list of each task's children."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            out += children
            todo += children
    return out


def _quote(arg: str) -> str:
    return "'" + str(arg).replace("'", "'\\''") + "'"


@pytest.fixture
def terminal():
    opened: list[Terminal] = []

    def start(command: list[str], size: tuple[int, int] = (160, 48)) -> Terminal:
        t = Terminal(command, size=size)
        opened.append(t)
        return t

    yield start
    for t in opened:
        t.close()


def test_view_in_a_real_terminal(terminal):
    term = terminal([str(PTTRACE), "view", str(FIXTURE)])
    screen = term.wait_for("breakpoints (4)", "hits (4)", "scripts/hello-world.py:10", "q quit")
    assert "x = torch.tensor([1.0, 2.0, 3.0])" in screen
    assert "recorded, completed" in screen

    term.keys("Down", "Down")
    # (the source pane reads its file after the call path is drawn: both are waited for)
    term.wait_for("hit #3 · wrapper_CPU_sigmoid", "binding     torch::autograd::THPVariable_sigmoid", "Autograd",
                  "kernel      at::wrapper_CPU_sigmoid", "▶361         return torch.sigmoid(input)")

    term.keys("u")
    term.wait_for("_PyEval_EvalFrame", "68 frames ─")
    term.keys("q")
    assert term.exit_status() == 0


@pytest.mark.gdb
def test_run_records_live_in_a_real_terminal(terminal, tmp_path):
    term = terminal([str(PTTRACE), "run", "--session-dir", str(tmp_path), "--break", "zlibVersion",
                     str(LIBZ_ONCE)])
    # The TUI comes up at once; gdb starts in a worker, the run ends on its own (its one hit just before its
    # end: the call path may be drawn after the status line says so)
    term.wait_for("breakpoints (1)", "gdb ", timeout=15)
    screen = term.wait_for("exited (completed)", "hits 1", "call path · hit #1 · zlibVersion", timeout=120)
    assert "│called " in screen.split("target output", 1)[-1]  # the target's output, in its pane
    # AND the session's warning (the ctypes call's nameless libffi frames) on its own line, above the status:
    # never in that pane, where its long text scrolled the target's line out of view
    [line] = [row for row in screen.splitlines() if "⚠ 1 warning (w lists them)" in row]
    assert f"frames in /lib/x86_64-linux-gnu/{LIBFFI} have no function name" in line, screen
    assert "no function name" not in screen.split("target output", 1)[-1].split("⚠", 1)[0], screen
    term.keys("q")  # the run has ended: no question asked
    assert term.exit_status() == 0
    screen = term.screen(history=10)
    assert "pttrace: session saved to" in screen and "(completed, 1 hit)" in screen
    assert len(list(tmp_path.glob("*.jsonl"))) == 1


@pytest.mark.gdb
def test_stop_mode_finish_and_quit_in_a_real_terminal(terminal, tmp_path):
    """Stop mode chosen with m. (``run --stop`` in stop mode from the start, stopped at the first hit in a real
    terminal: test_terminal_faults.py's stop-mode run; finish from torch's kernel to its adapter, against plain
    gdb: test_steps_vs_gdb.py.) The target calls libz once its gate file exists, not torch: the claims are the
    terminal's keys and the quit's."""
    gate = tmp_path / "gate"
    term = terminal([str(PTTRACE), "run", "--session-dir", str(tmp_path), "--break", "zlibVersion",
                     str(ROOT / "tests" / "targets" / "libz_gate.py"), str(gate)])
    term.wait_for("breakpoints (1)", "gdb ", timeout=15)
    # WHEN m is pressed at once THEN it stops at the first hit (let happen once stop mode is on)
    term.keys("m")
    term.wait_for("mode stop", timeout=30)
    gate.touch()
    # (the call path fills in after the title: wait for both, a busy machine paints them apart)
    term.wait_for("target stopped", "mode stop", "hit #1 · zlibVersion", "s step", timeout=120)
    # WHEN f is pressed THEN zlibVersion returns and the path ends in libffi's ffi_call, which called it
    term.keys("f")
    screen = term.wait_for("where finish stopped", "ffi_call", timeout=60)
    pid = int(screen.split("│  pid ", 1)[1].split()[0])
    # WHEN q is pressed THEN pttrace asks first; n keeps the run, q then y kills the target
    term.keys("q")
    term.wait_for("Quit and kill the target", "Quit [y]", "Stay [n]")
    term.keys("n")
    screen = term.wait_gone("Quit and kill the target")
    assert "target stopped" in screen
    term.keys("q", "y")
    assert term.exit_status() == 0
    assert "(interrupted, 1 hit)" in term.screen(history=10)
    assert not alive(pid), "the launched target outlived pttrace"


@pytest.mark.gdb
def test_batch_in_a_real_terminal_stays_headless(terminal, tmp_path):
    """On a terminal the TUI is the default; --batch keeps the headless summary."""
    term = terminal([str(PTTRACE), "run", "--batch", "--session-dir", str(tmp_path), "--break", "zlibVersion",
                     "--max-hits", "1", str(LIBZ_ONCE)])
    assert term.exit_status(timeout=120) == 0
    # (a TUI would wait for q after the run: the exit status would not come)
    screen = term.screen(history=60)
    assert "status: completed" in screen and "breakpoint zlibVersion  1 hit" in screen  # the batch summary
    assert "export it with: pttrace export" in screen and "view it again with" not in screen
    for tui_only in ("breakpoints (", "╭─ hits", "target output", "^p palette"):
        assert tui_only not in screen, tui_only
    assert len(list(tmp_path.glob("*.jsonl"))) == 1


@pytest.mark.gdb
def test_a_target_reading_stdin_says_so_and_takes_typed_input(terminal, tmp_path):
    """A launched target blocked in input(): the status line says it waits for input (nothing hangs
    silently); > opens the input bar, and the line typed there reaches the target."""
    target = ROOT / "tests" / "targets" / "reads_stdin.py"
    term = terminal([str(PTTRACE), "run", "--session-dir", str(tmp_path), "--break", "PyOS_Readline", str(target)])
    term.wait_for("waiting for input: press > to type a line", "the target is waiting for input", timeout=60)
    term.keys(">")
    term.wait_for("a line for the target's standard input")
    term.tmux("send-keys", "-t", "0", "-l", "alice")
    term.keys("Enter")
    screen = term.wait_for("got 'alice'", "exited (completed)", timeout=60)
    assert "> alice" in screen and "hits 1" in screen  # what was sent, echoed; input() was recorded
    term.keys("Escape")  # (then q alone: Escape and q at once read as alt+q on a busy machine)
    term.wait_gone("a line for the target's standard input")
    term.keys("q")
    assert term.exit_status() == 0


@pytest.mark.gdb
@pytest.mark.parametrize("fault", ["no gdb", "session dir is a file"])
def test_a_run_that_cannot_start_ends_the_tui_with_one_sentence(terminal, tmp_path, fault):
    """The recording starts in the TUI's worker once the TUI is up. When it cannot start (no gdb at the
    path given; a --session-dir that is a file, found only once gdb is up), pttrace ends with one sentence
    and exit 2, and leaves nothing running: neither that gdb nor the target (the fake source's test,
    test_live_fake.py, checks only the app's side)."""
    from tests.conftest import gdb_pids

    before = gdb_pids()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    flags = (["--gdb", str(tmp_path / "no-such-gdb"), "--session-dir", str(tmp_path)] if fault == "no gdb"
             else ["--session-dir", str(blocker)])
    # (wide enough for the sentence and its temporary paths on one line)
    term = terminal([str(PTTRACE), "run", *flags, "--break", "wrapper_CPU_sigmoid", str(HELLO)], size=(400, 30))
    assert term.exit_status(timeout=120) == 2
    said = [line for line in term.screen(history=40).split(EXIT_MARK)[0].splitlines() if line.strip()]
    if fault == "no gdb":
        assert said == [f"pttrace: gdb is not installed (pttrace needs gdb 12.1 or newer; looked for "
                        f"'{tmp_path / 'no-such-gdb'}').",
                        "  Install it with your package manager, e.g. `sudo apt-get install gdb`."], said
    else:
        assert len(said) == 1 and said[0].startswith(f"pttrace: cannot write the session file {blocker}/"), said
        assert said[0].endswith(f": {blocker} is not a directory."), said
    # nothing of the run is left: under tmux only the pane's shell and its sleep, and no gdb anywhere
    wait_for(lambda: gdb_pids() <= before, 30, "the run's gdb to end")
    left = [_comm(pid) for pid in term.processes()[1:]]
    assert sorted(left) == ["sleep"], left


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"
