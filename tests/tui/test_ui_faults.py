"""TUI faults a gdb user met (issue 27): the search keeps its text and filter whatever the selection and
finds what the panes display (file:line, layer names); hit counts are never cut; End goes to the last row;
y copies the selected frame; the prompt says why it is closed on a recorded session."""
from __future__ import annotations

import pytest

from tests.tui.support import FIXTURE, run_pilot, type_line, wait_until
from tracer.tui.app import make_app
from tracer.tui.sources import SessionSource
from tracer.tui.widgets.breakpoints import COUNT_WIDTH, count_text
from tracer.tui.widgets.search import SearchBar


async def opened(pilot) -> None:
    app = pilot.app
    await wait_until(pilot, lambda: app.state.finished and app.call_path.hit is not None, timeout=30)


async def type_text(pilot, text: str) -> None:
    """Each character a key event, in order, as a quick typist's come (support's ``type_line``)."""
    await type_line(pilot, text)


def test_a_search_that_hides_the_selected_hit_keeps_its_text_and_filter():
    async def scenario():
        app = make_app(SessionSource.open(FIXTURE))
        async with app.run_test(size=(160, 48)) as pilot:
            await opened(pilot)
            table = app.hits_table
            assert table.selected_hit.breakpoint == "THPVariable_tensor"  # the first hit
            # WHEN a search for the kernel (which the selected hit does not contain) is typed
            await pilot.press("slash")
            await type_text(pilot, "wrapper_CPU_sigmoid")
            bar = app.query_one(SearchBar)
            # THEN the bar stays with its text and the hits are filtered
            await wait_until(pilot, lambda: table.search.needle == "wrapper_cpu_sigmoid", timeout=5)
            assert bar.display and bar.value == "wrapper_CPU_sigmoid"
            assert len(table.matching) == 2 and "2 of 4" in table.border_title
            await pilot.press("enter")  # keeps the filter
            assert table.search.needle == "wrapper_cpu_sigmoid" and bar.value == "wrapper_CPU_sigmoid"

    run_pilot(scenario(), timeout=60)


@pytest.mark.parametrize("query, hits", [
    ("hello-world.py:10", 1),  # a Python frame as the rows write it
    ("activation.py:361", 1),
    ("kernel", 2),  # a layer's name
    ("dispatcher", 2),  # the two tensor() hits have no dispatcher frame
])
def test_a_search_finds_what_the_panes_display(query, hits):
    async def scenario():
        app = make_app(SessionSource.open(FIXTURE))
        async with app.run_test(size=(160, 48)) as pilot:
            await opened(pilot)
            await pilot.press("slash")
            await type_text(pilot, query)
            await wait_until(pilot, lambda: app.hits_table.search.needle == query.lower(), timeout=5)
            assert len(app.hits_table.matching) == hits

    run_pilot(scenario(), timeout=60)


def test_counts_are_abbreviated_never_cut():
    cases = {0: "0", 9_999: "9,999", 12_901: "12.9k", 13_582: "13.6k", 999_949: "999.9k", 999_950: "1.0M",
             2_345_678: "2.3M", 5_000_000_000: "5.0G"}
    for n, text in cases.items():
        assert count_text(n) == text and len(text) <= COUNT_WIDTH


def test_end_goes_to_the_last_row_and_y_copies_the_selected_frame():
    async def scenario():
        app = make_app(SessionSource.open(FIXTURE))
        async with app.run_test(size=(160, 48)) as pilot:
            await opened(pilot)
            table = app.hits_table
            table.focus()
            await pilot.press("end")
            assert table.cursor_row == table.row_count - 1
            await wait_until(pilot, lambda: app.call_path.hit.breakpoint == "wrapper_CPU_sigmoid_backward")
            path = app.call_path
            frame = path.frames[path.selected_frame_index()]
            await pilot.press("y")
            assert app.clipboard.startswith(frame.function or frame.short)
            if frame.file:
                assert f"{frame.line}" in app.clipboard

    run_pilot(scenario(), timeout=60)


def test_the_prompt_of_a_recorded_session_says_why_it_is_closed():
    async def scenario():
        app = make_app(SessionSource.open(FIXTURE))
        async with app.run_test(size=(160, 48)) as pilot:
            await opened(pilot)
            await pilot.press("colon")
            await wait_until(pilot, lambda: any("no gdb to ask" in str(n.message) for n in app._notifications))
            assert not app.query_one("#prompt").display

    run_pilot(scenario(), timeout=60)
