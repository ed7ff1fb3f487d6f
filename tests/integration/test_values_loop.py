"""A loop over fresh small tensors whose values change (tests/targets/values_loop.py): what changes from
hit to hit (data pointers, the values) is written apart from what the hits share, so the session keeps one
``args`` record and one site a call path, and each hit still gives its own values, equal to what the
target printed, in the loaded session and in the JSON export."""
from __future__ import annotations

import collections
import json

import pytest

from tests.conftest import ROOT, run_pttrace

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGET = ROOT / "tests" / "targets" / "values_loop.py"
LOOPS = 6


def test_a_loop_over_changing_tensors_stays_interned_and_keeps_each_hits_values(tmp_path):
    from tracer.export import json as json_export
    from tracer.session import storage

    oracle = tmp_path / "oracle.json"
    proc = run_pttrace("run", "--batch", "--session-dir", str(tmp_path), "--op", "sigmoid", str(TARGET), str(oracle),
                       str(LOOPS))
    assert proc.returncode == 0, proc.stderr
    (path,) = sorted(tmp_path.glob("*.jsonl"))
    seen = json.loads(oracle.read_text())
    kinds = collections.Counter(json.loads(line)["type"] for line in path.read_text().splitlines())
    paths = kinds["stack"]
    # Per call path, one args record and one site, whatever the loop count; per iteration, its hops (one a
    # path) and two vary records: the hops that carry x alone share one list, the structured kernel's impl
    # (x and its fresh output) has the other.
    assert kinds["hit"] == paths * LOOPS and kinds["args"] == paths and kinds["site"] == paths, kinds
    assert kinds["vary"] == 2 * LOOPS, kinds
    session = storage.load(path)
    entries = [h for h in session.hits if h.innermost.short == "at::_ops::sigmoid::call"]
    assert len(entries) == LOOPS
    for hit, want in zip(entries, seen):
        (fv,) = [v for v in hit.values if v.frame is hit.innermost]
        (arg,) = fv.args
        assert arg["name"] == "self" and arg["tensor"]["values"] == want["values"], (arg, want)
        assert arg["tensor"]["data_ptr"] == want["data_ptr"] and arg["tensor"]["sizes"] == [3]
        assert fv.decision is not None and fv.decision.key == "AutogradCPU"
    doc = json.loads(json_export.render(session))
    at_entry = [h for h in doc["hits"] if doc["frames"][doc["stacks"][h["stack"]][-1]]["short"]
                == "at::_ops::sigmoid::call"]
    got = [doc["values"][h["values"]][-1]["args"][0]["tensor"] for h in at_entry]
    assert [(t["values"], t["data_ptr"]) for t in got] == [(w["values"], w["data_ptr"]) for w in seen]
