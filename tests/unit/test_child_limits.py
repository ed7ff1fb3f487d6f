"""The tests' own limit on a child (tests/support.py): when it passes, nothing the child started runs on.

pttrace starts gdb in a session of its own, so killing the child (what ``subprocess.run`` does) or its
process group would leave gdb and the target behind; these check the helper against a real process tree
built the same way.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.conftest import alive
from tests.support import run_child, stop_process, wait_for

# A child that starts a grandchild in a session of its own (as pttrace starts gdb), says both pids, and waits.
TREE = ("import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
        "print(g.pid, flush=True)\n"
        "time.sleep(600)\n")


def test_a_child_past_its_limit_is_killed_with_what_it_started(tmp_path):
    # GIVEN a child that started a grandchild in another session and never ends
    t0 = time.monotonic()
    # WHEN its limit passes
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        run_child([sys.executable, "-c", TREE], timeout=2, capture_output=True, text=True)
    # THEN the error comes after the load-scaled limit, with what the child said, and both processes are gone
    assert time.monotonic() - t0 >= 2
    assert caught.value.timeout >= 2
    grandchild = int(caught.value.output.split()[0])
    wait_for(lambda: not alive(grandchild), 10, f"the grandchild {grandchild} to be gone")


def test_stop_process_ends_the_tree_of_a_child_still_running():
    # GIVEN the same tree, started by the test itself
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(proc.stdout.readline())
        # WHEN the fixture's last word is said
        stop_process(proc)
        # THEN the child is reaped and the grandchild in its own session is gone too
        assert proc.returncode is not None
        wait_for(lambda: not alive(grandchild), 10, f"the grandchild {grandchild} to be gone")
    finally:
        proc.stdout.close()


def test_a_child_within_its_limit_gives_what_subprocess_run_gives():
    done = run_child([sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(3)"],
                     input="abc", capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (3, "ABC\n")
    with pytest.raises(subprocess.CalledProcessError):
        run_child([sys.executable, "-c", "raise SystemExit(1)"], check=True, timeout=60)
