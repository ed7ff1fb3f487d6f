"""Hits on many threads at once: none is lost, each is on its own thread with that thread's whole stack.

A hit that records and goes on resumes only the thread that hit (gdb runs Linux targets non-stop
underneath: bench/RESULTS.md, "Threads: where the growth with 256 threads goes"), so the other threads run,
and hit, while one is being recorded. GIVEN tests/targets/thread_hammer.py (6 workers released together by
a barrier and the main thread, each calling torch.add its own number of times and counting them) WHEN
pttrace records every call of the op's entry point THEN each thread has exactly as many hits as it counted,
each with the op innermost and its own Python line (a worker's stack down from threading's bootstrap, the
main thread's from the module), numbered without a gap, and hits of different threads interleave.
"""
from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.conftest import ROOT, run_pttrace
from tracer.session import storage

pytestmark = [pytest.mark.gdb]

ADD = "at::_ops::add_Tensor::call"
TARGET = ROOT / "tests" / "targets" / "thread_hammer.py"


def test_many_threads_hitting_at_once_lose_no_hit_and_keep_their_stacks(tmp_path):
    proc = run_pttrace("run", "--batch", "-q", "-b", ADD, "--session-dir", str(tmp_path), str(TARGET))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(text for text in proc.stdout.splitlines() if text.startswith("COUNTS "))
    counts = {int(lwp): n for lwp, n in json.loads(line.split(" ", 1)[1]).items()}
    assert len(counts) == 7, counts
    (path,) = tmp_path.glob("*.jsonl")
    s = storage.load(path)
    assert s.info.status == "completed" and s.info.warnings == [], (s.info.status, s.info.warnings)
    assert [h.seq for h in s.hits] == list(range(1, len(s.hits) + 1))
    assert Counter(h.thread.lwp for h in s.hits) == Counter(counts), (Counter(h.thread.lwp for h in s.hits), counts)
    main_lwp = int(next(text for text in proc.stdout.splitlines() if text.startswith("MAIN ")).split()[1])
    for hit in s.hits:
        assert ADD in (hit.frames[-1].function or ""), [f.function for f in hit.frames[-3:]]
        python = [f for f in hit.frames if f.kind == "python"]
        marker = python[-1].source.strip()
        if marker.endswith("# HAMMER-WORKER"):
            assert hit.thread.lwp != main_lwp
            assert [f.function for f in python] == ["Thread._bootstrap", "Thread._bootstrap_inner", "Thread.run",
                                                    "worker"], [f.function for f in python]
            assert (python[0].file or "").endswith("threading.py"), [f.file for f in python]
        else:
            assert marker.endswith("# HAMMER-MAIN"), marker
            assert len(python) == 1 and python[0].function == "<module>", [f.function for f in python]
            assert hit.thread.lwp == main_lwp, (hit.thread.lwp, main_lwp)
    switches = sum(1 for a, b in zip(s.hits, s.hits[1:]) if a.thread.lwp != b.thread.lwp)
    assert switches > len(counts), f"hits of different threads did not interleave ({switches} switches)"
