"""The TUI's s, n and f against plain gdb: the same target stepped the same way by ``gdb -nx --batch`` (all
symbols read, no pttrace) is the oracle, and after every stop the TUI's call path must show the frames
gdb's own ``bt`` shows there (library, offset in it, name, file and line), innermost first. The same run
switches to stop mode while gdb is still starting, checks what the call path shows after each kind of step
(its caller after finish, gdb's `frame` line after next), and quits with q, y: the target killed, nothing left."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import HELLO, ROOT, alive
from tests.support import run_child
from tests.tui.support import run_pilot, wait_until
from tests.tui.test_live_gdb import gdb_frame, held_gdb
from tests.tui.test_prompt_gdb import prompt_on_the_release_wheel
from tracer.recorder import TraceConfig
from tracer.tui.app import make_app
from tracer.tui.screens import ConfirmQuit
from tracer.tui.sources import LiveSource

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

KEYS = {"finish": "f", "step": "s", "next": "n"}
COMPARED = 6  # innermost native frames compared at each stop (below the interpreter's eval loop)

# Runs inside plain gdb: stop at the CPU sigmoid kernel, then finish, step, finish until a frame with a
# line table is innermost, next three times; after each stop, one line: the action and gdb's frames
# (library, pc - the library's load base, name, file, line), innermost first.
ORACLE = r'''
import json, os, gdb

def base_of(pid, path):
    real = os.path.realpath(path)
    with open(f"/proc/{pid}/maps") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 6 and int(parts[2], 16) == 0 and os.path.realpath(parts[5]) == real:
                return int(parts[0].split("-")[0], 16)

def frames():
    inferior = gdb.selected_inferior()
    out, f = [], gdb.newest_frame()
    while f is not None and len(out) < 16:
        lib = gdb.solib_name(f.pc()) or inferior.progspace.filename
        sal = f.find_sal()
        base = base_of(inferior.pid, lib)
        out.append({"lib": os.path.basename(lib), "offset": f.pc() - base if base is not None else None,
                    "name": f.name(), "file": os.path.basename(sal.symtab.filename) if sal.symtab else None,
                    "line": sal.line or None})
        f = f.older()
    return out

def say(action):
    print("ORACLE " + json.dumps({"action": action, "frames": frames()}), flush=True)

gdb.execute("set breakpoint pending on")
gdb.execute("break wrapper_CPU_sigmoid")
gdb.execute("run")
say("hit")
for action in ("finish", "step"):
    gdb.execute(action)
    say(action)
for _ in range(10):
    if frames()[0]["line"]:
        break
    gdb.execute("finish")
    say("finish")
for _ in range(3):
    gdb.execute("next")
    say("next")
gdb.execute("kill")
'''


@pytest.fixture(scope="module")
def gdbs_steps(tmp_path_factory) -> list[dict]:
    script = tmp_path_factory.mktemp("oracle") / "steps.py"
    script.write_text(ORACLE)
    # -nx: no init files; --batch: exit after the script; the target run as pttrace runs it.
    proc = run_child(["gdb", "-nx", "--batch", "-ex", f"source {script}", "--args", sys.executable, str(HELLO)],
                     capture_output=True, text=True, timeout=600, cwd=ROOT)
    steps = [json.loads(line[len("ORACLE "):]) for line in proc.stdout.splitlines() if line.startswith("ORACLE ")]
    assert steps and steps[0]["action"] == "hit", proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [s["action"] for s in steps][-3:] == ["next"] * 3, [s["action"] for s in steps]
    return steps


def _bases(pid: int) -> dict[str, int]:
    bases: dict[str, int] = {}
    with open(f"/proc/{pid}/maps") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 6 and int(parts[2], 16) == 0:
                bases.setdefault(os.path.realpath(parts[5]), int(parts[0].split("-")[0], 16))
    return bases


def _ours(frames, pid: int) -> list[dict]:
    """The TUI's native frames, innermost first, in the oracle's terms."""
    bases = _bases(pid)
    out = []
    for f in reversed([f for f in frames if f.kind == "native"]):
        base = bases.get(os.path.realpath(f.library)) if f.library else None
        out.append({"lib": os.path.basename(f.library or ""), "offset": f.address - base if base and f.address else None,
                    "name": f.function, "file": os.path.basename(f.file) if f.file else None, "line": f.line})
    return out


def _compared(frames: list[dict]) -> list[dict]:
    """The innermost frames up to the interpreter's eval loop (pttrace shows Python frames for it)."""
    cut = next((i for i, f in enumerate(frames) if (f["name"] or "").startswith("_PyEval_EvalFrameDefault")),
               len(frames))
    return frames[:min(cut, COMPARED)]


def test_each_stop_of_s_n_f_is_where_plain_gdb_stops(tmp_path, gdbs_steps):
    settings, gate = held_gdb(tmp_path)
    config = TraceConfig(breakpoints=["wrapper_CPU_sigmoid"], python=sys.executable, script=str(HELLO),
                         session_dir=tmp_path, live=True, forward_output=False, settings=settings)
    source = LiveSource(config)
    seen: list[tuple[str, list[dict], list[dict]]] = []

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(160, 48)) as pilot:
            # GIVEN hello-world.py switched to stop mode while gdb was still starting
            assert app.state.gdb == "starting" and app.state.mode == "record"
            await pilot.press("m")
            await wait_until(pilot, lambda: app.state.mode == "stop", timeout=10)
            gate.touch()
            # THEN it stops at the CPU sigmoid kernel's first hit
            await wait_until(pilot, lambda: app.state.target == "stopped" and app.call_path.hit is not None,
                             timeout=120, step=0.2)
            path = app.call_path
            assert path.hit.seq == 1 and path.frames[-1].short == "at::wrapper_CPU_sigmoid"
            assert app.state.pid and f"pid {app.state.pid}" in str(app.query_one("#status").render())
            depth = len(path.frames)
            names = [f.short for f in path.frames]
            assert "torch::autograd::THPVariable_sigmoid" in names and "at::_ops::sigmoid::call" in names
            seen.append(("hit", _ours(path.frames, app.state.pid), gdbs_steps[0]["frames"]))
            # AND the prompt answers there as it does on the release wheel (test_prompt_gdb's lines, in this
            # run: one whole run of torch under gdb for both); it leaves gdb in frame #0, as the steps need
            await prompt_on_the_release_wheel(pilot, app)
            # WHEN each key of gdb's own run is pressed in turn (finish, step, finish until a frame with a line
            # table is innermost, next three times)
            lines = []
            for n, step in enumerate(gdbs_steps[1:]):
                before = path.hit
                await pilot.press(KEYS[step["action"]])
                await wait_until(pilot, lambda: path.hit is not before and app.state.gdb == "ready"
                                 and f"where {step['action']} stopped" in path.border_title, timeout=60, step=0.1)
                seen.append((step["action"], _ours(path.frames, app.state.pid), step["frames"]))
                assert app.state.target == "stopped"
                if n == 0:  # THEN finish shows the kernel's caller innermost
                    assert step["action"] == "finish" and len(path.frames) == depth - 1
                    assert path.frames[-1].short == "wrap_kernel_functor_unboxed_<…wrapper_CPU_sigmoid…>::call"
                elif n == 1:  # AND step goes on, out of the adapter (no line table)
                    assert step["action"] == "step" and len(path.frames) < depth - 1
                    assert "at::_ops::sigmoid::redispatch" in [f.short for f in path.frames]
                elif step["action"] == "next":
                    # AND after each next the innermost row shows the line gdb's `frame` shows, selected
                    where = gdb_frame(source)
                    inner = path.frames[-1]
                    assert where == ((os.path.basename(inner.file) if inner.file else None), inner.line), \
                        (where, inner)
                    row = path.row_count - 1
                    shown = str(path.get_cell_at((row, path.get_column_index("where"))))
                    if where[1] is not None:
                        assert shown.endswith(f"{where[0]}:{where[1]}"), (shown, where)
                    assert path.cursor_row == row  # frame #0 is the selected one, as in gdb
                    lines.append((inner.function, inner.line))
            assert len(set(lines)) > 1, f"next did not move: {lines}"
            # WHEN q then y are pressed THEN the target is killed and the app ends
            await pilot.press("q")
            assert isinstance(app.screen, ConfirmQuit)
            await pilot.press("y")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)
        return app

    try:
        app = run_pilot(scenario(), timeout=600)
    finally:
        gate.touch()  # a failure before the gate opened leaves no shell waiting for it
        source.stop("test over")
    # THEN after every stop the innermost frames are gdb's: same library and offset, name, file and line
    assert len(seen) == len(gdbs_steps)
    for n, (action, ours, theirs) in enumerate(seen):
        want = _compared(theirs)
        assert want, (action, theirs)
        assert ours[:len(want)] == want, f"stop {n} ({action}): pttrace {ours[:len(want)]} gdb {want}"
    # AND the run ended as quit: one hit recorded, our own gdb and target gone (ask about ours only)
    assert source.finished and source.error is None and source.status == "interrupted", source.status
    assert len(app.state.hits) == 1
    assert [h.breakpoint for h in source.load_session().hits] == ["wrapper_CPU_sigmoid"]
    assert source.engine.mi.proc.poll() is not None, "the TUI left its gdb behind"
    assert not alive(app.state.pid), "the TUI left the launched target behind"
