"""The TUI's plain-Python parts: folding, the state fold, gdb's breakpoint news, finding sources."""
from __future__ import annotations

import copy

from tracer.session.model import Breakpoint, Frame, Location
from tracer.tui import source_files as SF
from tracer.tui.app import Inbox
from tracer.tui.folding import default_frame, fold_runs, path_rows
from tracer.recorder import TraceConfig
from tracer.tui.sources import LiveSource, SourceEvent, breakpoint_from_mi, breakpoint_names
from tracer.tui.state import TraceState


def sigmoid_hit(session):
    return next(h for h in session.hits if h.breakpoint == "wrapper_CPU_sigmoid")


def test_fold_runs_of_a_real_kernel_path(fixture_session):
    frames = sigmoid_hit(fixture_session).frames
    runs = fold_runs(frames)
    assert runs[0] == (0, 17, "start-up")  # _start .. _PyEval_EvalFrame, above <module>
    assert all(kind == "interpreter" for _, _, kind in runs[1:])
    rows = path_rows(frames)
    assert [r.kind for r in rows].count("fold") == 1  # interpreter runs take no row
    assert sum(r.end - r.start for r in rows) == 68 - sum(e - s for s, e, k in runs if k == "interpreter")
    assert len(path_rows(frames, unfold_all=True)) == 68
    opened = path_rows(frames, opened={0})
    assert opened[0].kind == "frame" and frames[opened[0].start].function == "_start"


def test_a_path_that_ends_in_the_interpreter_shows_that_run(fixture_session):
    # As after `next` out of a binding: the innermost frames are CPython's own.
    frames = sigmoid_hit(fixture_session).frames
    binding = next(i for i, f in enumerate(frames) if f.layer == "binding")
    cut = frames[:binding]
    assert cut[-1].layer == "interpreter"
    rows = path_rows(cut)
    assert rows[-1].kind == "fold" and rows[-1].fold == "interpreter" and rows[-1].end == len(cut)
    assert [r.fold for r in rows if r.kind == "fold"] == ["start-up", "interpreter"]  # the others stay hidden


def test_default_frame_is_the_innermost_with_a_source_line(fixture_session):
    frames = sigmoid_hit(fixture_session).frames
    i = default_frame(frames)
    assert frames[i].kind == "python" and frames[i].line == 361
    assert default_frame([Frame(kind="native", function="f")]) == 0
    assert default_frame([]) is None


def test_state_counts_hits_and_merges_gdb_news():
    state = TraceState(live=True)
    state.apply("breakpoint", Breakpoint(spec="wrapper_CPU_sigmoid"))
    assert state.breakpoints["wrapper_CPU_sigmoid"].pending
    news = breakpoint_from_mi({"bkpt": {
        "number": "1", "type": "breakpoint", "enabled": "y", "addr": "0x00007fffe35eec40",
        "at": "<at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)+4>", "times": "0",
        "original-location": "wrapper_CPU_sigmoid"}})
    assert state.apply("breakpoint-gdb", news) == {"breakpoints"}
    bp = state.breakpoints["wrapper_CPU_sigmoid"]
    assert not bp.pending
    assert bp.locations[0].function == "at::(anonymous namespace)::wrapper_CPU_sigmoid(at::Tensor const&)"
    assert bp.locations[0].address == 0x7FFFE35EEC40
    # The recorder's own record, with libraries, wins once it comes.
    lib = "/x/libtorch_cpu.so"
    state.apply("breakpoint", Breakpoint(spec="wrapper_CPU_sigmoid", pending=False,
                                         locations=[Location(function="w", library=lib, address=1)]))
    assert state.breakpoints["wrapper_CPU_sigmoid"].locations[0].library == lib
    state.apply("state", "running")
    state.apply("stopped", {"reason": "breakpoint-hit"})
    assert state.target == "stopped"
    state.apply("finished", "completed")
    assert state.finished and state.target == "exited" and state.gdb == "exited" and not state.can_control


def test_gdb_news_about_pending_multiple_and_stub_locations():
    pending = breakpoint_from_mi({"bkpt": {"number": "2", "addr": "<PENDING>", "pending": "initModule",
                                           "original-location": "initModule"}})
    assert pending.pending and pending.locations == []
    multiple = breakpoint_from_mi({"bkpt": {
        "number": "3", "addr": "<MULTIPLE>", "original-location": "initModule", "locations": [
            {"number": "3.1", "enabled": "y", "addr": "0x10", "func": "torch::cpu::initModule()"},
            {"number": "3.2", "enabled": "n", "addr": "0x20", "func": "initModule@plt"},
            {"number": "3.3", "enabled": "y", "addr": "0x30", "at": "<initModule()>"}]}})
    assert [loc.function for loc in multiple.locations] == ["torch::cpu::initModule()", "initModule()"]
    assert breakpoint_from_mi({"bkpt": {"number": "9", "type": "catchpoint"}}) is None
    assert breakpoint_from_mi("garbage") is None


def test_completion_from_recorded_frames(fixture_session):
    names = breakpoint_names(fixture_session.hits, "sigmoid", 20)
    assert "at::_ops::sigmoid::call" in names
    assert "at::(anonymous namespace)::wrapper_CPU_sigmoid" in names
    assert all("sigmoid" in n.lower() for n in names)


def test_locate_finds_a_moved_checkout_and_never_a_file_that_disagrees(fixture_session, tmp_path):
    frame = copy.deepcopy(next(f for f in fixture_session.hits[0].frames if f.kind == "python"))
    assert frame.file == "/work/main/scripts/hello-world.py"
    # Recorded in another checkout: found relative to the current directory (the repository).
    frame.file = "/somewhere/else/scripts/hello-world.py"
    found = SF.locate(frame, cwd="/somewhere/else")
    assert found.path is not None and found.path.name == "hello-world.py"
    assert found.moved_from == "/somewhere/else/scripts/hello-world.py"
    # A file here whose line says something else: not this frame's source (a crafted session could
    # name any file), so it is not shown; the pane shows the recorded line instead.
    changed = tmp_path / "hello.py"
    changed.write_text("\n" * 9 + "x = 1\n")
    frame.file = str(changed)
    assert SF.locate(frame).path is None and SF.present(frame)
    frame.file = "/nowhere/at/all.py"
    assert SF.locate(frame).path is None
    assert SF.locate(Frame(kind="python", file="<frozen importlib._bootstrap>", line=3)).path is None


def test_window_keeps_the_line_inside():
    assert SF.window(100, 50, 11) == (45, 55)
    assert SF.window(100, 2, 11) == (1, 11)
    assert SF.window(100, 99, 11) == (90, 100)
    assert SF.window(5, 3, 11) == (1, 5)
    assert SF.language("a/b.py") == "python" and SF.language("x.cpp") == "cpp" and SF.language("y.h") == "cpp"


def test_inbox_notifies_once_per_batch():
    calls = []
    inbox = Inbox(lambda: calls.append(1))
    for i in range(100):
        inbox.push(SourceEvent("hit", i))
    assert len(calls) == 1
    assert [e.data for e in inbox.take()] == list(range(100))
    inbox.push(SourceEvent("hit", 0))
    assert len(calls) == 2


def test_a_mode_chosen_before_gdb_is_up_is_the_one_the_run_starts_in(tmp_path):
    config = TraceConfig(breakpoints=["initModule"], script="x.py", session_dir=tmp_path)
    source = LiveSource(config, engine_factory=lambda *a: None)
    source.set_mode("stop")  # no engine yet: nothing to ask, nothing raised
    assert source.config.mode == "stop" and source._early_mode == "stop"


def test_a_long_short_name_is_cut_in_its_middle():
    from tracer.tui.widgets._style import fit

    name = ("pybind11::cpp_function::initialize<…>(torch::jit::initJITBindings(_object*)::"
            "{lambda(std::__cxx11::basic_string<…> const&)#217}, …>::{lambda(pybind11::detail::function_call&)#3}")
    cut = fit(name, 64)
    assert len(cut) == 64 and cut.startswith("pybind11::cpp_function::initialize<…>(torc…")
    assert cut.endswith("function_call&)#3}") and cut.count("…") == 2  # its own and the cut
    assert fit("at::wrapper_CPU_sigmoid", 64) == "at::wrapper_CPU_sigmoid"


def test_the_call_path_shows_the_key_set_a_hop_was_called_with(fixture_session):
    from tracer.tui.folding import PathRow
    from tracer.tui.widgets.callpath import CallPathTable, _path_key

    hit = copy.deepcopy(sigmoid_hit(fixture_session))
    table = CallPathTable()
    inner = hit.frames[-1]
    inner.keyset, inner.keys = 0x10001, ("CPU",)
    row = PathRow("frame", len(hit.frames) - 1, len(hit.frames))
    assert str(table._cells(row, hit.frames)[-1]) == "called with CPU"
    other = copy.deepcopy(hit)
    other.frames[-1].keyset, other.frames[-1].keys, other.frames[-1].keyset_note = None, None, "its return type is not known"
    assert str(table._cells(row, other.frames)[-1]) == "key set not read: its return type is not known"
    assert _path_key(hit) != _path_key(other)  # a new key set redraws the rows of the same path


def test_no_torch_build_advice_for_the_interpreters_own_frames():
    """Fault 12: a frame in the python binary gets advice about the interpreter, not a torch build."""
    from tracer.tui.widgets.source import _line_tables_advice

    interp = Frame(kind="native", function="_PyEval_EvalFrameDefault", library="/usr/bin/python3.11",
                   layer="interpreter", address=0x5A1234)
    torch_frame = Frame(kind="native", function="at::_ops::sigmoid::call", layer="dispatcher",
                        library="/v/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so", address=0x1000)
    assert "DEBUG=1" not in _line_tables_advice(interp) and "CPython" in _line_tables_advice(interp)
    assert "DEBUG=1" in _line_tables_advice(torch_frame)
    libc = Frame(kind="native", function="memcpy", library="/lib/x86_64-linux-gnu/libc.so.6", layer="runtime")
    assert "DEBUG=1" not in _line_tables_advice(libc)


def test_the_call_path_title_says_who_launched_a_workers_region(fixture_session):
    from tracer.session.model import Launch, Thread
    from tracer.tui.widgets.callpath import CallPathTable

    hit = copy.deepcopy(sigmoid_hit(fixture_session))
    launcher = hit.frames
    hit.launched_by = Launch(Thread(id=1), launcher)
    table = CallPathTable()
    table.hit, table.caption, table.cwd = hit, "hit #1", None
    table._retitle()
    assert "launched by thread 1 from " in table.border_title and "via at::_ops::sigmoid" in table.border_title


def test_a_live_run_hands_graphs_to_the_tui_as_they_are_read(tmp_path):
    # GIVEN a live source whose recorder reads a TorchScript graph while the run goes on (the recorder's
    # tail sends it as GraphRecorded: tests/unit/test_torchscript_config.py)
    import threading

    from tests.tui.support import allowance, run_pilot, wait_until
    from tracer.recorder.events import GraphRecorded, RecorderFinished, TargetStateChanged
    from tracer.session.torchscript import TsGraph, TsNode
    from tracer.tui.app import make_app

    graph = TsGraph(1, "outer", ("%x.1",), ("%y",), [TsNode("aten::relu", ("%y",), ("%x.1",), line=7)])
    went_on = threading.Event()

    class Engine:
        info, target_pid, target_state, session_path = None, None, "running", None

        def __init__(self, config, listener):
            self.listener = listener

        def start(self):
            pass

        def run(self):
            self.listener(TargetStateChanged("running"))
            self.listener(GraphRecorded(graph))
            went_on.wait(allowance(30))  # the run goes on until the test has seen the graph
            self.listener(RecorderFinished("completed"))

    source = LiveSource(TraceConfig(breakpoints=["initModule"], script="x.py", session_dir=tmp_path),
                        engine_factory=Engine)

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(160, 48)) as pilot:
            try:
                # THEN the TUI has the graph, keyed by its id, while the run still goes on
                await wait_until(pilot, lambda: app.state.graphs, timeout=10)
                assert app.state.graphs == {1: graph} and not source.finished
            finally:
                went_on.set()
            await wait_until(pilot, lambda: source.finished, timeout=10)

    run_pilot(scenario())
