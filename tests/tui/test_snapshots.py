"""Screenshots of the TUI compared with approved SVGs (pytest-textual-snapshot; textual is pinned).

After a deliberate change of the look: ``pytest tests/tui/test_snapshots.py --snapshot-update``,
then look at the new SVGs before committing them.
"""
from __future__ import annotations

import pytest

pytest.importorskip("pytest_textual_snapshot")  # provides snap_compare; installed by the test extra

from tests.tui.support import fake_from, relocated, wait_until
from tracer.tui.app import make_app
from tracer.tui.sources import SessionSource
from tracer.tui.widgets.source import SourcePane

SIZE = (160, 48)


async def settled(pilot) -> None:
    """Everything has arrived and the source pane has its colours (and the sources it looks for)."""
    app = pilot.app
    await wait_until(pilot, lambda: app.state.finished or app.state.gdb == "ready")
    await wait_until(pilot, lambda: not app.query_one(SourcePane).colouring)
    await wait_until(pilot, lambda: not app.query_one(SourcePane).finding, timeout=30)
    await pilot.pause(0.1)


def viewer(fixture_session):
    return make_app(SessionSource(relocated(fixture_session)))


def test_view_opens_on_the_first_hit(snap_compare, fixture_session):
    """Breakpoints with counts and a never-resolved one; the first hit's folded path; its source line."""
    assert snap_compare(viewer(fixture_session), terminal_size=SIZE, run_before=settled)


def test_view_kernel_hit(snap_compare, fixture_session):
    """The sigmoid kernel hit: binding, dispatcher, autograd, kernel layers with their dispatch keys."""

    async def select(pilot):
        await settled(pilot)
        await pilot.press("down", "down")
        await wait_until(pilot, lambda: pilot.app.call_path.hit.seq == 3)
        await settled(pilot)

    assert snap_compare(viewer(fixture_session), terminal_size=SIZE, run_before=select)


def test_view_unfolded_with_full_names(snap_compare, fixture_session):
    """u unfolds interpreter and start-up frames; d shows full demangled names; the kernel selected."""

    async def unfold(pilot):
        await settled(pilot)
        await pilot.press("down", "down")
        await wait_until(pilot, lambda: pilot.app.call_path.hit.seq == 3)
        await pilot.press("u", "d", "3", "end")
        await settled(pilot)

    assert snap_compare(viewer(fixture_session), terminal_size=SIZE, run_before=unfold)


def test_live_add_breakpoint_dialog(snap_compare, fixture_session):
    """A live (fake) run: the status line, and the add-breakpoint dialog with completions."""
    source = fake_from(relocated(fixture_session))

    async def dialog(pilot):
        await settled(pilot)
        await pilot.press("b")
        pilot.app.screen.query_one("Input").cursor_blink = False  # a blinking cursor makes two pictures
        await pilot.press(*"sigm")
        await wait_until(pilot, lambda: pilot.app.screen.query_one("OptionList").option_count == 3)
        await pilot.pause(0.1)

    assert snap_compare(make_app(source), terminal_size=SIZE, run_before=dialog)
    source.request_stop()


def test_live_stopped_then_quit_asks(snap_compare, fixture_session):
    """A live (fake) run in stop mode, stopped at the kernel: the stepping keys are on in the footer,
    the status says stopped; q asks before it kills the launched target."""
    session = relocated(fixture_session)
    source = fake_from(session)
    sigmoid = next(h for h in session.hits if h.breakpoint == "wrapper_CPU_sigmoid")

    async def stopped(pilot):
        app = pilot.app
        await settled(pilot)
        await pilot.press("m")
        await wait_until(pilot, lambda: app.state.mode == "stop")
        source.push("hit", sigmoid)
        source.push("stopped", {"reason": "breakpoint-hit"})
        await wait_until(pilot, lambda: app.state.target == "stopped" and app.call_path.hit is not None)
        await settled(pilot)
        app.clear_notifications()  # the mode change's toast would stay or go with the machine's speed
        await pilot.press("q")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ConfirmQuit")
        await pilot.pause(0.1)

    assert snap_compare(make_app(source), terminal_size=SIZE, run_before=stopped)
    source.request_stop()
