"""The TUI driving a real gdb: an attach to a running Python (interrupt, continue, quit detaches), and a
launched target's output. (hello-world.py in stop mode down to the CPU sigmoid kernel, then finish, step,
next and quit: tests/tui/test_steps_vs_gdb.py, in the run it compares with plain gdb's; ``held_gdb`` and
``gdb_frame`` are this file's for it.)"""
from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import sys

import pytest

from tests.conftest import ROOT
from tests.tui.support import attach_target, run_pilot, wait_until
from tracer.recorder import TraceConfig
from tracer.settings import Settings
from tracer.tui.app import make_app
from tracer.tui.screens import ConfirmQuit
from tracer.tui.sources import LiveSource
from tracer.tui.widgets.output import OutputLog


HEARTBEAT = ROOT / "tests" / "targets" / "heartbeat.py"


def gdb_frame(source) -> tuple[str, int] | tuple[None, None]:
    """gdb's own answer to `frame`: the innermost frame's file name and line."""
    text = "".join(source.engine.mi.console("frame").console)
    m = re.search(r" at ([^\s:]+):(\d+)", text)
    return (os.path.basename(m.group(1)), int(m.group(2))) if m else (None, None)


def held_gdb(tmp_path):
    """A gdb that starts only once the returned gate file exists (``--version`` answers at once): the
    phase "gdb is still starting" lasts as long as the test needs, however loaded the machine (a run at
    load 6 once had gdb ready before the test's first look)."""
    gate, wrapper = tmp_path / "gdb-may-start", tmp_path / "gdb"
    wrapper.write_text("#!/bin/sh\n"
                       f'[ "$2" = "--version" ] || while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.02; done\n'
                       f'exec {shlex.quote(shutil.which("gdb") or "gdb")} "$@"\n')
    wrapper.chmod(0o755)
    return dataclasses.replace(Settings.from_environment(), gdb=str(wrapper)), gate


@pytest.mark.gdb
def test_attach_interrupt_continue_then_quit_detaches(tmp_path):
    # GIVEN a running Python calling libz (no torch: the claims are the attach's), "ready" through a fifo
    with attach_target(tmp_path, HEARTBEAT, env={"HEARTBEAT_NO_TORCH": "1"}) as target:
        config = TraceConfig(breakpoints=["zlibCompileFlags"], python=sys.executable, pid=target.pid,
                             session_dir=tmp_path, live=True, forward_output=False)
        source = LiveSource(config)

        async def scenario():
            app = make_app(source)
            async with app.run_test(size=(160, 48)) as pilot:
                await wait_until(pilot, lambda: len(app.state.hits) >= 2, timeout=60, step=0.2)
                assert app.state.pid == target.pid and app.state.target == "running"
                # WHEN i is pressed THEN the target stops and the path shows where (in its sleep)
                await pilot.press("i")
                await wait_until(pilot, lambda: "where interrupt stopped" in app.call_path.border_title,
                                 timeout=30)
                assert "work" in [f.function for f in app.call_path.frames if f.kind == "python"]
                assert app.state.target == "stopped"
                # WHEN c is pressed THEN it runs and records again
                seen = len(app.state.hits)
                await pilot.press("c")
                await wait_until(pilot, lambda: len(app.state.hits) > seen, timeout=30)
                # WHEN n reaches the source while the target runs (the app made to believe it stopped)
                # THEN gdb's source refuses in one sentence, shown as an error; nothing else changes
                toasts: list[tuple[str, str]] = []
                notify = app.notify
                app.notify = lambda message, severity="information", **kw: toasts.append((str(message), severity))
                app.state.target = "stopped"
                app.refresh_bindings()
                await pilot.press("n")
                await wait_until(pilot, lambda: toasts, timeout=30)
                app.notify = notify
                assert toasts == [("cannot next: the target is running (interrupt it first).", "error")]
                await wait_until(pilot, lambda: app.state.gdb == "ready", timeout=30)
                assert source.engine.control.target_state == "running"
                # WHEN q is pressed THEN pttrace detaches without asking
                await pilot.press("q")
                assert not isinstance(app.screen, ConfirmQuit)
                await wait_until(pilot, lambda: not app.is_running, timeout=30)

        run_pilot(scenario(), timeout=120)
        assert source.status == "detached"
        assert target.poll() is None, "detaching must leave the target running"
        assert source.engine.mi.proc.poll() is not None, "the TUI left its gdb behind"


def _output_pane_of_a_run(tmp_path, script, last: str):
    """A live run of ``script`` under real gdb to its end (``last`` printed): the output pane's lines as
    text, its strips (their styles) and the source, once the app has quit. The script calls libz's
    zlibCompileFlags, not torch (the claims are the output pane's: importing torch took 2.5 s of CPU)."""
    config = TraceConfig(breakpoints=["zlibCompileFlags"], python=sys.executable, script=str(script),
                         session_dir=tmp_path, live=True, forward_output=False)
    source = LiveSource(config)
    seen: dict = {}

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(160, 48)) as pilot:
            log = app.query_one(OutputLog)

            def lines() -> list[str]:
                return [strip.text.rstrip() for strip in log.lines]

            await wait_until(pilot, lambda: app.state.target == "exited" and last in lines(), timeout=90,
                             step=0.2, why=lambda: f"target {app.state.target}, pane {lines()}")
            seen["lines"], seen["strips"] = lines(), list(log.lines)
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)

    run_pilot(scenario(), timeout=200)
    return seen["lines"], seen["strips"], source


@pytest.mark.gdb
def test_the_targets_stdout_and_stderr_both_reach_the_output_pane_its_stderr_in_red(tmp_path, monkeypatch):
    """The fake's stderr event (test_live_fake) as real gdb and a real target make it: each stream a
    terminal of its own (recorder/launch.py), both shown, the stderr line red."""
    monkeypatch.setenv("STREAMS_NO_TORCH", "1")  # the target inherits it through pttrace and gdb
    shown, strips, source = _output_pane_of_a_run(tmp_path, ROOT / "tests" / "targets" / "streams.py", "OUT2")
    assert "OUT1 tty=True" in shown and "ERR tty=True" in shown, shown
    red = [strip.text.rstrip() for strip in strips if any("red" in str(seg.style) for seg in strip)]
    assert red == ["ERR tty=True"], red
    assert source.finished and source.error is None and source.status == "completed"


CONTROLS = '''\
import ctypes, sys
print("\\x1b[31mred\\x1b[0m ok", flush=True)
print("a\\x1b]52;c;ZWNobw==\\x07b \\x9b2J \\u202eevil", flush=True)
print("\\x1b]0;pwned\\x07title", file=sys.stderr, flush=True)
ctypes.CDLL("libz.so.1").zlibCompileFlags()
print("DONE", flush=True)
'''



@pytest.mark.gdb
def test_a_real_targets_control_sequences_are_shown_not_obeyed(tmp_path):
    """The fake's control-sequence case (test_live_fake) through a real pty: colours kept, a clipboard
    write, a window title, a C1 CSI and a bidi override spelled out, on stdout and stderr alike."""
    script = tmp_path / "controls.py"
    script.write_text(CONTROLS)
    shown, strips, source = _output_pane_of_a_run(tmp_path, script, "DONE")
    assert "red ok" in shown, shown
    assert "a52;c;ZWNobw==b \\x9b2J \\u202eevil" in shown, shown
    assert "0;pwnedtitle" in shown, shown
    for strip in strips:
        assert not any(ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0 or ch == "\u202e" for ch in strip.text)
    assert source.finished and source.error is None
