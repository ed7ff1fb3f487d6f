"""Stop mode in a child that executed Python, which a recorder of its own traces in a gdb of its own
(tracer/recorder/children.py): its hit is a real stop. The status line names its process and gdb's thread,
and s, n, f, the prompt and c act there; after each step the call path's innermost frame is where that
gdb's own ``frame`` and ``$pc`` say it is. Two ways in: the target itself becomes another Python (os.execv,
same pid) and a child started by subprocess (a pid of its own, the parent waiting). The targets stop in
libz's zlibCompileFlags through ctypes, not in torch: the claims are about the processes, their gdbs and the
steps (stepping in torch, where gdb reads libtorch_cpu.so's symbols, is test_steps_vs_gdb's and
test_prompt_gdb's)."""
from __future__ import annotations

import os
import re

import pytest

from tests.conftest import ROOT
from tests.tui.support import run_pilot, wait_until
from tests.tui.test_prompt_gdb import ask, stop_mode_source, stopped_at_first_hit
from tracer.tui.app import make_app
from tracer.tui.widgets.output import OutputLog

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

EXEC_INTO_SCRIPT = ROOT / "tests" / "targets" / "exec_into_script.py"
SUBPROCESS_PYTHON = ROOT / "tests" / "targets" / "subprocess_python.py"
SECOND = ROOT / "tests" / "targets" / "exec_second.py"
HIT = "zlibCompileFlags"
# gdb's `frame`: "#0  0x00007f.. in NAME (ARGS) at FILE:LINE", "#0  NAME (ARGS) at FILE:LINE" or "... from LIB"
FRAME = re.compile(r"^#0\s+(?:0x[0-9a-f]+ in )?(?P<name>.+?)(?: at (?P<file>\S+):(?P<line>\d+)| from (?P<lib>\S+))?$",
                   re.M)


def _plain(name: str) -> str:
    return "".join(name.replace("(anonymous namespace)::", "").split())


def _status(app) -> str:
    return str(app.query_one("#status").render())


async def assert_where_gdb_is(pilot, app, action: str) -> None:
    """The call path's innermost frame (selected, as gdb selects frame #0) is the one gdb's `frame` prints,
    at gdb's $pc."""
    path = app.call_path
    ours = path.frames[-1]
    assert path.selected_frame_index() == len(path.frames) - 1, action
    pc = await ask(pilot, app, "p/x $pc")
    assert pc.endswith(f"0x{ours.address:x}"), (action, pc, ours)
    said = await ask(pilot, app, "frame")
    await pilot.press("escape")
    m = FRAME.search(said)
    assert m, (action, said)
    # gdb prints a function's arguments after a space ("f ()" without DWARF), and names some local symbols
    # without their anonymous namespace (at::wrapper_CPU_sigmoid): the name compared is the rest
    theirs, name = _plain(m["name"].rsplit(" (", 1)[0]), _plain(ours.function or "")
    assert name == theirs or name.startswith(theirs + "("), (action, said, ours.function)
    if m["file"]:
        assert (os.path.basename(ours.file or ""), ours.line) == (os.path.basename(m["file"]), int(m["line"])), \
            (action, said, ours.file, ours.line)
    elif m["lib"]:
        assert os.path.basename(ours.library or "") == os.path.basename(m["lib"]), (action, said, ours.library)


async def step_next_finish_there(pilot, app, pid: int) -> None:
    """s, n, f at a stop in ``pid``: each stops in it, where its gdb says."""
    path = app.call_path
    for key, action in (("s", "step"), ("n", "next"), ("f", "finish")):
        before = path.hit
        await pilot.press(key)
        await wait_until(pilot, lambda: path.hit is not before and f"where {action} stopped" in path.border_title
                         and app.state.gdb == "ready", timeout=90, step=0.1)
        assert path.hit.thread.pid == pid, (action, path.hit.thread)
        assert path.frames[-1].address != before.frames[-1].address, (action, path.frames[-1])  # it moved
        assert f"pid {pid}" in _status(app), (action, _status(app))
        await assert_where_gdb_is(pilot, app, action)


def test_a_target_that_executes_another_python_script(tmp_path):
    # GIVEN a target that calls zlibCompileFlags, then os.execv's another Python script that calls it again
    source = stop_mode_source(tmp_path, HIT, script=str(EXEC_INTO_SCRIPT))

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: stopped_at_first_hit(app), timeout=180, step=0.2)
            path = app.call_path
            first = path.hit
            pid = first.thread.pid
            # THEN the first program stops, and the status line names its process and gdb's thread
            status = _status(app)
            assert f"pid {pid}" in status and f"gdb thread {app.state.last_stop['thread-id']}" in status
            await assert_where_gdb_is(pilot, app, "hit")

            # WHEN a breakpoint is added there (b), on a function only the new program will call
            added = "zlibVersion"
            app._control(f"add {added}", lambda: source.add_breakpoint(added))
            await wait_until(pilot, lambda: app.state.gdb == "ready" and added in app.state.breakpoints,
                             timeout=120, step=0.2)
            # AND c lets it run into its exec THEN the new program (its own recorder, same pid) stops at that
            # breakpoint first: the recorder that started after the change has it
            await pilot.press("c")
            await wait_until(pilot, lambda: len(app.state.hits) >= 2 and app.state.target == "stopped"
                             and app.state.gdb == "ready" and path.hit is not None and path.hit.seq == 2,
                             timeout=240, step=0.2)
            assert path.hit.breakpoint == added and path.hit.thread.pid == pid, path.hit
            # WHEN c THEN it stops at its zlibCompileFlags
            await pilot.press("c")
            await wait_until(pilot, lambda: len(app.state.hits) >= 3 and app.state.target == "stopped"
                             and app.state.gdb == "ready" and path.hit is not None and path.hit.seq == 3,
                             timeout=120, step=0.2)
            assert [f.file for f in path.hit.frames if f.kind == "python"] == [str(SECOND)]
            status = _status(app)
            assert "stopped: breakpoint" in status and f"pid {pid}" in status and "gdb thread 1" in status, status
            await assert_where_gdb_is(pilot, app, "hit in the new program")
            # AND s, n, f run there, each stopping where that gdb says
            await step_next_finish_there(pilot, app, pid)

            # WHEN c THEN the new program runs to its end, and so does the run
            await pilot.press("c")
            await wait_until(pilot, lambda: app.state.finished, timeout=120, step=0.2)
            assert [h.breakpoint for h in app.state.hits] == [HIT, added, HIT]
            text = "\n".join(x.plain for x in app.query_one(OutputLog)._lines)
            assert f"FIRST {pid}" in text and "executed a new Python program" not in text, text
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)
        return app

    run_pilot(scenario(), timeout=900)
    assert source.engine.mi.proc.poll() is not None, "the TUI left its gdb behind"
    assert source.status == "completed", source.status


def test_a_python_child_started_by_subprocess_stops_from_its_first_hit(tmp_path):
    # GIVEN a target that never calls libz itself, running a Python child (subprocess) that does
    source = stop_mode_source(tmp_path, HIT, script=str(SUBPROCESS_PYTHON))

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(160, 48)) as pilot:
            # WHEN the child reaches its hit THEN it stops there: the status line names the child and its thread
            await wait_until(pilot, lambda: stopped_at_first_hit(app), timeout=240, step=0.2)
            path = app.call_path
            child = path.hit.thread.pid
            assert child != app.state.pid
            status = _status(app)
            assert f"pid {child}" in status and "gdb thread 1" in status, status
            # AND the prompt runs in the child, and the stop is where its gdb says
            said = await ask(pilot, app, "info proc")
            assert f"process {child}" in said, said
            await assert_where_gdb_is(pilot, app, "hit")
            # AND s, n, f run in it
            await step_next_finish_there(pilot, app, child)
            # WHEN c THEN the child ends with its own exit code, seen by its parent, and the run ends
            await pilot.press("c")
            await wait_until(pilot, lambda: app.state.finished, timeout=120, step=0.2)
            assert app.state.processes[child].exit_code == 3, app.state.processes[child]
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)
        return app

    run_pilot(scenario(), timeout=900)
    assert source.engine.mi.proc.poll() is not None, "the TUI left its gdb behind"
    assert source.status == "completed", source.status
