"""The TUI driving a real gdb: hello-world.py in stop mode, to the CPU sigmoid kernel, then finish."""
from __future__ import annotations

import sys

import pytest

from tests.conftest import HELLO
from tests.tui.support import run_pilot, wait_until
from tracer.engine import TraceConfig
from tracer.tui.app import make_app
from tracer.tui.screens import ConfirmQuit
from tracer.tui.sources import LiveSource


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.gdb
def test_stop_at_the_kernel_then_finish_then_step_then_quit(tmp_path):
    config = TraceConfig(breakpoints=["wrapper_CPU_sigmoid"], python=sys.executable, script=str(HELLO),
                         session_dir=tmp_path, mode="stop", live=True, forward_output=False)
    source = LiveSource(config)

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(160, 48)) as pilot:
            # GIVEN a launched hello-world.py that stops at the first hit of the CPU sigmoid kernel
            await wait_until(pilot, lambda: app.state.target == "stopped" and app.call_path.hit is not None,
                             timeout=90, step=0.2)
            path = app.call_path
            assert path.hit.seq == 1 and path.frames[-1].short == "at::wrapper_CPU_sigmoid"
            assert app.state.pid and f"pid {app.state.pid}" in str(app.query_one("#status").render())
            depth = len(path.frames)
            names = [f.short for f in path.frames]
            assert "torch::autograd::THPVariable_sigmoid" in names and "at::_ops::sigmoid::call" in names

            # WHEN f is pressed THEN gdb finishes the kernel and the path shows its caller innermost
            await pilot.press("f")
            await wait_until(pilot, lambda: "where finish stopped" in path.border_title, timeout=30)
            assert len(path.frames) == depth - 1
            assert path.frames[-1].short == "wrap_kernel_functor_unboxed_<…wrapper_CPU_sigmoid…>::call"
            assert app.state.gdb == "ready" and app.state.target == "stopped"

            # WHEN s is pressed THEN gdb steps on (out of the adapter, which has no line table)
            await pilot.press("s")
            await wait_until(pilot, lambda: "where step stopped" in path.border_title, timeout=30)
            assert "at::_ops::sigmoid::redispatch" in [f.short for f in path.frames]
            assert len(path.frames) < depth - 1

            # WHEN q then y are pressed THEN the target is killed and the app ends
            await pilot.press("q")
            assert isinstance(app.screen, ConfirmQuit)
            await pilot.press("y")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)
        return app

    app = run_pilot(scenario(), timeout=150)
    assert source.finished and source.error is None
    assert source.status == "interrupted"
    assert len(app.state.hits) == 1
    session = source.load_session()
    assert [h.breakpoint for h in session.hits] == ["wrapper_CPU_sigmoid"]
    # Our own gdb and target are gone (other gdbs may run on the machine: ask about ours only).
    assert source.engine.mi.proc.poll() is not None, "the TUI left its gdb behind"
    assert not _alive(app.state.pid), "the TUI left the launched target behind"
