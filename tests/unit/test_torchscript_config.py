"""What the recorder hands the agent for TorchScript (tracer/recorder/torchscript.py): the cached layout of this
torch build, or the file a probe will write and why nothing is read until then; the probe starts only at the
first call path through the interpreter (the tailer names it), once; never a second probe while one runs
(its lock names a live process)."""
from __future__ import annotations

import json
import os
import sysconfig
from pathlib import Path

import pytest

from tracer.recorder import torchscript as TS
from tracer.recorder.tailer import SessionTailer
from tracer.recorder.torchscript import NOT_CACHED, NOT_READY, TsLayout, agent_config
from tracer.scripted import interp_layout as IL
from tracer.session import storage
from tracer.session.model import Frame, Hit, SessionInfo, Thread

LIB = Path(sysconfig.get_paths()["purelib"]) / "torch" / "lib" / "libtorch_cpu.so"
pytestmark = pytest.mark.skipif(not LIB.exists(), reason="no torch wheel in this interpreter")


def test_without_libtorch_cpu_it_says_why(tmp_path):
    assert agent_config(["/x/libc10.so"], tmp_path) == {"why": "libtorch_cpu.so is not among torch's libraries"}


def test_a_probe_under_way_is_waited_for_not_started_again(tmp_path):
    path = IL.cache_path(str(LIB), tmp_path)
    assert path is not None
    path.parent.mkdir(parents=True)
    lock = path.with_suffix(".lock")
    lock.write_text(str(os.getpid()))  # a live process holds it: another pttrace's probe
    got = agent_config([str(LIB)], tmp_path)
    assert got == {"file": str(path), "why": NOT_READY}
    assert lock.read_text() == str(os.getpid()) and not path.exists()  # nothing started, nothing written


def test_a_cached_layout_is_handed_over_whole(tmp_path):
    path = IL.cache_path(str(LIB), tmp_path)
    path.parent.mkdir(parents=True)
    layout = IL.InterpreterLayout(tls_modid_slot=8, tls_offset=16, offsets={"frame_pc": 16}, run_ranges=[[1, 2]])
    path.write_text(json.dumps(IL.asdict(layout)))
    assert agent_config([str(LIB)], tmp_path) == {"layout": IL.asdict(layout)}


def test_an_uncached_layout_is_established_only_when_needed_and_once(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(TS.interp_layout, "start_establishing", lambda *a: started.append(a) or tmp_path / "x")
    warned: list[str] = []
    ts = TsLayout([str(LIB)], tmp_path, warned.append)
    path = IL.cache_path(str(LIB), tmp_path)
    # a run that never reaches the interpreter: the agent is told where the layout would be, nothing starts
    assert ts.config == {"file": str(path), "why": NOT_CACHED} and ts.wanted and not started
    ts.needed()
    ts.needed()  # a second path through the interpreter: the probe is not started again
    assert started == [(str(LIB), str(LIB.parent.parent / "include"), tmp_path)] and not ts.wanted and not warned


def test_a_probe_that_cannot_start_is_a_warning(tmp_path, monkeypatch):
    monkeypatch.setattr(TS.interp_layout, "start_establishing", lambda *a: None)
    warned: list[str] = []
    ts = TsLayout([str(LIB)], tmp_path, warned.append)
    ts.needed()
    assert len(warned) == 1 and "could not be established" in warned[0]


def _native(function: str | None, offset: int) -> Frame:
    return Frame(kind="native", function=function, library="/l/libtorch_cpu.so", address=0x7000 + offset,
                 layer="runtime", offset=offset)


def test_the_tailer_calls_for_the_probe_at_the_first_path_through_the_interpreter(tmp_path):
    path = tmp_path / "s.jsonl"
    writer = storage.SessionWriter(path)
    writer.header(SessionInfo(id="s1", mode="run", argv=["python"], started="2026-11-27T05:00:00+00:00"))
    tailer = SessionTailer(path, writer, lambda e: None, lambda m: None)
    calls: list[int] = []
    tailer.on_interpreter = lambda: calls.append(1)

    def hit(seq: int, frames: list[Frame]) -> None:
        writer.write({"type": "hit", **Hit(seq=seq, breakpoint="b", thread=Thread(1, "python", 42), time=1.0,
                                           frames=frames).to_dict()})
        tailer.scan(emit=False)

    hit(1, [_native("at::native::sigmoid_out", 0x10)])
    assert calls == []  # no interpreter on the path: nothing is started
    loop = "void torch::jit::InterpreterStateImpl::runTemplate<false>(std::vector<c10::IValue>&)"
    hit(2, [_native(loop, 0x20), _native("at::native::relu", 0x30)])
    hit(3, [_native(loop, 0x24), _native("at::native::relu", 0x34)])
    writer.close()
    assert calls == [1]


def test_the_live_tail_hands_each_graph_on_as_it_is_read(tmp_path):
    from tracer.recorder.events import GraphRecorded
    from tracer.session.torchscript import TsGraph, TsNode

    path = tmp_path / "s.jsonl"
    writer = storage.SessionWriter(path)
    writer.header(SessionInfo(id="s1", mode="run", argv=["python"], started="2026-11-27T05:00:00+00:00"))
    events: list = []
    tailer = SessionTailer(path, writer, events.append, lambda m: None)
    graph = TsGraph(3, "outer", ("%x.1",), ("%y",), [TsNode("aten::relu", ("%y",), ("%x.1",), line=7, file="/t.py")])
    writer.write({"type": "graph", "graph": graph.to_dict()})
    writer.write({"type": "graph", "graph": {"function": "no id"}})  # damaged: the session's reader says so
    tailer.scan(emit=True)
    writer.close()
    assert events == [GraphRecorded(graph)]
