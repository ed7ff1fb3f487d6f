"""TorchScript in a session (tracer/session/torchscript.py, ts_status.py): levels on a frame round-trip, tell
paths apart, refuse a malformed record at the edge, and a hit through the interpreter without them is a
warning that says why."""
from __future__ import annotations

import pytest

from tracer.export import paths as P
from tracer.session.hit_table import HitTable
from tracer.session.model import Frame, RecordError, Thread
from tracer.session.torchscript import TsGraph
from tracer.session.ts_status import OLD_SESSION, TsGathered

LOOP = "bool torch::jit::InterpreterStateImpl::runTemplate<false>(std::vector<c10::IValue, std::allocator<c10::IValue> >&)"
LEVEL = {"function": "outer", "node": "aten::sigmoid", "graph": 1,
         "places": [{"function": "outer", "file": "/p/jit.py", "line": 16, "text": "y = inner(y)"},
                    {"function": "inner", "file": "/p/jit.py", "line": 8, "text": "return torch.sigmoid(x) * 2.0"}]}


def loop_frame(levels=None) -> dict:
    d = {"kind": "native", "function": LOOP, "library": "/t/libtorch_cpu.so", "layer": "torchscript"}
    if levels is not None:
        d["torchscript"] = levels
    return d


def test_levels_round_trip_and_make_rows_outermost_first():
    f = Frame.from_dict(loop_frame([LEVEL]))
    assert Frame.from_dict(f.to_dict()) == f and f.to_dict()["torchscript"] == [LEVEL]
    rows = P.torchscript_rows(f)
    assert [(r.function, r.line, r.node) for r in rows] == [("outer", 16, None), ("inner", 8, "aten::sigmoid")]
    assert rows[1].label() == "TorchScript inner  /p/jit.py:8  return torch.sigmoid(x) * 2.0  [aten::sigmoid]"
    assert P.frame_note(f) == "TorchScript outer jit.py:16 → inner jit.py:8 aten::sigmoid"


def test_different_scripted_lines_are_different_paths():
    other = dict(LEVEL, places=[dict(LEVEL["places"][0], line=18)])
    assert Frame.from_dict(loop_frame([LEVEL])).key() != Frame.from_dict(loop_frame([other])).key()


@pytest.mark.parametrize("bad", [[{"places": "x"}], [{"function": 3}], "levels", [{"places": [{"line": "8"}]}]])
def test_a_malformed_level_is_refused_at_the_edge(bad):
    with pytest.raises(RecordError):
        Frame.from_dict(loop_frame(bad))


def _table(frames: list[dict]) -> HitTable:
    table = HitTable()
    table.site("bp", Thread(), [Frame.from_dict(f) for f in frames])
    return table


def test_a_hit_without_levels_says_why():
    got = TsGathered()
    assert got.warnings(_table([loop_frame([LEVEL])])) == []
    assert got.warnings(_table([loop_frame()])) == [OLD_SESSION]  # a session of a pttrace before this
    assert got.take("torchscript", {"ready": False, "why": "being established"}) is None
    got.take("torchscript", {"ready": True, "seq": 4})
    (w,) = got.warnings(_table([loop_frame()]))
    assert "being established (it was ready from hit 4 on)" in w
    assert got.warnings(_table([loop_frame([{"why": "gdb could not read"}])])) == [
        "TorchScript's interpreter was not read whole at some hits: gdb could not read"]


def test_a_graph_record_and_its_dump():
    got = TsGathered()
    graph = {"id": 1, "function": "inner", "inputs": ["%x.1"], "outputs": ["%4"],
             "nodes": [{"kind": "prim::Constant", "outputs": ["%2"]},
                       {"kind": "aten::sigmoid", "outputs": ["%3"], "inputs": ["%x.1"], "line": 8, "file": "/p/jit.py"},
                       {"kind": "aten::mul", "outputs": ["%4"], "inputs": ["%3", "%2"], "line": 8, "file": "/p/jit.py"}]}
    assert got.take("graph", {"graph": graph}) is None
    assert got.graphs[1].to_dict() == graph
    assert got.graphs[1].dump() == ["graph(%x.1):", "  %2 = prim::Constant()", "  %3 = aten::sigmoid(%x.1)  # jit.py:8",
                                    "  %4 = aten::mul(%3, %2)  # jit.py:8", "  return (%4)"]
    assert got.take("graph", {"graph": {"function": "f"}}) is not None
    assert isinstance(got.graphs[1], TsGraph)


def test_a_node_without_a_source_range_keeps_its_function_and_node_and_says_why():
    why = "the graph node has no source range"
    f = Frame.from_dict(loop_frame([{"function": "plain", "node": "aten::sigmoid", "places": [], "why": why}]))
    (row,) = P.torchscript_rows(f)
    assert row.label() == f"TorchScript plain  [aten::sigmoid]  (no line: {why})"
    got = TsGathered()
    assert got.warnings(_table([f.to_dict()])) == [f"TorchScript's interpreter was not read whole at some hits: {why}"]
