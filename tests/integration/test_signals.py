"""A target's own signals reach it under pttrace: its handler runs and says so (the target's word, not
gdb's transcript), the run goes on and records every hit."""
from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.conftest import PTTRACE, ROOT
from tests.integration.test_faults import no_leftovers, session_in  # noqa: F401
from tests.support import Lines, allowance, stop_process

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGET = ROOT / "tests" / "targets" / "usr1.py"


def test_sigusr1_sent_by_the_target_and_from_outside_reaches_its_handler(tmp_path, no_leftovers):
    # GIVEN a target with a SIGUSR1 handler, recorded by pttrace with a breakpoint before and after
    p = subprocess.Popen([*PTTRACE, "run", "--batch", "-b", "THPVariable_tensor", "--session-dir", str(tmp_path),
                          str(TARGET)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = Lines(p.stdout, "pttrace (the target's output)")
        # WHEN it sends itself SIGUSR1 THEN its handler ran before kill() returned
        assert out.until(lambda line: line.startswith("own signal handled:"), timeout=180).split() == \
            ["own", "signal", "handled:", "1"]
        # WHEN the test sends it another, from outside THEN its handler runs again and it goes on
        pid = int(out.until(lambda line: line.startswith("waiting ")).split()[1])
        os.kill(pid, signal.SIGUSR1)
        assert out.until(lambda line: line.startswith("signals handled:")).split() == ["signals", "handled:", "2"]
        p.wait(timeout=allowance(120))
        err = p.stderr.read()
    finally:
        stop_process(p)
    assert p.returncode == 0, err
    # AND the run records both hits and ends as the program did: no signal ended it
    s = session_in(tmp_path)
    assert s.info.status == "completed" and s.info.exit_code == 0
    assert [h.breakpoint for h in s.hits] == ["THPVariable_tensor"] * 2
