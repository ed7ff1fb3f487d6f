"""The target's terminal hands on everything the target wrote before the run's end is told.

A real pseudo-terminal and a real process: the text a process writes just before it exits reaches the
master side through a kernel worker, so a reader that stops when the process has ended can miss it. On
a loaded machine the TUI once never showed a target's last line (test_prompt_gdb's "result tensor").
"""
from __future__ import annotations

import subprocess
import sys
import time

from tests.support import allowance
from tracer.recorder.launch import DRAIN_LIMIT, TargetTerminal

LAST = "the last line"
# Enough text that the pump is still copying the first of it when the process has ended.
WRITER = ["/bin/sh", "-c", f"head -c 60000 /dev/zero | tr '\\0' x; echo; echo '{LAST}'"]


def test_every_byte_written_before_exit_is_handed_on_by_close():
    # GIVEN a process writing 60 kB and a last line to the terminal, then exiting
    # WHEN the terminal is closed as soon as the process has ended (as the recorder's end does)
    # THEN what was handed on holds every byte, the last line last, every time (without the drain,
    # about 1 run in 10 lost it on an idle machine)
    for attempt in range(30):
        got: list[str] = []
        terminal = TargetTerminal(False, lambda text, stream: got.append(text))
        proc = subprocess.Popen(WRITER, stdout=terminal.slave, stderr=terminal.slave)
        assert proc.wait(allowance(30)) == 0
        terminal.close()
        out = "".join(got)
        assert out.endswith(LAST + "\n") and out.count("x") == 60000, (attempt, out[-80:])


def test_a_survivor_holding_the_terminal_delays_the_end_no_longer_than_the_limit():
    # GIVEN a process that keeps the terminal open after the run has ended
    got: list[str] = []
    terminal = TargetTerminal(False, lambda text, stream: got.append(text))
    survivor = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                                stdout=terminal.slave, stderr=terminal.slave)
    try:
        # WHEN the terminal is closed
        start = time.monotonic()
        terminal.close()
        took = time.monotonic() - start
        # THEN close waited for the pump at most its limit (and the survivor runs on)
        assert took < DRAIN_LIMIT + 1.0, took
        assert survivor.poll() is None
    finally:
        survivor.kill()
        survivor.wait(allowance(10))
