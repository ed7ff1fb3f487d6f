"""The thread list (``t``) on a real gdb: eight named threads calling libz (threads.py --no-torch: the claims
are the threads'), stopped at a hit in one of them; another thread picked is shown, named in the status
line, and the prompt runs in it."""
from __future__ import annotations

import re
import sys

import pytest

from tests.conftest import ROOT
from tests.tui.support import run_pilot, wait_until
from tests.tui.test_prompt_gdb import ask, stop_mode_source, stopped_at_first_hit
from tracer.recorder import TraceConfig
from tracer.tui.app import make_app
from tracer.tui.sources import LiveSource
from tracer.tui.threads_screen import ThreadsScreen
from tracer.tui.widgets.output import OutputLog

THREADS = ROOT / "tests" / "targets" / "threads.py"


@pytest.mark.gdb
def test_pick_another_thread_then_ask_gdb_there(tmp_path):
    source = stop_mode_source(tmp_path, "zlibCompileFlags", script=str(THREADS), script_args=("--no-torch",))

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: stopped_at_first_hit(app), timeout=120, step=0.2)
            stopped_lwp = app.call_path.hit.thread.lwp
            # THEN the status line names the thread that stopped
            stopped_id = str(app.state.last_stop.get("thread-id"))
            assert f"gdb thread {stopped_id}" in str(app.query_one("#status").render())

            # WHEN t is pressed THEN every thread is listed with its name, state and innermost frame
            await pilot.press("t")
            await wait_until(pilot, lambda: isinstance(app.screen, ThreadsScreen), timeout=30)
            rows = app.screen.rows
            assert len(rows) >= 9 and sum(r.name.startswith("worker-") for r in rows) >= 1
            assert all(r.state == "stopped" and r.frame for r in rows)
            other = next(r for r in rows if r.lwp != stopped_lwp)

            # WHEN another thread is picked THEN the call path shows its stack, the status names it
            table = app.screen.query_one("DataTable")
            table.move_cursor(row=rows.index(other))
            await pilot.press("enter")
            path = app.call_path
            await wait_until(pilot, lambda: path.hit is not None and path.hit.thread.lwp == other.lwp,
                             timeout=60)
            assert f"thread {other.id}" in path.border_title and "picked" in path.border_title
            assert f"gdb thread {other.id} (picked)" in str(app.query_one("#status").render())

            # AND the prompt runs in it
            said = await ask(pilot, app, "thread")
            assert re.search(rf"Current thread is {other.id}\b.*LWP {other.lwp}", said), said
            await pilot.press("escape")
            await pilot.press("q")
            await pilot.press("y")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)
        return app

    run_pilot(scenario(), timeout=400)
    assert source.engine.mi.proc.poll() is not None, "the TUI left its gdb behind"


DATALOADER = ROOT / "tests" / "targets" / "dataloader_stop.py"


@pytest.mark.gdb
def test_step_next_finish_in_a_dataloader_worker_from_its_first_stop(tmp_path):
    source = stop_mode_source(tmp_path, "wrapper_CPU_sigmoid", script=str(DATALOADER))

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: stopped_at_first_hit(app), timeout=180, step=0.2)
            path = app.call_path
            worker = path.hit.thread.pid
            # THEN the status line names the worker (not the main process) and gdb's thread that stopped
            status = str(app.query_one("#status").render())
            assert worker != app.state.pid and f"pid {worker}" in status, status
            assert f"gdb thread {app.state.last_stop['thread-id']}" in status
            # AND the thread list names the kernel the worker stopped in, where gdb (unwind tables only) has ??
            await pilot.press("t")
            await wait_until(pilot, lambda: isinstance(app.screen, ThreadsScreen), timeout=30)
            stopped = next(r for r in app.screen.rows if r.current)
            assert "in at::wrapper_CPU_sigmoid () from libtorch_cpu.so" in stopped.frame, stopped
            await pilot.press("escape")
            for key, action in (("s", "step"), ("n", "next"), ("f", "finish")):
                before = path.hit
                await pilot.press(key)
                await wait_until(pilot, lambda: path.hit is not before and f"where {action} stopped" in path.border_title
                                 and app.state.gdb == "ready", timeout=60, step=0.1)
                # THEN it stopped in the worker, somewhere else than before (a step that gdb refused left it
                # where it stood), and the innermost frame shown is where gdb's pc is
                assert path.hit.thread.pid == worker
                assert path.frames[-1].address != before.frames[-1].address, (action, path.frames[-1])
                said = await ask(pilot, app, "p/x $pc")
                await pilot.press("escape")
                assert said.endswith(f"0x{path.frames[-1].address:x}"), (action, said, path.frames[-1])
                assert path.selected_frame_index() == len(path.frames) - 1
            await pilot.press("q")
            await pilot.press("y")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)
        return app

    run_pilot(scenario(), timeout=500)
    assert source.engine.mi.proc.poll() is not None, "the TUI left its gdb behind"


HEARTBEAT = ROOT / "tests" / "targets" / "heartbeat.py"


@pytest.mark.gdb
def test_a_call_into_an_attached_process_is_said_once(tmp_path):
    import os
    import subprocess

    from tests.support import allowance, fifo_line, stop_process
    from tracer.tui.widgets.output import OutputLog

    # GIVEN a running Python attached to and interrupted
    fifo, stop_file = tmp_path / "ready.fifo", tmp_path / "stop"
    os.mkfifo(fifo)
    target = subprocess.Popen([sys.executable, str(HEARTBEAT), str(fifo), str(stop_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "HEARTBEAT_NO_TORCH": "1"})  # libz: the claim is the call's
    try:
        assert fifo_line(fifo, target).startswith("ready")
        config = TraceConfig(breakpoints=("zlibCompileFlags",), python=sys.executable, pid=target.pid,
                             session_dir=tmp_path, live=True, forward_output=False)
        source = LiveSource(config)

        async def scenario():
            app = make_app(source)
            async with app.run_test(size=(160, 48)) as pilot:
                await wait_until(pilot, lambda: len(app.state.hits) >= 1 and app.state.gdb == "ready",
                                 timeout=90, step=0.2)
                await pilot.press("i")
                await wait_until(pilot, lambda: "where interrupt stopped" in app.call_path.border_title
                                 and app.state.gdb == "ready", timeout=30)
                log = app.query_one(OutputLog)
                # WHEN a function of the target is called twice THEN it runs, and pttrace says once that a
                # call runs code in the attached process
                for _ in range(2):
                    said = await ask(pilot, app, "call (int)getpid()")
                    assert said.endswith(f"= {target.pid}"), said
                notes = [x.plain for x in log._lines if "runs code in the attached process" in x.plain]
                assert len(notes) == 1, notes
                await pilot.press("escape")
                await pilot.press("q")  # attached: detaches without asking
                await wait_until(pilot, lambda: not app.is_running, timeout=30)

        run_pilot(scenario(), timeout=200)
        assert target.poll() is None, "detaching must leave the target running"
    finally:
        stop_file.touch()
        try:
            target.wait(allowance(30))
        finally:
            stop_process(target)
