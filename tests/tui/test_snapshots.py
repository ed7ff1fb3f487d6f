"""Screenshots of the TUI compared with approved SVGs (pytest-textual-snapshot; textual is pinned).

After a deliberate change of the look: ``pytest tests/tui/test_snapshots.py --snapshot-update``,
then look at the new SVGs before committing them.
"""
from __future__ import annotations

import pytest

pytest.importorskip("pytest_textual_snapshot")  # provides snap_compare; installed by the test extra

from textual.widgets import DataTable

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
    # A DataTable measures its new rows when it is idle: a modal pushed before that freezes the widths.
    await wait_until(pilot, lambda: not any(t._require_update_dimensions for t in app.query(DataTable)))
    for table in app.query(DataTable):
        # Textual 8.2 caches painted lines by an update count that measuring the new rows (on
        # idle) does not bump: a row painted before that keeps its old widths until the next change.
        table._clear_caches()
        table.refresh()
    await pilot.wait_for_scheduled_animations()  # the screen's messages handled and the app idle
    # The call path centres its cursor row after a refresh; on a busy machine a resize may come
    # between: centre it once more so that the picture does not depend on the order.
    path = app.call_path
    path.scroll_to_center_row(path.cursor_row)
    await pilot.wait_for_scheduled_animations()


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
        await pilot.wait_for_scheduled_animations()

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
        await pilot.wait_for_scheduled_animations()

    assert snap_compare(make_app(source), terminal_size=SIZE, run_before=stopped)
    source.request_stop()


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (250, 60)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_view_sizes(snap_compare, fixture_session, size):
    """From 80x24 to 250x60: at 80 columns the call path and source take the full width over a row
    of breakpoints, hits and output (top borders only); wider, the left column grows with its rows."""

    async def select(pilot):
        await settled(pilot)
        await pilot.press("down", "down")
        await wait_until(pilot, lambda: pilot.app.call_path.hit.seq == 3)
        await settled(pilot)

    assert snap_compare(viewer(fixture_session), terminal_size=size, run_before=select)


def test_live_stopped_at_80x24(snap_compare, fixture_session):
    """A live (fake) run stopped at the kernel on an 80x24 terminal: the footer keeps the control
    keys (quit, continue, step, next, finish, break, search, help) and the status keeps the session."""
    session = relocated(fixture_session)
    source = fake_from(session)
    sigmoid = next(h for h in session.hits if h.breakpoint == "wrapper_CPU_sigmoid")

    async def stopped(pilot):
        app = pilot.app
        await settled(pilot)
        await pilot.press("m")
        await wait_until(pilot, lambda: app.state.mode == "stop")
        source.push("hit", sigmoid)
        source.push("stopped", {"reason": "breakpoint-hit", "bkptno": "1",
                                "frame": {"func": "at::(anonymous namespace)::wrapper_CPU_sigmoid"}})
        await wait_until(pilot, lambda: app.state.target == "stopped" and app.call_path.hit is not None)
        await settled(pilot)
        app.clear_notifications()
        await wait_until(pilot, lambda: app.call_path.vertical_scrollbar.position == app.call_path.scroll_y)
        await pilot.wait_for_scheduled_animations()

    assert snap_compare(make_app(source), terminal_size=(80, 24), run_before=stopped)
    source.request_stop()
