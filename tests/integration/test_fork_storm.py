"""Many processes forking and exiting at once (real gdb, real torch): gdb 13 can lose events under such a
storm (a parent left in its fork's event stop, a child in its first stop, gdb waiting for ever). The run must
end and leave nothing; every hit must be recorded, counted against the target's own count, the hits after
a rescue too (the target handed to a recorder of its own while gdb still held some of its children: the
last of those ending no longer ends the run, which killed the target and its recorder, 1 run in 3).

By hand, 20 runs in a row: ``PTTRACE_STORM_RUNS=20 pytest tests/integration/test_fork_storm.py``."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PTTRACE, ROOT, alive, gdb_pids
from tracer.session import storage

pytestmark = pytest.mark.gdb

TARGETS = ROOT / "tests" / "targets"
RUNS = int(os.environ.get("PTTRACE_STORM_RUNS", "1"))


def _descendants_alive(session) -> list[int]:
    return [p.pid for p in session.processes if p.pid and alive(p.pid)]


@pytest.mark.parametrize("run", range(RUNS))
@pytest.mark.parametrize("target,args", [("fork_storm.py", ["200"]), ("fork_tree.py", ["5"])],
                         ids=["storm-200", "tree-5"])
def test_every_hit_of_a_fork_storm_is_recorded(tmp_path: Path, target: str, args: list[str], run: int):
    # GIVEN a target whose processes fork and exit many at a time, each calling torch.sigmoid once
    sessions = tmp_path / "sessions"
    before = gdb_pids()
    # WHEN it is recorded (the timeout only guards the test: a hang is a failure, not a long wait)
    proc = subprocess.run([*PTTRACE, "run", "--batch", "--session-dir", str(sessions), "-b", "wrapper_CPU_sigmoid",
                           str(TARGETS / target), *args], cwd=tmp_path, input=b"", capture_output=True,
                          timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = proc.stdout.decode(errors="replace")
    # THEN the run ends (no hang), and nothing is left running
    assert proc.returncode == 0, (out, proc.stderr.decode(errors="replace"))
    session = storage.load(sorted(sessions.glob("*.jsonl"))[0])
    assert gdb_pids() <= before, "a gdb was left running"
    assert not _descendants_alive(session)
    counted = re.search(r"SIGMOIDS (\d+)", out)
    # and every hit the target counted is recorded
    assert counted, out
    assert len(session.hits) == int(counted.group(1)), (len(session.hits), out)
    assert session.info.status == "completed", (session.info.status, session.info.warnings)
    assert session.info.exit_code == 0
    # and each hit in a process of its own (the target's processes each call sigmoid once)
    assert len({h.thread.pid for h in session.hits}) == len(session.hits)
