"""The TUI with several processes and a real gdb (one recording, module-scoped): stop mode through the hits
of a parent, its ``os.fork`` child (continue, finish in the child) and a Python subprocess (traced by a
recorder of its own, in a gdb of its own: it stops there too), the hits grouped by process under headings
that say what each ran and how it ended, live and in ``view``, and the subprocess's hit shown while the run
goes on."""
from __future__ import annotations

import socket
import sys

import pytest

from tests.conftest import ROOT, alive
from tests.tui.support import run_pilot, wait_until
from tests.tui.test_prompt_gdb import ask
from tracer.session import storage
from tracer.recorder import TraceConfig
from tracer.tui.app import make_app
from tracer.tui.process_rows import Heading
from tracer.tui.sources import LiveSource, SessionSource

pytestmark = pytest.mark.gdb

FORK_STOP = ROOT / "tests" / "targets" / "fork_stop.py"


def headings(table) -> list[tuple[int, str]]:
    """The hits pane's heading rows: (row, its text), every row of the whole list (not only the window)."""
    out = []
    for position in range(len(table.shown)):
        item = table.shown[position]
        if isinstance(item, Heading):
            out.append((position, " · ".join(str(cell) for cell in table._heading(item) if str(cell))))
    return out


@pytest.fixture(scope="module")
def fork_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fork_stop")
    config = TraceConfig(breakpoints=["wrapper_CPU_sigmoid"], python=sys.executable, script=str(FORK_STOP),
                         session_dir=tmp, live=True, forward_output=False)
    source = LiveSource(config)
    seen: dict = {"stops": [], "finish_in_child": None, "grouped_live": None, "sub_hits_live": None}

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.press("m")
            await wait_until(pilot, lambda: app.state.mode == "stop", timeout=5)
            before = None  # the stop the app had taken in when c was last pressed
            for _ in range(8):
                # a stop the app has taken in since c (the source's count of stops runs ahead of the app's
                # state: its news of the target running and stopping again may still wait to be drawn)
                await wait_until(pilot, lambda: app.state.finished or (
                    app.state.last_stop is not before and app.state.target == "stopped"
                    and app.state.gdb == "ready" and (app.state.last_stop or {}).get("reason") == "breakpoint-hit"
                    and app.call_path.hit is not None), timeout=120, step=0.1,
                    why=lambda: (seen, source._stops, app.state.target, app.state.gdb, app.state.last_stop,
                                 [(h.seq, h.thread.pid) for h in app.state.hits], app.state.warnings,
                                 [p.to_dict() for p in app.state.processes.values()]))
                if app.state.finished:
                    break
                # the hit it stopped at (it may come a little after the stop's news): the newest, the
                # subprocess's included (its own recorder stops it in its own gdb)
                await wait_until(pilot, lambda: len(app.state.hits) > len(seen["stops"])
                                 and app.call_path.hit.seq == app.state.hits[-1].seq, timeout=10,
                                 why=lambda: (seen["stops"], app.call_path.hit.seq,
                                              [(h.seq, h.thread.pid) for h in app.state.hits]))
                hit = app.call_path.hit
                seen["stops"].append((hit.thread.pid, app.call_path.frames[-1].short))
                if len(seen["stops"]) == 3:  # both processes have hits: the pane groups them as they come
                    seen["grouped_live"] = headings(app.hits_table)
                if app.state.processes[hit.thread.pid].session:  # the subprocess, stopped in its own gdb
                    seen["sub_hits_live"] = [h for h in app.state.hits if h.thread.pid == hit.thread.pid]
                    seen["status_in_sub"] = str(app.query_one("#status").render())
                if seen["finish_in_child"] is None and app.state.processes[hit.thread.pid].ppid in app.state.processes:
                    # WHEN f is pressed at a hit of the child THEN gdb finishes the kernel in the child
                    depth = len(app.call_path.frames)
                    await pilot.press("f")
                    await wait_until(pilot, lambda: "where finish stopped" in app.call_path.border_title
                                     and app.state.gdb == "ready", timeout=60, step=0.1)
                    seen["finish_in_child"] = (hit.thread.pid, app.call_path.hit.thread.pid, depth,
                                               len(app.call_path.frames))
                    seen["status_in_child"] = str(app.query_one("#status").render())
                    # AND n, then s, step the child: each stop is in it, its innermost frame at gdb's pc
                    seen["steps_in_child"] = []
                    for key, action in (("n", "next"), ("s", "step")):
                        shown = app.call_path.hit
                        await pilot.press(key)
                        await wait_until(pilot, lambda: app.call_path.hit is not shown and app.state.gdb == "ready"
                                         and f"where {action} stopped" in app.call_path.border_title,
                                         timeout=60, step=0.1)
                        said = await ask(pilot, app, "p/x $pc")
                        await pilot.press("escape")
                        seen["steps_in_child"].append((app.call_path.hit.thread.pid, said,
                                                       f"0x{app.call_path.frames[-1].address:x}"))
                before = app.state.last_stop
                await pilot.press("c")
            await wait_until(pilot, lambda: app.state.finished, timeout=120, step=0.2,
                             why=lambda: (seen, source._stops, app.state.target, app.state.gdb, app.state.last_stop,
                                          [(h.seq, h.thread.pid) for h in app.state.hits], app.state.warnings,
                                          [p.to_dict() for p in app.state.processes.values()]))

            def all_shown():
                """every hit shown under a heading for each process, and every process's end known"""
                procs = app.state.processes.values()
                return (len(app.hits_table.shown) == len(app.state.hits) + len(procs)
                        and all(p.outcome != "running" for p in procs))

            await wait_until(pilot, all_shown, timeout=30, step=0.1,
                             why=lambda: (len(app.hits_table.shown), len(app.state.hits),
                                          [p.to_dict() for p in app.state.processes.values()]))
            seen["grouped_end"] = headings(app.hits_table)
            seen["title_end"] = app.hits_table.border_title
            seen["end_seqs"] = [h.seq for h in app.state.hits]
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)
        return app

    app = run_pilot(scenario(), timeout=500)
    return source, app, seen, source.load_session()


def test_stop_mode_steps_through_the_hits_of_a_parent_and_its_fork_child(fork_run):
    source, app, seen, session = fork_run
    assert source.error is None and source.status == "completed", (source.status, app.state.warnings)
    parent = session.processes[0].pid
    sub = next(p.pid for p in session.processes if p.session)
    main_hits = [h for h in session.hits if h.thread.pid != sub]
    pids = [h.thread.pid for h in main_hits]
    assert len(main_hits) == 4 and pids.count(parent) == 2 and len(set(pids)) == 2, pids
    # THEN every stop showed the hit it stopped at, in the process it stopped in: the subprocess's hit too,
    # stopped in its own gdb (the status line naming it), between the parent's two
    assert [s[0] for s in seen["stops"] if s[0] != sub] == pids, (seen["stops"], pids)
    assert [s[0] for s in seen["stops"]][-2:] == [sub, parent], seen["stops"]
    assert f"pid {sub}" in seen["status_in_sub"], seen["status_in_sub"]
    assert all(s[1] == "at::wrapper_CPU_sigmoid" for s in seen["stops"]), seen["stops"]
    # AND finish at the child's hit finished the kernel in the child (not in the parent)
    child_pid, shown_pid, depth, after = seen["finish_in_child"]
    assert child_pid != parent and shown_pid == child_pid and after == depth - 1, seen["finish_in_child"]
    assert session.process(child_pid).exit_code == 5
    # AND the status line named the child's process at its stop, and n and s stepped the child where gdb's pc is
    assert f"pid {child_pid}" in seen["status_in_child"], seen["status_in_child"]
    assert [step[0] for step in seen["steps_in_child"]] == [child_pid, child_pid], seen["steps_in_child"]
    assert all(said.endswith(pc) for _, said, pc in seen["steps_in_child"]), seen["steps_in_child"]
    # AND every process record says which machine it ran on (one here: the views do not show it)
    assert {p.host for p in session.processes} == {socket.gethostname()}, [p.to_dict() for p in session.processes]
    assert source.engine.mi.proc.poll() is not None, "the TUI left its gdb behind"
    assert not any(alive(p.pid) for p in session.processes)


def test_the_hits_pane_groups_hits_by_process_as_they_come(fork_run):
    source, app, seen, session = fork_run
    parent = session.processes[0].pid
    live = seen["grouped_live"]
    assert live and live[0][0] == 0 and f"pid {parent}" in live[0][1], live
    assert len(live) >= 2 and live[1][0] > 1, live  # the parent's hit(s) under its heading, then the child
    end = seen["grouped_end"]
    child = next(p for p in session.processes if p.exit_code == 5)
    sub = next(p for p in session.processes if p.session)
    by_pid = {p.pid: text for _, text in end for p in session.processes if text.startswith(f"pid {p.pid}")}
    # THEN each process's heading says what it ran, when, and how it ended
    assert "2 hits" in by_pid[child.pid] and "exit code 5" in by_pid[child.pid], by_pid
    assert "fork_stop.py" in by_pid[parent] and "exit code 0" in by_pid[parent], by_pid
    assert "1 hit " in by_pid[sub.pid] and "-c" in by_pid[sub.pid], by_pid
    assert seen["title_end"] == "hits (5) · 3 processes", seen["title_end"]


def test_the_hits_of_a_python_subprocess_are_shown_while_the_run_goes_on(fork_run):
    source, app, seen, session = fork_run
    sub = next(p for p in session.processes if p.session)
    assert [h.breakpoint for h in seen["sub_hits_live"]] == ["wrapper_CPU_sigmoid"], seen["sub_hits_live"]
    # AND at the end the TUI numbers the hits as `view` does
    assert seen["end_seqs"] == [h.seq for h in session.hits] and len(session.hits) == 5
    assert [h.thread.pid for h in session.hits].count(sub.pid) == 1


def test_view_groups_the_saved_session_by_process(fork_run):
    source, app, seen, session = fork_run

    async def scenario():
        view = make_app(SessionSource.open(source.session_path))
        async with view.run_test(size=(200, 60)) as pilot:
            await wait_until(pilot, lambda: view.state.finished and len(view.hits_table.shown) == 5 + 3
                             and view.call_path.hit is not None, timeout=20)
            # THEN the cursor starts on the first process's first hit (row 0 is its heading)
            first = (view.call_path.hit.seq, view.hits_table.cursor_row)
            shown = headings(view.hits_table)
            await pilot.press("q")
            return first, shown

    first, shown = run_pilot(scenario(), timeout=60)
    assert first == (next(h.seq for h in session.hits if h.thread.pid == session.processes[0].pid), 1), first
    assert [text.split(" ")[1] for _, text in shown] == [str(p.pid) for p in session.processes], shown
    assert "exit code 5" in shown[1][1] and shown[1][0] == 3, shown  # the parent's two hits above it
