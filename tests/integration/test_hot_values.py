"""A hot hit is handed what the agent kept of the hit before (its argument values, its Python frames) only
while every byte those were read from is unchanged (tracer/gdb/agent/bulk.py): the same tensors changed in
place between hits, and the same call made from two lines in turn, give each hit its own values and line,
equal to what the target itself saw."""
from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, run_pttrace

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGET = ROOT / "tests" / "targets" / "inplace_loop.py"
CALLS = 8
ADD = "at::_ops::add_Tensor::call"


def test_kept_values_and_frames_follow_every_change(tmp_path):
    from tracer.session import storage

    oracle = tmp_path / "oracle.json"
    proc = run_pttrace("run", "--batch", "--session-dir", str(tmp_path), "--break", ADD, str(TARGET), str(oracle),
                       str(CALLS))
    assert proc.returncode == 0, proc.stderr
    (path,) = sorted(tmp_path.glob("*.jsonl"))
    seen = json.loads(oracle.read_text())
    session = storage.load(path)
    hits = [h for h in session.hits if h.innermost.short == ADD]
    assert len(hits) == CALLS == len(seen)
    for hit, want in zip(hits, seen):
        (fv,) = [v for v in hit.values if v.frame is hit.innermost]
        self_arg, other = fv.args[0], fv.args[1]
        assert self_arg["name"] == "self" and self_arg["tensor"]["values"] == want["values"], (self_arg, want)
        assert other["name"] == "other" and other["tensor"]["values"] == [1.0, 1.0, 1.0], other
        lines = [f.line for f in hit.frames if f.kind == "python" and (f.file or "").endswith("inplace_loop.py")]
        assert lines == [want["line"]], (lines, want)
