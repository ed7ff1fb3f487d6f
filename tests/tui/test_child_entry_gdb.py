"""Stop mode in a fork child whose first stop is at a breakpoint gdb resolves by name (libz's zlibCompileFlags
through ctypes): the child stops at the internal breakpoint set by address at the name's place
(agent/breakpoints.py, ChildEntry), which gdb numbers below zero. The TUI shows that stop as the named
breakpoint's hit in the child, steps from it in the child, and no view shows gdb's internal number."""
from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT, alive
from tests.support import LIBFFI, assert_only_unnamed
from tests.tui.support import run_pilot, wait_until
from tracer.recorder import TraceConfig
from tracer.tui.app import make_app
from tracer.tui.sources import LiveSource
from tracer.tui.state import describe_stop

pytestmark = pytest.mark.gdb

# The parent calls zlibCompileFlags, forks a child that calls it twice, then (--again) calls it once more.
FORK_LIBZ = ROOT / "tests" / "targets" / "fork_libz.py"


def test_a_childs_first_stop_at_a_named_breakpoints_entry_is_that_breakpoints_hit(tmp_path):
    config = TraceConfig(breakpoints=["zlibCompileFlags"], python=sys.executable, script=str(FORK_LIBZ),
                         script_args=("--again",),
                         session_dir=tmp_path / "sessions", live=True, forward_output=False)
    source = LiveSource(config)
    seen: list[dict] = []

    def steps() -> int:
        return sum(1 for s in seen if s["stop"].get("reason") != "breakpoint-hit")

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.press("m")
            await wait_until(pilot, lambda: app.state.mode == "stop", timeout=5)
            before = None
            for _ in range(8):
                await wait_until(pilot, lambda: app.state.finished or (
                    app.state.last_stop is not before and app.state.target == "stopped" and app.state.gdb == "ready"
                    and app.call_path.hit is not None), timeout=120, step=0.1,
                    why=lambda: (seen, app.state.target, app.state.gdb, app.state.last_stop))
                if app.state.finished:
                    break
                stop = dict(app.state.last_stop)
                if stop.get("reason") == "breakpoint-hit":  # the hit it stopped at: it may come after the stop
                    await wait_until(pilot, lambda: app.call_path.hit.thread.pid == stop.get("pid")
                                     and app.call_path.hit.seq == len(app.state.hits) > len(seen) - steps(),
                                     timeout=10, why=lambda: (stop, app.call_path.hit, len(app.state.hits), seen))
                hit = app.call_path.hit
                seen.append({"stop": stop, "said": describe_stop(stop), "status": str(app.query_one("#status").render()),
                             "pid": hit.thread.pid, "seq": hit.seq, "breakpoint": hit.breakpoint,
                             "innermost": app.call_path.frames[-1].short,
                             "numbers": [bp.number for bp in app.state.breakpoints.values()]})
                before = app.state.last_stop
                # WHEN s is pressed at the child's first stop (at the entry) THEN gdb steps the child from there
                child_first = hit.thread.pid != seen[0]["pid"] and len([s for s in seen if s["pid"] == hit.thread.pid]) == 1
                await pilot.press("s" if child_first else "c")
            await wait_until(pilot, lambda: app.state.finished, timeout=120, step=0.2, why=lambda: seen)
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)

    run_pilot(scenario(), timeout=400)
    session = source.load_session()
    assert source.error is None and source.status == "completed", (source.status, session.info.warnings)
    parent = session.processes[0].pid
    child = next(p.pid for p in session.processes if p.pid != parent)
    assert [h.thread.pid for h in session.hits] == [parent, child, child, parent], [h.to_dict() for h in session.hits]
    # THEN the stops were: the parent's hit, the child's first (at the entry), the step in the child, the
    # child's second hit, the parent's last; each hit recorded once, every one of the named breakpoint
    assert [(s["stop"].get("reason"), s["pid"]) for s in seen] == [
        ("breakpoint-hit", parent), ("breakpoint-hit", child), ("end-stepping-range", child),
        ("breakpoint-hit", child), ("breakpoint-hit", parent)], [
        (s["stop"].get("reason"), s["pid"], s["seq"], s["stop"].get("bkptno"), s["stop"].get("pid")) for s in seen]
    hits = [s for s in seen if s["stop"].get("reason") == "breakpoint-hit"]
    assert [s["seq"] for s in hits] == [1, 2, 3, 4], seen
    assert all(s["breakpoint"] == "zlibCompileFlags" and s["innermost"] == "zlibCompileFlags" for s in hits), seen
    # AND every stop at a hit is told as the named breakpoint's (gdb's number 1), the child's first too:
    # never gdb's internal number (before: "breakpoint -23" in the status line and "Breakpoint -23, ..." told)
    assert [s["stop"].get("bkptno") for s in hits] == ["1"] * 4, seen
    assert all("breakpoint 1 " in s["status"] and s["said"].startswith("Breakpoint 1, ") for s in hits), seen
    assert all(s["numbers"] == [1] for s in seen), seen  # the breakpoints panel: the named one, nothing internal
    assert session.process(child).exit_code == 3
    assert_only_unnamed(session.info.warnings, LIBFFI)  # the ctypes call's libffi frames, said once
    assert not any(alive(p.pid) for p in session.processes)
