"""A hit that repeats the one before exactly is recorded without the usual work (tracer/gdb/agent/repeat.py),
and records what that work would: real gdb, real torch.

GIVEN tests/targets/repeat_loop.py: runs of identical ``torch.add`` hits, each run ended by a change (the
first tensor changed in place, another second tensor, another Python line, the thread's OS name)
WHEN pttrace records it with repeats, and again with every hit taking the usual path (PTTRACE_NO_REPEAT=1)
THEN every hit has the values, line and thread name the target saw, the two sessions are the same hit for
hit, and repeats were made (the agent's counters).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_pttrace
from tracer.session import storage

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGET = ROOT / "tests" / "targets" / "repeat_loop.py"
CALLS = 36
ADD = "at::_ops::add_Tensor::call"


def _record(where: Path, repeat: bool) -> tuple[list, list, dict]:
    where.mkdir()
    oracle, stats = where / "oracle.json", where / "stats.json"
    env = {"PTTRACE_STACK_REUSE_STATS": str(stats)}
    if not repeat:
        env["PTTRACE_NO_REPEAT"] = "1"
    proc = run_pttrace("run", "--batch", "--session-dir", str(where), "--break", ADD, str(TARGET), str(oracle),
                       str(CALLS), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = sorted(where.glob("*.jsonl"))
    hits = [h for h in storage.load(path).hits if h.innermost.short == ADD]
    return hits, json.loads(oracle.read_text()), json.loads(stats.read_text())


def _comparable(hit) -> dict:
    out = hit.to_dict()
    out.pop("time")
    out["thread"].pop("lwp")
    out["thread"].pop("pid", None)
    for carried in out.get("values") or []:
        for arg in carried["args"]:
            if isinstance(arg.get("tensor"), dict):
                arg["tensor"].pop("data_ptr", None)
                arg["tensor"].pop("impl", None)
    return out


def test_repeated_hits_record_what_the_usual_path_records(tmp_path):
    hits, seen, stats = _record(tmp_path / "repeat", True)
    assert len(hits) == CALLS == len(seen)
    for i, (hit, want) in enumerate(zip(hits, seen)):
        (fv,) = [v for v in hit.values if v.frame is hit.innermost]
        assert fv.args[0]["tensor"]["values"] == want["values"], (i, fv.args[0], want)
        assert fv.args[1]["tensor"]["values"] == want["other"], (i, fv.args[1], want)
        lines = [f.line for f in hit.frames if f.kind == "python" and (f.file or "").endswith("repeat_loop.py")]
        assert lines == [want["line"]], (i, lines, want)
        assert hit.thread.name == want["name"], (i, hit.thread.name, want)
    assert [h.seq for h in hits] == sorted(h.seq for h in hits)
    # a hit is a repeat when it and the hit before are the same as the one before them: calls 14, 29 and
    # 32-34 at least (the first calls' may be taken while the process is still being described)
    assert stats["repeated"] >= 5, stats
    usual, _seen, plain = _record(tmp_path / "usual", False)
    assert plain["repeated"] == 0, plain
    assert len(usual) == len(hits)
    for i, (got, want) in enumerate(zip(hits, usual)):
        assert _comparable(got) == _comparable(want), i
