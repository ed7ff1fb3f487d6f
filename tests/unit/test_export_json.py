"""The JSON export is the data contract of DESIGN.md section 4, and loads back to the same session."""
from __future__ import annotations

import copy
import json

from tests.unit.export_support import load_sigmoid
from tracer.export import json as json_export
from tracer.model import Session

FRAME_KEYS = {"kind", "function", "short", "library", "address", "file", "line", "layer", "dispatch_key"}


def test_contract_shape():
    s = load_sigmoid()
    doc = json.loads(json_export.render(s))
    assert set(doc) == {"schema", "session", "breakpoints", "hits"}
    assert doc["schema"] == 1
    info = doc["session"]
    for key in ("id", "mode", "argv", "pid", "python", "torch_version", "torch_git_version", "gdb_version",
                "started", "status", "warnings"):
        assert key in info
    assert info["status"] == "completed" and info["argv"] == ["python", "scripts/hello-world.py"]
    assert [b["spec"] for b in doc["breakpoints"]] == ["THPVariable_tensor", "wrapper_CPU_sigmoid",
                                                        "wrapper_CPU_sigmoid_backward"]
    for b in doc["breakpoints"]:
        assert set(b) >= {"spec", "locations", "hits"}
        for loc in b["locations"]:
            assert set(loc) >= {"function", "library", "address", "file", "line"}
    assert [h["seq"] for h in doc["hits"]] == [1, 2, 3, 4]
    for h in doc["hits"]:
        assert set(h) >= {"seq", "breakpoint", "thread", "time", "frames"}
        assert set(h["thread"]) >= {"id", "name"}
        for f in h["frames"]:
            assert set(f) >= FRAME_KEYS
            assert f["kind"] in ("python", "native")
            assert ("source" in f) == (f["kind"] == "python")
        # Outermost first: the process entry point, then down to the breakpoint's function.
        assert h["frames"][0]["function"] == "_start"
    assert doc["hits"][2]["frames"][-1]["function"] == "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)"
    assert doc["hits"][2]["frames"][-1]["dispatch_key"] == "CPU"


def test_round_trip():
    s = load_sigmoid()
    again = Session.from_dict(json.loads(json_export.render(s)))
    assert again.to_dict() == s.to_dict()


def test_one_hit_per_line():
    s = load_sigmoid()
    lines = json_export.render(s).splitlines()
    hit_lines = [line for line in lines if line.startswith('    {"seq":')]
    assert len(hit_lines) == len(s.hits)


def test_empty_session():
    s = load_sigmoid()
    s.hits = []
    s.breakpoints = []
    doc = json.loads(json_export.render(s))
    assert doc["hits"] == [] and doc["breakpoints"] == []


def test_each_hit_line_is_exactly_the_hit_as_the_model_writes_it():
    # Hits are assembled from cached frame texts; they must equal the plain encoding, key order included.
    s = load_sigmoid()
    extra = copy.deepcopy(s.hits[2])
    extra.seq, extra.truncated, extra.signal = 5, True, "SIGSEGV"
    extra.frames[-1].inlined = True
    extra.frames[-1].decl_file, extra.frames[-1].decl_line = "/__w/pytorch/pytorch/build/aten/src/ATen/RegisterCPU_0.cpp", 1234
    s.hits.append(extra)
    lines = [line.strip().rstrip(",") for line in json_export.render(s).splitlines() if line.startswith('    {"seq":')]
    assert lines == [json.dumps(h.to_dict(), ensure_ascii=False, separators=(",", ":")) for h in s.hits]
