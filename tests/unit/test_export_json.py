"""The JSON export is the data contract (README "The JSON export"), and loads back to the same session."""
from __future__ import annotations

import copy
import json

from tests.unit.export_support import json_hits, load_sigmoid, write_hot_session
from tracer.export import json as json_export
from tracer.session.model import Session

FRAME_KEYS = {"kind", "function", "short", "library", "address", "file", "line", "layer", "dispatch_key"}


def test_contract_shape():
    s = load_sigmoid()
    doc = json.loads(json_export.render(s))
    assert set(doc) == {"schema", "session", "processes", "breakpoints", "frames", "stacks", "hits"}
    assert doc["schema"] == 2
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
        assert set(h) >= {"seq", "breakpoint", "thread", "time", "stack"} and "frames" not in h
    # Each frame and each stack once: the hits of THPVariable_tensor (two Python lines) share their start-up.
    assert len(doc["stacks"]) == 4 and len(doc["frames"]) < sum(len(h.frames) for h in s.hits) - 15
    assert len(doc["frames"]) == len({json.dumps(f, sort_keys=True) for f in doc["frames"]})
    for h in json_hits(doc):
        assert set(h["thread"]) >= {"id", "name"}
        for f in h["frames"]:
            assert set(f) >= FRAME_KEYS
            assert f["kind"] in ("python", "native")
            assert ("source" in f) == (f["kind"] == "python")
        # Outermost first: the process entry point, then down to the breakpoint's function.
        assert h["frames"][0]["function"] == "_start"
    kernel = doc["frames"][doc["stacks"][doc["hits"][2]["stack"]][-1]]
    assert kernel["function"] == "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)"
    assert kernel["dispatch_key"] == "CPU"


def test_round_trip():
    s = load_sigmoid()
    again = Session.from_dict(json.loads(json_export.render(s)))
    assert {**again.to_dict(), "schema": None} == {**s.to_dict(), "schema": None}  # file schema 1, contract 2
    assert again.hits[0].frames[0] is again.hits[1].frames[0]  # read back interned too


def test_a_contract_1_document_still_reads_back():
    s = load_sigmoid()
    old = {"schema": 1, "session": s.info.to_dict(), "breakpoints": [b.to_dict() for b in s.breakpoints],
           "hits": [h.to_dict() for h in s.hits]}
    assert Session.from_dict(json.loads(json.dumps(old))).to_dict() == s.to_dict()


def test_a_big_session_is_its_few_frames_and_stacks_and_a_short_line_a_hit(tmp_path):
    p = tmp_path / "big.jsonl"
    write_hot_session(p, 3000, paths=3, threads=2)
    from tracer.session import storage

    s = storage.load(p)
    text = json_export.render(s)
    doc = json.loads(text)
    assert len(doc["hits"]) == 3000 and len(doc["stacks"]) == 3
    assert len(doc["frames"]) < 3 * 60  # the three stacks share their start-up frames
    assert Session.from_dict(doc).to_dict()["hits"] == s.to_dict()["hits"]
    hit_lines = [line for line in text.splitlines() if line.startswith('    {"seq":')]
    assert len(hit_lines) == 3000 and max(map(len, hit_lines)) < 200


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
    # Hits are assembled from cached site texts; they must equal the plain encoding of the hit with its
    # stack's index in place of its frames, key order included.
    s = load_sigmoid()
    extra = copy.deepcopy(s.hits[2])
    extra.seq, extra.truncated, extra.signal = 5, True, "SIGSEGV"
    extra.frames[-1].inlined = True
    extra.frames[-1].decl_file, extra.frames[-1].decl_line = "/__w/pytorch/pytorch/build/aten/src/ATen/RegisterCPU_0.cpp", 1234
    s.hits.append(extra)
    text = json_export.render(s)
    lines = [line.strip().rstrip(",") for line in text.splitlines() if line.startswith('    {"seq":')]
    stacks = [h["stack"] for h in json.loads(text)["hits"]]
    want = []
    for h, stack in zip(s.hits, stacks):
        d = h.to_dict()
        want.append({**{k: v for k, v in d.items() if k not in ("frames", "truncated", "signal")}, "stack": stack,
                     **{k: d[k] for k in ("truncated", "signal") if k in d}})
    assert lines == [json.dumps(d, ensure_ascii=False, separators=(",", ":")) for d in want]
    assert stacks[4] != stacks[2]  # its last frame differs (inlined, a declaration)


def test_a_workers_launcher_names_its_stack_and_reads_back():
    from tracer.session.model import Launch, Thread

    s = load_sigmoid()
    worker = copy.deepcopy(s.hits[2])
    worker.seq, worker.thread = 5, Thread(id=7, name="worker")
    worker.launched_by = Launch(Thread(id=1, name="python"), s.hits[2].frames[:30])
    lost = copy.deepcopy(s.hits[3])
    lost.seq, lost.launched_by = 6, Launch(None, why="2 threads are inside a parallel launcher")
    s.hits += [worker, lost]
    doc = json.loads(json_export.render(s))
    launch = doc["hits"][4]["launched_by"]
    assert set(launch) == {"thread", "stack"} and launch["thread"]["id"] == 1
    assert [doc["frames"][i]["function"] for i in doc["stacks"][launch["stack"]]] == \
        [f.function for f in s.hits[2].frames[:30]]
    assert doc["hits"][5]["launched_by"] == {"thread": None, "why": "2 threads are inside a parallel launcher"}
    again = Session.from_dict(doc)
    assert [h.to_dict() for h in again.hits] == [h.to_dict() for h in s.hits]
