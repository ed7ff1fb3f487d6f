"""``frame N`` then ``next`` at a stop in a library without line tables (libz called through ctypes, libffi
between): pttrace says and shows what plain gdb says and where it stops, with the key ``n`` and with ``next``
typed at the prompt. gdb steps from the innermost frame, not the selected one: out of zlibCompileFlags into
libffi's unnamed caller, and there a second ``next`` is refused ("Cannot find bounds of current function").
The oracle is ``gdb -nx --batch`` doing the same on the same program."""
from __future__ import annotations

import json
import re
import sys

import pytest

from tests.support import run_child
from tests.tui.support import run_pilot, wait_until
from tests.tui.test_prompt_gdb import ask, output_text, stopped_at_first_hit
from tests.tui.test_steps_vs_gdb import _ours
from tracer.recorder import TraceConfig
from tracer.tui.app import make_app
from tracer.tui.sources import LiveSource

pytestmark = [pytest.mark.gdb]

TARGET = '''\
import ctypes
flags = ctypes.CDLL("libz.so.1").zlibCompileFlags
print("FLAGS", flags(), flush=True)
'''

# Inside plain gdb: the stop, `frame 3` (ffi_call), `next`, `frame 2`, `next`; after each next, gdb's words
# and its innermost frames (library, pc - the library's load base, name).
ORACLE = r'''
import json, os, gdb

def frames(n=3):
    inferior, out, f = gdb.selected_inferior(), [], gdb.newest_frame()
    while f is not None and len(out) < n:
        lib = gdb.solib_name(f.pc()) or inferior.progspace.filename
        base = None
        with open(f"/proc/{inferior.pid}/maps") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 6 and int(parts[2], 16) == 0 and os.path.realpath(parts[5]) == os.path.realpath(lib):
                    base = int(parts[0].split("-")[0], 16)
                    break
        out.append({"lib": os.path.basename(lib), "offset": f.pc() - base if base is not None else None,
                    "name": f.name()})
        f = f.older()
    return out

gdb.execute("set breakpoint pending on")
gdb.execute("break zlibCompileFlags")
gdb.execute("run")
for level in (3, 2):
    gdb.execute(f"frame {level}")
    try:
        said = gdb.execute("next", to_string=True)
    except gdb.error as exc:
        said = "error: " + str(exc)
    print("ORACLE " + json.dumps({"said": said, "frames": frames()}), flush=True)
gdb.execute("kill")
'''


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    path = tmp_path_factory.mktemp("ffi") / "ffi_next.py"
    path.write_text(TARGET)
    return path


@pytest.fixture(scope="module")
def gdbs_nexts(target) -> list[dict]:
    script = target.parent / "oracle.py"
    script.write_text(ORACLE)
    proc = run_child(["gdb", "-nx", "--batch", "-ex", f"source {script}", "--args", sys.executable, str(target)],
                     capture_output=True, timeout=120)
    out = proc.stdout.decode(errors="replace")
    steps = [json.loads(line[len("ORACLE "):]) for line in out.splitlines() if line.startswith("ORACLE ")]
    assert len(steps) == 2, out[-2000:] + proc.stderr.decode(errors="replace")[-2000:]
    return steps


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("how", ["key", "prompt"])
def test_next_after_frame_n_into_libffi_is_what_gdb_does(tmp_path, target, gdbs_nexts, how):
    first, second = gdbs_nexts
    # The oracle's facts, as gdb 13 gives them: out of zlibCompileFlags into libffi's unnamed caller, then refused
    assert "Single stepping until exit from function zlibCompileFlags" in _words(first["said"]), first
    assert first["frames"][0]["lib"] == "libffi.so.8" and first["frames"][0]["name"] is None, first
    assert second["said"] == "error: Cannot find bounds of current function", second
    assert second["frames"] == first["frames"]
    source = LiveSource(TraceConfig(breakpoints=("zlibCompileFlags",), python=sys.executable, script=str(target),
                                    session_dir=tmp_path, live=True, forward_output=False, mode="stop"))

    async def next_there(pilot, app, level: int) -> str:
        """`frame LEVEL` at the prompt, then next (the key or the line): what the prompt answered to next."""
        said = await ask(pilot, app, f"frame {level}")
        assert said.startswith(f"#{level}  "), said
        if how == "prompt":
            return await ask(pilot, app, "next")
        await pilot.press("escape")
        await pilot.press("n")
        return ""

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(160, 48)) as pilot:
            # GIVEN the target stopped at zlibCompileFlags, called through ctypes and libffi
            await wait_until(pilot, lambda: stopped_at_first_hit(app), timeout=120, step=0.2)
            path = app.call_path
            assert path.frames[-1].short == "zlibCompileFlags"
            # WHEN frame 3 (ffi_call) is selected, then next
            before = path.hit
            said = await next_there(pilot, app, 3)
            await wait_until(pilot, lambda: path.hit is not before and app.state.gdb == "ready"
                             and "stopped" in path.border_title, timeout=60, step=0.1)
            # THEN gdb's words are told (in the prompt's answer, or the key's note) and the call path is where
            # gdb stopped: libffi's unnamed frame innermost, selected
            told = said if how == "prompt" else " ".join(str(n.message) for n in app._notifications)
            assert "Single stepping until exit from function zlibCompileFlags, which has no line number " \
                   "information." in _words(told), told
            if how == "prompt":  # AND in gdb's order: its words for the line, then where it stopped
                # (the stop's line is written once the prompt's answer is: a message after the stop's own)
                await wait_until(pilot, lambda: "Stepped to " in output_text(app).split("(gdb) next")[-1],
                                 timeout=10, step=0.05, why=lambda: output_text(app)[-600:])
                pane = output_text(app).split("(gdb) next")[-1]
                assert "Stepped to " in pane and pane.index("Single stepping") < pane.index("Stepped to "), pane
            assert _ours(path.frames, app.state.pid)[:3] == [{**f, "file": None, "line": None}
                                                             for f in first["frames"]], path.frames[-3:]
            assert path.selected_frame_index() == len(path.frames) - 1
            assert app.state.target == "stopped"
            # WHEN frame 2 is selected and next again THEN gdb's refusal is told, and nothing moved
            stop = path.hit
            notes = len(app._notifications)
            said = await next_there(pilot, app, 2)
            if how == "prompt":
                assert said == "Cannot find bounds of current function", said
            else:
                await wait_until(pilot, lambda: len(app._notifications) > notes and app.state.gdb == "ready",
                                 timeout=60, step=0.1)
                assert [str(n.message) for n in app._notifications][notes:] == \
                    ["gdb: Cannot find bounds of current function"]
            assert path.hit is stop and app.state.target == "stopped"
            said = await ask(pilot, app, "frame 0")
            assert re.match(r"#0  0x[0-9a-f]+ in \?\? \(\) from \S*libffi\.so\.8", said), said
            # AND c lets the target end as it does alone
            await pilot.press("escape")
            await pilot.press("c")
            await wait_until(pilot, lambda: app.state.finished, timeout=60)
            assert "FLAGS " in output_text(app)
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)
        return app

    try:
        run_pilot(scenario(), timeout=300)
    finally:
        source.stop("test over")
    assert source.engine.mi.proc.poll() is not None, "the TUI left its gdb behind"
