"""Session files: append-only, a cut-off file loads as interrupted, bad lines are named, not fatal."""
from __future__ import annotations

import json

import pytest

from tracer.session import storage
from tracer.errors import SessionError
from tracer.session.model import Breakpoint, Frame, Hit, Location, SessionInfo, Thread


def write_session(path, hits=3, end=True):
    w = storage.SessionWriter(path)
    w.header(SessionInfo(id="s1", mode="run", argv=["python", "x.py"], started="2026-11-22T05:00:00+00:00"))
    w.breakpoint(Breakpoint(spec="f", locations=[Location(function="f()", library="/l.so", address=16)]))
    for i in range(1, hits + 1):
        w.write({"type": "hit", **Hit(seq=i, breakpoint="f", thread=Thread(1, "python", 42), time=1.0,
                                      frames=[Frame(kind="python", function="<module>", file="x.py", line=3,
                                                    layer="python", source="f()"),
                                              Frame(kind="native", function="f()", library="/l.so", address=16,
                                                    layer="runtime")]).to_dict()})
    if end:
        w.end("completed", 0)
    w.close()


def test_round_trip(tmp_path):
    p = tmp_path / "a.jsonl"
    write_session(p)
    s = storage.load(p)
    assert s.info.status == "completed" and s.info.exit_code == 0
    assert [h.seq for h in s.hits] == [1, 2, 3]
    assert s.breakpoints[0].hits == 3
    assert s.hits[0].frames[0].source == "f()"
    assert s.hits[0].innermost.function == "f()"


def test_file_without_end_is_interrupted_and_keeps_hits(tmp_path):
    p = tmp_path / "a.jsonl"
    write_session(p, hits=5, end=False)
    s = storage.load(p)
    assert s.info.status == "interrupted"
    assert len(s.hits) == 5


def test_torn_line_and_garbage_are_reported_by_line(tmp_path):
    p = tmp_path / "a.jsonl"
    write_session(p, hits=2, end=False)
    with open(p, "a") as fh:
        fh.write('{"type":"hit","seq":3,"fra\n')  # cut mid-write, and another writer went on
    report = storage.LoadReport()
    s = storage.load(p, report)
    assert len(s.hits) == 2
    assert report.bad_lines and report.bad_lines[0][0] == 5
    assert any("line 5" in w for w in s.info.warnings)


def test_a_last_line_without_its_line_break_is_still_being_written(tmp_path):
    p = tmp_path / "a.jsonl"
    write_session(p, hits=2, end=False)
    with open(p, "a") as fh:
        fh.write('{"type":"hit","seq":3,"fra')
    report = storage.LoadReport()
    s = storage.load(p, report)
    assert len(s.hits) == 2 and report.bad_lines == [] and s.info.warnings == []
    assert s.info.status == "interrupted"


def test_not_a_session(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text("hello\n")
    with pytest.raises(SessionError, match="not a pttrace session: line 1"):
        storage.load(p)


def test_future_schema_is_refused(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text(json.dumps({"type": "header", "schema": 99, "session": {"id": "x"}}) + "\n")
    with pytest.raises(SessionError, match="schema 99"):
        storage.load(p)


def test_resolve_id_prefix_last_and_ambiguity(tmp_path):
    for name in ("20261122-050000-aaaa", "20261122-060000-bbbb"):
        write_session(tmp_path / f"{name}.jsonl")
    assert storage.resolve("20261122-05", tmp_path).stem == "20261122-050000-aaaa"
    assert storage.resolve("20261122-060000-bbbb", tmp_path).stem == "20261122-060000-bbbb"
    assert storage.resolve("last", tmp_path).suffix == ".jsonl"
    with pytest.raises(SessionError, match="ambiguous"):
        storage.resolve("20261122", tmp_path)
    with pytest.raises(SessionError, match="no session"):
        storage.resolve("nope", tmp_path)


def test_unwritable_directory_is_one_sentence(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SessionError, match="cannot write the session file"):
        storage.SessionWriter(blocker / "sub" / "a.jsonl")


def _interned_session(path, hits: int) -> list[int]:
    """A schema-2 session as the agent writes it: returns where each hit's line ends."""
    from tracer.session import records

    write_session(path, hits=0, end=False)
    interner = records.Interner()
    frames = [records.CachedFrame({"kind": "python", "function": "<module>", "file": "x.py", "line": 3,
                                   "layer": "python", "source": "f()"}),
              records.CachedFrame({"kind": "native", "function": "f()", "library": "/l.so", "address": 16,
                                   "layer": "runtime"})]
    ends = []
    with open(path, "ab") as fh:
        for seq in range(1, hits + 1):
            fh.write(interner.encode_hit(seq, "f", {"id": 1, "name": "python", "lwp": 42}, float(seq),
                                         frames if seq % 2 else frames[1:]))
            ends.append(fh.tell())
    return ends


def test_an_interned_session_cut_anywhere_loads_every_complete_hit(tmp_path):
    whole = tmp_path / "whole.jsonl"
    ends = _interned_session(whole, hits=4)
    data = whole.read_bytes()
    full = storage.load(whole)
    assert [h.seq for h in full.hits] == [1, 2, 3, 4] and full.breakpoint("f").hits == 4
    assert full.hits[0].frames is full.hits[2].frames  # one list of Frames per stack
    assert [f.function for f in full.hits[1].frames] == ["f()"]
    cut = tmp_path / "cut.jsonl"
    for at in range(ends[0] - 40, len(data) + 1):
        cut.write_bytes(data[:at])
        s = storage.load(cut)
        complete = sum(1 for e in ends if e - 1 <= at)  # its newline is not needed
        assert s.info.status == "interrupted"
        assert [h.seq for h in s.hits] == list(range(1, complete + 1)), at
        assert [h.to_dict() for h in s.hits] == [h.to_dict() for h in full.hits[:complete]]


def test_a_schema_1_session_still_loads(tmp_path):
    p = tmp_path / "old.jsonl"
    write_session(p)
    text = p.read_text().replace('"schema":2', '"schema":1')
    p.write_text(text)
    s = storage.load(p)
    assert s.schema == 1 and [h.seq for h in s.hits] == [1, 2, 3]
    assert [f.function for f in s.hits[0].frames] == ["<module>", "f()"]


def test_load_without_hits_reads_the_rest(tmp_path):
    p = tmp_path / "s.jsonl"
    _interned_session(p, hits=3)
    s = storage.load(p, hits=False)
    assert s.hits == [] and [b.spec for b in s.breakpoints] == ["f"] and s.info.id == "s1"
    assert len(storage.load(p).hits) == 3
