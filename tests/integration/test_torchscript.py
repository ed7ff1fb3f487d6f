"""TorchScript under pttrace: at a hit whose stack passes through the interpreter, the scripted function, its
line and the graph node, read from the interpreter's memory, on the interpreter's frame, in every view;
checked against the program's own lines (tests/targets/jit_script.py: a scripted function calling another
inside a loop's if, relu in its else, and a torch.jit.trace'd function). One recording for all."""
from __future__ import annotations

import json
import os
import sysconfig
import time
from pathlib import Path

import pytest

from tests.conftest import HELLO, PTTRACE, ROOT, gdb_pids, our_processes
from tests.support import allowance, run_child
from tracer import settings
from tracer.export import paths as P
from tracer.recorder.torchscript import NOT_CACHED
from tracer.scripted import interp_layout as IL
from tracer.session import storage

pytestmark = pytest.mark.gdb

TARGET = ROOT / "tests" / "targets" / "jit_script.py"
SOURCE = TARGET.read_text().splitlines()
TORCH = Path(sysconfig.get_paths()["purelib"]) / "torch"


def line_of(text: str) -> int:
    return next(n for n, line in enumerate(SOURCE, 1) if text in line)


def place(text: str) -> tuple[str, int, str]:
    """(file, line, the line's text) of the program line holding ``text``."""
    n = line_of(text)
    return str(TARGET), n, SOURCE[n - 1].strip()


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    # The interpreter's layout, as pttrace's recorder finds it (its cache): established here first, since a
    # run that finds none starts the probe in the background and reads no TorchScript until it is written.
    layout = IL.establish(str(TORCH / "lib" / "libtorch_cpu.so"), str(TORCH / "include"), settings.cache_dir())
    assert not layout.problems, layout.problems
    tmp = tmp_path_factory.mktemp("jit")
    before = gdb_pids()
    proc = run_child([*PTTRACE, "run", "--batch", "--session-dir", str(tmp), "-b", "wrapper_CPU_sigmoid",
                      "-b", "at::native::relu", str(TARGET)], capture_output=True, text=True, timeout=900,
                     cwd=tmp, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert gdb_pids() <= before, "a gdb was left running"
    files = sorted(tmp.glob("*.jsonl"))
    assert proc.returncode == 0 and len(files) == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    return proc, storage.load(files[0]), files[0]


def user_line(hit) -> int | None:
    """The innermost line of the program on the hit's path."""
    return next((f.line for f in reversed(hit.frames)
                 if f.kind == "python" and f.file and f.file.endswith("jit_script.py")), None)


def interpreter_frames(hit):
    return [f for f in hit.frames if f.kind == "native" and P.is_interpreter_loop(f.function)]


def ts_places(hit) -> list[tuple]:
    """(function, file, line, text, node) of each TorchScript row at the hit's interpreter frames."""
    return [(r.function, r.file, r.line, r.text, r.node) for f in interpreter_frames(hit) for r in P.torchscript_rows(f)]


def test_sigmoid_runs_where_the_program_says(recording):
    _, session, _ = recording
    sig = [h for h in session.hits if h.breakpoint == "wrapper_CPU_sigmoid"]
    # outer(x, 3) calls inner at i = 0 and i = 2 (the if's even branch); traced(x) runs sigmoid once;
    # torch.jit.trace runs plain in Python (plain's line) and checks the trace by running it (trace's line)
    lines = sorted(user_line(h) for h in sig)
    outer_line, traced_line = line_of("z = outer(x, 3)"), line_of("w = traced(x)")
    assert lines.count(outer_line) == 2 and lines.count(traced_line) == 1, lines
    tracing = {line_of("return torch.sigmoid(x + 1.0)"), line_of("traced = torch.jit.trace(")}
    assert set(lines) - {outer_line, traced_line} == tracing, lines


def test_a_scripted_call_inlined_in_a_loops_if_is_two_lines_at_the_interpreter(recording):
    _, session, _ = recording
    through = [h for h in session.hits if h.breakpoint == "wrapper_CPU_sigmoid" and user_line(h) == line_of("z = outer(x, 3)")]
    assert len(through) == 2
    for hit in through:
        loops = interpreter_frames(hit)
        assert loops and all(f.layer == "torchscript" for f in loops)
        assert ts_places(hit) == [("outer", *place("y = inner(y)"), None),
                                  ("inner", *place("return torch.sigmoid(x) * 2.0"), "aten::sigmoid")]


def test_relu_in_the_loops_else_branch(recording):
    _, session, _ = recording
    relu = [h for h in session.hits if h.breakpoint == "at::native::relu"]
    assert len(relu) == 1, [user_line(h) for h in relu]  # i = 1 of range(3)
    assert user_line(relu[0]) == line_of("z = outer(x, 3)")
    assert ts_places(relu[0]) == [("outer", *place("y = torch.relu(y + 1.0)"), "aten::relu")]


def test_a_traced_function_keeps_its_source_line(recording):
    _, session, _ = recording
    # torch.jit.trace records each op's Python line as the node's source range: the traced graph has them
    for hit in session.hits:
        if user_line(hit) in (line_of("w = traced(x)"), line_of("traced = torch.jit.trace(")) and interpreter_frames(hit):
            assert ts_places(hit) == [("plain", *place("return torch.sigmoid(x + 1.0)"), "aten::sigmoid")]
    assert any(user_line(h) == line_of("w = traced(x)") and ts_places(h) for h in session.hits)


@pytest.fixture(scope="module")
def views(recording, tmp_path_factory):
    """``pttrace show`` of the recording, its markdown and its JSON export: made once, read by two tests."""
    _, _, path = recording
    tmp = tmp_path_factory.mktemp("views")
    show = run_child([*PTTRACE, "show", str(path)], capture_output=True, text=True, timeout=300, cwd=tmp)
    md, js = tmp / "notes.md", tmp / "s.json"
    markdown = run_child([*PTTRACE, "export", str(path), "-o", str(md)], capture_output=True, text=True,
                         timeout=300)
    assert markdown.returncode == 0, markdown.stderr
    exported = run_child([*PTTRACE, "export", str(path), "--format", "json", "-o", str(js)],
                         capture_output=True, text=True, timeout=300)
    assert exported.returncode == 0, exported.stderr
    return show, md.read_text(), json.loads(js.read_text())


def test_nothing_is_said_to_be_unread_and_every_view_shows_the_lines(recording, views):
    proc, session, path = recording
    show, notes, data = views
    assert not any("TorchScript" in w for w in session.info.warnings), session.info.warnings
    inner = place("return torch.sigmoid(x) * 2.0")
    # the summary (relu's first hit is in outer) and show: the scripted line under the interpreter frame,
    # with its text and node
    relu = place("y = torch.relu(y + 1.0)")
    assert f"TorchScript outer  {relu[0]}:{relu[1]}  {relu[2]}  [aten::relu]" in proc.stdout
    assert show.returncode == 0 and f"↳ TorchScript outer  {inner[0]}:{line_of('y = inner(y)')}" in show.stdout
    assert "line and graph node are not read" not in show.stdout and "were not read" not in show.stdout
    assert "is TorchScript's interpreter**, running" in notes
    assert f"| `inner` | `{inner[0]}:{inner[1]}` | `{inner[2]}` | `aten::sigmoid` |" in notes
    levels = [lv for fr in data["frames"] for lv in fr.get("torchscript") or []]
    assert {"function": "inner", "file": inner[0], "line": inner[1], "text": inner[2]} in \
        [p for lv in levels for p in lv["places"]]


def test_each_graph_is_recorded_once_with_the_programs_lines(recording):
    _, session, _ = recording
    graphs = {}
    for hit in session.hits:
        for f in interpreter_frames(hit):
            for level in f.torchscript or ():
                assert level.graph in session.graphs, (level, list(session.graphs))
                graphs.setdefault(level.function, set()).add(level.graph)
    assert set(graphs) == {"outer", "plain"}
    # outer's graph: the loop, the if in its body with inner's sigmoid inlined in one branch and relu in the
    # other, each node at the line the program has it on
    (outer,) = [session.graphs[g] for g in graphs["outer"]]
    assert not outer.why and not outer.truncated and len(outer.inputs) == 2
    kinds = [(n.kind, n.depth, n.line) for n in outer.nodes]
    loop = next(n for n in outer.nodes if n.kind == "prim::Loop")
    branch = next(n for n in outer.nodes if n.kind == "prim::If")
    assert loop.line == line_of("for i in range(n):") and loop.depth == 0
    assert branch.line == line_of("if i % 2 == 0:") and branch.depth == 1
    assert ("aten::sigmoid", 2, line_of("return torch.sigmoid(x) * 2.0")) in kinds
    assert ("aten::relu", 2, line_of("y = torch.relu(y + 1.0)")) in kinds
    assert [n.block for n in outer.nodes if n.block and n.depth == 2] == ["block0()", "block1()"]
    sigmoid = next(n for n in outer.nodes if n.kind == "aten::sigmoid")
    assert len(sigmoid.inputs) == 1 and sigmoid.inputs[0].startswith("%") and sigmoid.outputs
    dump = outer.dump()
    assert dump[0] == f"graph({', '.join(outer.inputs)}):" and any("prim::Loop(" in line for line in dump)
    # the traced function's graph keeps each op's line
    for g in graphs["plain"]:
        ops = [n for n in session.graphs[g].nodes if n.kind.startswith("aten::")]
        assert ops and all(n.line == line_of("return torch.sigmoid(x + 1.0)") for n in ops)


def test_show_markdown_and_json_print_the_graphs(recording, views):
    _, session, _ = recording
    show, notes, data = views
    assert "TorchScript graph of outer" in show.stdout and "prim::Loop(" in show.stdout
    assert "The graph of `outer`" in notes and f"aten::relu(" in notes
    assert sorted(g["id"] for g in data["graphs"]) == sorted(session.graphs)


def test_the_tui_interleaves_the_lines_and_shows_the_graph(recording):
    from tests.tui.support import run_pilot, wait_until
    from tracer.tui.app import make_app
    from tracer.tui.sources import SessionSource
    from tracer.tui.widgets.source import SourcePane

    _, session, path = recording
    inner = place("return torch.sigmoid(x) * 2.0")

    async def scenario():
        app = make_app(SessionSource.open(path))
        async with app.run_test(size=(200, 60)) as pilot:
            await wait_until(pilot, lambda: app.call_path.hit is not None and app.state.graphs, timeout=30)
            for _ in range(len(session.hits)):  # to the first hit in inner
                if ts_places(app.call_path.hit)[-1:] == [("inner", *inner, "aten::sigmoid")]:
                    break
                seq = app.call_path.hit.seq
                await pilot.press("down")
                await wait_until(pilot, lambda: app.call_path.hit.seq != seq)
            table = app.call_path
            rows = [i for i, r in enumerate(table._rows) if r.kind == "ts"]
            assert len(rows) == 2 and rows[0] == rows[1] - 1
            cells = [getattr(c, "plain", str(c)) for c in table.get_row_at(rows[1])]
            assert cells[1:] == ["torchscript", "  ↳ inner", "aten::sigmoid", f"jit_script.py:{inner[1]}", inner[2]]
            table.move_cursor(row=rows[1])
            pane = app.query_one(SourcePane)
            await wait_until(pilot, lambda: pane.frame is not None and pane.frame.torchscript is not None)
            text = str(pane.shown)
            assert "graph of outer" in text and "prim::Loop(" in text and f"jit_script.py:{inner[1]}" in text
            await pilot.press("q")

    run_pilot(scenario(), timeout=120)


def _without_layout(tmp_path: Path) -> Path:
    """An XDG_CACHE_HOME whose pttrace cache has no TorchScript layout, sharing the rest of this machine's (its
    symbol indexes, torch's values layout: cheap to reuse, minutes to build again)."""
    real, fresh = settings.cache_dir(), tmp_path / "xdg" / "pttrace"
    fresh.mkdir(parents=True)
    for entry in (real.iterdir() if real.is_dir() else ()):
        if entry.name != "scripted":
            (fresh / entry.name).symlink_to(entry)
    return fresh.parent


def _probes() -> list[int]:
    """This test run's layout probes (``python -m tracer.scripted.interp_layout``) still running."""
    out = []
    for pid in our_processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"tracer.scripted.interp_layout" in fh.read():
                    out.append(pid)
        except OSError:
            continue
    return out


def _record(target: Path, xdg: Path, tmp: Path, *breaks: str):
    args = [a for b in breaks for a in ("-b", b)]
    proc = run_child([*PTTRACE, "run", "--batch", "--session-dir", str(tmp), *args, str(target)],
                     capture_output=True, text=True, timeout=900, cwd=tmp,
                     env={**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(xdg)})
    files = sorted(tmp.glob("*.jsonl"))
    assert proc.returncode == 0 and len(files) == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    return files[0]


def _agent_said(path: Path) -> list[dict]:
    return [r for r in map(json.loads, path.read_text().splitlines()) if r.get("type") == "torchscript"]


def test_a_run_that_never_reaches_the_interpreter_starts_no_probe(tmp_path):
    # GIVEN no layout of this torch build in pttrace's cache, and a program without TorchScript
    xdg = _without_layout(tmp_path)
    before = set(_probes())
    path = _record(HELLO, xdg, tmp_path, "wrapper_CPU_sigmoid")
    # THEN the agent was told the layout is not cached, and no g++ probe was started: nothing in the cache
    # (no lock, no layout), no probe process
    assert _agent_said(path) == [{"type": "torchscript", "ready": False, "why": NOT_CACHED}]
    scripted = xdg / "pttrace" / "scripted"
    assert not scripted.exists() or not list(scripted.iterdir()), list(scripted.iterdir())
    assert set(_probes()) <= before
    assert not any("TorchScript" in w for w in storage.load(path).info.warnings)


def _end_probe(scripted: Path, before: set[int]) -> None:
    """The probe a test started (g++ for minutes): its process group ended, by the pid its lock names (written
    once it runs) and any new probe process."""
    import signal

    pids = set(_probes()) - before
    deadline = time.monotonic() + allowance(15)
    for lock in scripted.glob("*.lock"):
        while time.monotonic() < deadline and lock.exists():
            text = lock.read_text().strip() if lock.exists() else ""
            if text.isdigit():
                pids.add(int(text))
                break
            time.sleep(0.05)
    for pid in pids | (set(_probes()) - before):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def test_the_first_hit_through_the_interpreter_starts_the_probe_and_says_so(tmp_path):
    # GIVEN no layout cached, and a program that runs scripted functions
    xdg = _without_layout(tmp_path)
    scripted = xdg / "pttrace" / "scripted"
    before = set(_probes())
    try:
        path = _record(TARGET, xdg, tmp_path, "at::native::relu")
        # THEN the probe was started (its lock names it; it outlives the run, so the next run finds the
        # layout cached), and the session says why the hits have no scripted lines, and what to do
        assert [p.suffix for p in scripted.iterdir()] == [".lock"], list(scripted.iterdir())
        session = storage.load(path)
        (warning,) = [w for w in session.info.warnings if "TorchScript" in w]
        assert NOT_CACHED in warning and "~2 min" in warning and "record again once it is cached" in warning
        assert session.hits and not any(f.torchscript for h in session.hits for f in h.frames)
    finally:
        _end_probe(scripted, before)
