"""Many processes forking and exiting at once (real gdb, real processes): gdb 13 can lose events under such a
storm (a parent left in its fork's event stop, a child in its first stop, gdb waiting for ever). The run must
end and leave nothing; every hit must be recorded, counted against the target's own count, the hits after
a rescue too (the target handed to a recorder of its own while gdb still held some of its children: the
last of those ending no longer ends the run, which killed the target and its recorder, 1 run in 3).

By hand, 20 runs in a row of the 200-child storm the watchdog was measured on:
``PTTRACE_STORM_RUNS=20 PTTRACE_STORM_CHILDREN=200 pytest tests/integration/test_fork_storm.py``.

CI forks 100 children, not 200 (84 s, the suite's slowest test): since the first hit of a child is set up in
the thread that stopped (4f9dcce), neither size stalled gdb here (2 runs of 200 and 1 of 100 with ``--log``,
load 7-11: no wake-up), so the 200 bought no more of the watchdog's path in CI than 100 do; the wake-up itself
is proven on a tracer that really misses one (tests/unit/test_watchdog.py).

The storm's children call libz's zlibCompileFlags through ctypes, in a target that never imports torch: 13 s of
CPU for the run instead of 21 s with torch.sigmoid (load 10), and its children end sooner, so more of them fork
and exit at once (in one of two such runs here gdb never reported a child's exit: the session said so and kept
every hit). The tree keeps torch: its children stop in libtorch_cpu.so, and their first hits reuse a sibling's
walk of a torch stack."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import PTTRACE, ROOT, alive, gdb_pids
from tests.support import run_child
from tracer.session import storage

pytestmark = pytest.mark.gdb

TARGETS = ROOT / "tests" / "targets"
RUNS = int(os.environ.get("PTTRACE_STORM_RUNS", "1"))
CHILDREN = os.environ.get("PTTRACE_STORM_CHILDREN", "100")


def _watchdog(log: Path) -> list[str]:
    """What the watchdog did, from the run's log: its wake-ups of gdb and what it took from gdb."""
    return [line for line in log.read_text(errors="replace").splitlines()
            if "woken (SIGCHLD)" in line or "took" in line or "could not take" in line][-20:]


def _descendants_alive(session) -> list[int]:
    return [p.pid for p in session.processes if p.pid and alive(p.pid)]


@pytest.mark.parametrize("run", range(RUNS))
@pytest.mark.parametrize("target,args,stop", [("fork_storm.py", [CHILDREN, "--no-torch"], "zlibCompileFlags"),
                                              ("fork_tree.py", ["5"], "wrapper_CPU_sigmoid")],
                         ids=[f"storm-{CHILDREN}", "tree-5"])
def test_every_hit_of_a_fork_storm_is_recorded(tmp_path: Path, target: str, args: list[str], stop: str, run: int):
    # GIVEN a target whose processes fork and exit many at a time, each calling libz's zlibCompileFlags (the
    # storm) or torch.sigmoid (the tree) once
    sessions = tmp_path / "sessions"
    before = gdb_pids()
    # WHEN it is recorded (the timeout only guards the test: a hang is a failure, not a long wait), with its
    # log (the watchdog's wake-ups and rescues are named there: read it when the storm fails)
    log = tmp_path / "pttrace.log"
    proc = run_child([*PTTRACE, "run", "--batch", "--session-dir", str(sessions), "--log", str(log),
                      "-b", stop, "--", str(TARGETS / target), *args], cwd=tmp_path, input=b"", capture_output=True,
                     timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = proc.stdout.decode(errors="replace")
    # THEN the run ends (no hang), and nothing is left running
    assert proc.returncode == 0, (out, proc.stderr.decode(errors="replace"), _watchdog(log))
    session = storage.load(sorted(sessions.glob("*.jsonl"))[0])
    assert gdb_pids() <= before, "a gdb was left running"
    assert not _descendants_alive(session)
    counted = re.search(r"SIGMOIDS (\d+)", out)
    # and every hit the target counted is recorded
    assert counted, out
    assert len(session.hits) == int(counted.group(1)), (len(session.hits), out, _watchdog(log))
    assert session.info.status == "completed", (session.info.status, session.info.warnings)
    assert session.info.exit_code == 0
    # and every child's end is the one its parent's waitpid got, or (when gdb never reported it and no zombie was
    # left to read it from) unknown with a warning that names the process: no end is made up, none lost silently.
    # gdb 13 lost 1-5 children's ends in 9 of 10 storm runs of 100 (=thread-exited for a child's last thread,
    # never =thread-group-exited), recorded as unknown although their zombies still held them.
    exits = re.search(r"^EXITS (.*)$", out, re.M)
    if exits:
        for pid, code in (item.split(":") for item in exits.group(1).split()):
            recorded = session.process(int(pid))
            assert recorded is not None and recorded.state == "exited", (pid, recorded)
            unknown = [w for w in session.info.warnings if re.search(rf"\b{pid}\b[^;]*status is not known", w)]
            assert recorded.exit_code == int(code) or (recorded.exit_code is None and unknown), \
                (pid, code, recorded, session.info.warnings)
    # and each hit in a process of its own (the target's processes each call sigmoid once)
    assert len({h.thread.pid for h in session.hits}) == len(session.hits)
    # and every child's call path is whole: a child's first hit reuses a sibling's walk of the same stack
    # (tracer/gdb/agent/shared_walks.py); the first hit's walk is gdb's (nothing to share yet), and every
    # process makes its call from the same C stack, its Python frames one grow() deeper at each tree level
    first = session.hits[0]
    native = [(f.function, f.library) for f in first.frames if f.kind == "native"]
    for hit in session.hits:
        assert [(f.function, f.library) for f in hit.frames if f.kind == "native"] == native, hit.seq
    if target == "fork_tree.py":
        levels = sorted(sum(1 for f in h.frames if f.kind == "python" and f.function == "grow") for h in session.hits)
        assert levels == [level for level in range(1, 6) for _ in range(2 ** (level - 1))], levels
