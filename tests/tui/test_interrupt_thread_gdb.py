"""An interrupt stops every thread, and gdb reports the one the kernel handed its SIGINT to: when that one runs
no Python code (a torch intra-op worker, the main thread blocking SIGINT), the TUI shows the process's main
thread, with its Python frames, selects it for s, n, f and the prompt, and says which thread gdb stopped.
Real gdb, a real attached torch process with its intra-op pool busy."""
from __future__ import annotations

import sys

import pytest

from tests.tui.support import attach_target, run_pilot, wait_until
from tests.tui.test_prompt_gdb import ask
from tracer.recorder import TraceConfig
from tracer.tui.app import make_app
from tracer.tui.sources import LiveSource

pytestmark = pytest.mark.gdb

# The main thread blocks SIGINT once torch's intra-op pool has started (its threads keep SIGINT open), then
# multiplies matrices with the pool's help: the kernel hands a process's SIGINT to a pool thread.
BUSY_POOL = """\
import os, signal, sys, time
import torch
torch.set_num_threads(2)
fifo, stop_file = sys.argv[1], sys.argv[2]
a = torch.randn(256, 256)
torch.mm(a, a)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
with open(fifo, "w") as fh:
    fh.write(f"ready {os.getpid()}\\n")
n = 0
while not os.path.exists(stop_file):
    torch.mm(a, a)
    torch.tensor([n])
    n += 1
    if n % 50 == 0:
        time.sleep(0.01)
"""


def test_an_interrupt_that_stops_a_thread_without_python_shows_the_main_thread(tmp_path):
    (tmp_path / "busy.py").write_text(BUSY_POOL)
    seen: dict = {}
    with attach_target(tmp_path, tmp_path / "busy.py") as target:
        config = TraceConfig(breakpoints=["THPVariable_tensor"], python=sys.executable, pid=target.pid,
                             session_dir=tmp_path, live=True, forward_output=False)
        source = LiveSource(config)

        async def scenario():
            app = make_app(source)
            async with app.run_test(size=(200, 50)) as pilot:
                await wait_until(pilot, lambda: len(app.state.hits) >= 2, timeout=60, step=0.2)
                notes: list[str] = []
                notify = app.notify
                app.notify = lambda message, **kw: (notes.append(str(message)), notify(message, **kw))[1]
                # WHEN i is pressed
                await pilot.press("i")
                await wait_until(pilot, lambda: "where interrupt stopped" in app.call_path.border_title
                                 and app.state.gdb == "ready", timeout=30)
                hit = app.call_path.hit
                seen.update(stopped=(app.state.last_stop or {}).get("thread-id"), shown=hit.thread,
                            python=[f.function for f in app.call_path.frames if f.kind == "python"],
                            title=app.call_path.border_title, status=str(app.query_one("#status").render()),
                            notes=list(notes))
                # AND gdb's selected thread is the one shown: s, n, f and the prompt act on it
                seen["gdb_thread"] = await ask(pilot, app, "p $_thread")
                await pilot.press("escape")
                await pilot.press("c")
                await wait_until(pilot, lambda: app.state.target == "running", timeout=30)
                await pilot.press("q")
                await wait_until(pilot, lambda: not app.is_running, timeout=30)

        run_pilot(scenario(), timeout=180)
        # THEN gdb stopped a pool thread, and the TUI shows the main thread (its LWP the pid) with the script's frame
        shown = seen["shown"]
        assert seen["stopped"] != str(shown.id) and shown.lwp == target.pid, seen
        assert "<module>" in seen["python"], seen
        # AND it says which thread gdb stopped, and how to pick another
        assert f"gdb stopped thread {seen['stopped']}" in seen["title"], seen
        assert any(f"the interrupt stopped thread {seen['stopped']} " in n and "t lists every thread" in n
                   for n in seen["notes"]), seen["notes"]
        assert f"gdb thread {shown.id} (picked)" in seen["status"], seen["status"]
        assert seen["gdb_thread"].rstrip().endswith(f"= {shown.id}"), seen["gdb_thread"]
        assert source.status == "detached" and target.poll() is None, "detaching must leave the target running"
