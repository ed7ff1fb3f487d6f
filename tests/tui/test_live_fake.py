"""Pilot tests on a fake live source: hits streaming in, stop mode, stepping, breakpoints, quitting.

The fake stands where the engine would; it records every control call and answers at once, so
these tests check the app's side of the contract: gdb work in workers, results as messages,
errors as toasts, and a UI that keeps answering while hits pour in.
"""
from __future__ import annotations

import asyncio
import threading
import time

from textual.coordinate import Coordinate
from textual.widgets import Button, Input, Label, OptionList

from tests.tui.support import allowance, numbered_hits, run_pilot, wait_until
from tracer.errors import TargetError
from tracer.tui.app import MAX_BATCHES_PER_SECOND, make_app
from tracer.tui.screens import AddBreakpoint, ConfirmQuit, WarningsScreen
from tracer.tui.widgets.breakpoints import BreakpointsTable
from tracer.tui.widgets.callpath import CallPathTable
from tracer.tui.widgets.hits import HitsTable
from tracer.tui.sources import NotStopped, breakpoint_from_mi
from tracer.tui.widgets.output import OutputLog
from tracer.tui.widgets.warnings import WarningsLine

SIZE = (160, 48)


def shown(log: OutputLog) -> list[str]:
    """The output pane's lines as they are on screen, wrapped to its width."""
    return [strip.text.rstrip() for strip in log.lines]


async def ready(pilot) -> None:
    app = pilot.app
    await wait_until(pilot, lambda: app.state.gdb == "ready" and app.state.target == "running")


async def stopped_at(pilot, fake_source, hit, handled: list[int]) -> None:
    """Stop mode, stopped at ``hit`` (seq 1) and shown; every hit the app takes a selection of (shown, or kept
    off the call path) is appended to ``handled``."""
    from tracer.tui.messages import HitSelected

    app = pilot.app
    app.message_signal.subscribe(app, lambda m: handled.append(m.hit.seq) if isinstance(m, HitSelected)
                                 else None, immediate=True)
    await ready(pilot)
    await pilot.press("m")
    await wait_until(pilot, lambda: app.state.mode == "stop")
    fake_source.push("hit", hit)
    fake_source.push("stopped", {"reason": "breakpoint-hit"})
    await wait_until(pilot, lambda: app.state.target == "stopped" and app.call_path.hit.seq == 1, timeout=20)


def test_500_hits_a_second_keep_the_ui_responsive(fake_source, fixture_session, monkeypatch):
    """WHILE hits pour in at 500 a second, a key is answered: not queued behind the hits' processing.

    Told by the stream's own progress, not by seconds, so that a slow machine cannot fail it: the feeder pours
    on until the key has been answered (then up to 500 hits in all), and a UI that answers a key only once it
    has taken in every hit that comes cannot answer it while the stream runs, on any machine."""
    template = next(h for h in fixture_session.hits if h.breakpoint == "wrapper_CPU_sigmoid")
    most_ahead = 1000
    batches: list[int] = []  # at each add_hits, how many hits the table holds (it is handed every hit so far)
    painted: list[float] = []  # and when
    sent = [0]  # the hits the feeder has pushed
    give_up = [float("inf")]
    answered, stream_over = threading.Event(), threading.Event()
    at_answer: dict = {}
    add_hits, toggle_full_names = HitsTable.add_hits, CallPathTable.toggle_full_names

    def counting(self, new):
        batches.append(len(new))
        painted.append(time.monotonic())
        return add_hits(self, new)

    def answering(self):
        at_answer.update(batches=len(batches), painted=batches[-1] if batches else 0, sent=sent[0],
                         pouring=not stream_over.is_set())
        answered.set()
        return toggle_full_names(self)

    def pump():
        # Bursts of 5, 500 hits a second, as the recorder's tail thread delivers them, on until the key is answered
        # and 500 are sent; never more than ``most_ahead`` hits ahead of the table, so that the backlog a UI that cannot
        # keep up builds (and the time it takes to fail) stays bounded. A while after the key was pressed
        # (load-scaled) the stream ends anyway: a UI that waits for its end answers the key after it, and fails.
        due = time.monotonic()
        while not (answered.is_set() and sent[0] >= 500) and time.monotonic() < give_up[0]:
            if sent[0] - (batches[-1] if batches else 0) >= most_ahead:
                time.sleep(0.01)
                due = time.monotonic()
                continue
            for hit in numbered_hits(template, sent[0] + 1, 5):
                fake_source.push("hit", hit)
            sent[0] += 5
            due += 0.01
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        stream_over.set()

    monkeypatch.setattr(HitsTable, "add_hits", counting)
    monkeypatch.setattr(CallPathTable, "toggle_full_names", answering)

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            feeder = threading.Thread(target=pump)
            feeder.start()
            try:
                await wait_until(pilot, lambda: batches)  # the hits have started to reach the table
                # WHILE hits pour in, a key is pressed (sent as the terminal sends it: the pilot's press would wait
                # for the screen to settle, which it does not while hits come)
                pressed = len(batches)
                give_up[0] = time.monotonic() + allowance(10)
                app.simulate_key("d")
                while not (answered.is_set() or stream_over.is_set()):  # (not the pilot's pause: it waits for
                    await asyncio.sleep(0.02)                           # the screen to settle)
                # THEN it is answered while the stream still runs
                assert at_answer.get("pouring"), (f"the key was not answered while hits came: {at_answer or 'never'}; "
                                                  f"{pressed} batches before the key, {len(batches)} in all")
                assert app.call_path.full_names
                await wait_until(pilot, lambda: stream_over.is_set(), timeout=15,  # and it goes on to its end
                                 why=lambda: f"{sent[0]} hits sent")
            finally:
                give_up[0] = 0.0  # a failed test ends the stream at once
                feeder.join()
            total = sent[0]
            await wait_until(pilot, lambda: len(app.hits_table.hits) == total, timeout=10)
            # THEN the table got the hits in batches (each time handed the app's table of every hit so far), at
            # most MAX_BATCHES_PER_SECOND a second while they came: a few table updates, not one a hit
            assert batches[-1] == total and batches == sorted(set(batches))
            span = painted[-1] - painted[0]
            assert len(batches) <= 2 + MAX_BATCHES_PER_SECOND * span, (span, batches)
            # and followed the newest hit while the cursor sat on it
            await wait_until(pilot, lambda: app.call_path.hit.seq == total)
            assert app.hits_table.position == total - 1  # the window of rows starts past the first hits
            assert app.state.hits_of("wrapper_CPU_sigmoid") == total
            assert f"hits {total:,}" in str(app.query_one("#status").render())
            # WHEN the cursor moves up THEN the hit above is shown, and the table was not filled again for it
            # (a window of rows: a key costs the same after 500 hits as after 5)
            done = len(batches)
            await pilot.press("up")
            await wait_until(pilot, lambda: app.call_path.hit.seq == total - 1)
            assert len(batches) == done and app.hits_table.row_count <= HitsTable.WINDOW
            fake_source.push("finished", "completed")
            await wait_until(pilot, lambda: app.state.finished)
            await pilot.press("q")
        assert app.return_code == 0

    run_pilot(scenario())


def test_stop_mode_stops_at_a_hit_then_finish_shows_the_new_path(fake_source, fixture_session):
    sigmoid = next(h for h in fixture_session.hits if h.breakpoint == "wrapper_CPU_sigmoid")

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            # WHILE running, stepping keys are greyed out and do nothing
            assert app.check_action("control", ("step",)) is None
            await pilot.press("s")
            assert ("step",) not in fake_source.calls
            # WHEN m is pressed THEN the source is switched to stop mode
            await pilot.press("m")
            await wait_until(pilot, lambda: app.state.mode == "stop")
            assert ("mode", "stop") in fake_source.calls
            assert "mode stop" in str(app.query_one("#status").render())
            # GIVEN two earlier hits, the first one selected (so new hits are not followed)
            for hit in numbered_hits(sigmoid, 1, 2):
                fake_source.push("hit", hit)
            await wait_until(pilot, lambda: len(app.hits_table.hits) == 2)
            app.hits_table.move_cursor(row=0)
            await wait_until(pilot, lambda: app.call_path.hit.seq == 1)
            # WHEN the target stops at a breakpoint THEN its hit is selected, whether the hit is
            # read from the session file before or after gdb reports the stop
            fake_source.push("hit", numbered_hits(sigmoid, 3, 1)[0])
            fake_source.push("stopped", {"reason": "breakpoint-hit"})
            await wait_until(pilot, lambda: app.state.target == "stopped" and app.call_path.hit.seq == 3)
            assert app.call_path.frames[-1].short == "at::wrapper_CPU_sigmoid"
            assert app.check_action("control", ("finish",)) is True
            # WHEN f is pressed THEN finish runs in a worker and the path shows where it stopped
            await pilot.press("f")
            await wait_until(pilot, lambda: "where finish stopped" in app.call_path.border_title)
            assert ("finish",) in fake_source.calls
            frames = app.call_path.frames
            assert len(frames) == 67 and frames[-1].short.startswith("wrap_kernel_functor_unboxed_")
            assert app.state.gdb == "ready"
            # WHEN c is pressed THEN the target runs on, and the call path's title begins by saying that the
            # stop it shows is over (a narrow pane cuts a title's end)
            await pilot.press("c")
            await wait_until(pilot, lambda: app.state.target == "running")
            assert ("resume",) in fake_source.calls
            fake_source.push("state", "running")
            await wait_until(pilot, lambda: app.call_path.border_title.startswith(
                "call path · over: the target runs on (was where finish stopped"))
            fake_source.push("finished", "completed")
            await wait_until(pilot, lambda: app.state.finished)
            assert app.call_path.border_title.startswith("call path · over: the target runs on (was where finish")
            await pilot.press("q")

    run_pilot(scenario())


def test_c_after_a_step_shows_the_next_hit_even_read_before_the_news_that_the_target_runs(fake_source,
                                                                                        fixture_session):
    """The recorder reads a hit from the session file on one thread and gdb's news on another: after c, the
    next stop's hit can reach the app before the news that the target runs. The step's stop shown then must
    not stay on screen for ever (a loaded run of test_live_processes.py showed it for 41 s after c)."""
    sigmoid = next(h for h in fixture_session.hits if h.breakpoint == "wrapper_CPU_sigmoid")
    first, second = numbered_hits(sigmoid, 1, 2)
    fake_source.resume = lambda: fake_source.calls.append(("resume",))  # gdb's news: pushed below, late
    handled: list[int] = []  # the hits the app has taken a selection of (shown, or kept off the call path)

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await stopped_at(pilot, fake_source, first, handled)
            await pilot.press("f")
            await wait_until(pilot, lambda: "where finish stopped" in app.call_path.border_title
                             and app.state.gdb == "ready")
            # WHEN c is pressed and the next stop's hit comes before gdb says that the target runs
            await pilot.press("c")
            await wait_until(pilot, lambda: ("resume",) in fake_source.calls and app.state.gdb == "ready")
            fake_source.push("hit", second)
            await wait_until(pilot, lambda: 2 in handled)
            # THEN the hits pane follows it, and the call path still shows the finish's stop: as far as the
            # app knows the target stands there (hits recorded just before a stop must not replace it)
            assert app.hits_table.selected_hit.seq == 2
            assert app.call_path.hit.seq == 0 and "where finish stopped" in app.call_path.border_title
            # AND once the news comes that the target ran on and stopped at that hit, the call path shows it,
            # frame #0 selected as gdb selects it
            fake_source.push("state", "running")
            fake_source.push("stopped", {"reason": "breakpoint-hit"})
            path = app.call_path
            await wait_until(pilot, lambda: app.state.target == "stopped" and path.hit.seq == 2
                             and path.selected_frame_index() == len(path.frames) - 1,
                             why=lambda: (path.border_title, path.selected_frame_index(), len(path.frames)))
            assert path.border_title.startswith("call path · hit #2 · wrapper_CPU_sigmoid"), path.border_title
            await pilot.press("q")

    run_pilot(scenario())


def test_a_steps_own_news_taken_in_after_its_stop_does_not_end_that_stop(fake_source, fixture_session,
                                                                         monkeypatch):
    """gdb's news of a step (the target runs, then stops) is sent before the step's answer, but the app takes
    its inbox in at most a few times a second: the answer may come first. Its running must not then say
    that the stop the answer shows is over, nor let a hit recorded before it replace it (seen at load 9)."""
    import tracer.tui.app as app_module
    from tracer.tui.sources import SourceEvent

    sigmoid = next(h for h in fixture_session.hits if h.breakpoint == "wrapper_CPU_sigmoid")
    first, before_the_stop = numbered_hits(sigmoid, 1, 2)

    def finish(action: str):
        fake_source.calls.append((action,))
        fake_source._emit(SourceEvent("state", "running"))  # into the inbox before the answer, as gdb's are
        fake_source._emit(SourceEvent("stopped", {"reason": "function-finished"}))
        return fake_source.stop_hit

    fake_source.step = finish
    handled: list[int] = []

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await stopped_at(pilot, fake_source, first, handled)
            # From the stop on, the inbox is taken in every 2 s (its last drain brought the stop): f's news waits
            # there while its answer comes. (Slowed from the start, as before, ~15 s of the test were waits for
            # drains: the hit and the stop, then f's news, then the late hit.)
            monkeypatch.setattr(app_module, "MAX_BATCHES_PER_SECOND", 0.5)
            # WHEN f is pressed and its answer comes while its news waits in the inbox
            await pilot.press("f")
            path = app.call_path
            await wait_until(pilot, lambda: "where finish stopped" in path.border_title and app.state.gdb == "ready"
                             and not app.inbox._events, timeout=20, why=lambda: (path.border_title, app.state.gdb))
            # THEN the call path says where finish stopped, not that the stop is over
            assert path.border_title.startswith("call path · where finish stopped"), path.border_title
            assert app.state.target == "stopped" and path.hit.seq == 0
            # AND a hit recorded before the stop does not replace it
            fake_source.push("hit", before_the_stop)
            await wait_until(pilot, lambda: 2 in handled, timeout=20)
            assert path.hit.seq == 0 and path.border_title.startswith("call path · where finish stopped")
            await pilot.press("q")

    run_pilot(scenario(), timeout=60)


def test_the_mode_can_be_chosen_while_gdb_starts(fake_source):
    """A breakpoint hit during ``import torch`` comes before a key pressed once the target runs."""
    gdb_up, starting = threading.Event(), threading.Event()
    run = fake_source.run

    def slow_start(emit):
        starting.set()
        gdb_up.wait(allowance(10))
        run(emit)

    fake_source.run = slow_start

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, starting.is_set)  # the app has asked for gdb: it is starting
            assert app.state.gdb == "starting" and app.check_action("toggle_mode", ()) is True
            assert app.check_action("control", ("step",)) is None  # the others wait for gdb
            await pilot.press("m")
            await wait_until(pilot, lambda: app.state.mode == "stop")
            assert ("mode", "stop") in fake_source.calls
            assert app.state.gdb == "starting"  # not "ready" before gdb is
            gdb_up.set()
            await ready(pilot)
            assert "mode stop" in str(app.query_one("#status").render())
            fake_source.push("finished", "completed")
            await wait_until(pilot, lambda: app.state.finished)
            await pilot.press("q")

    run_pilot(scenario())


def test_a_slow_gdb_command_does_not_hold_the_keys(fake_source):
    """gdb may take seconds to finish a function: meanwhile the screen still answers."""
    release = threading.Event()
    step = fake_source.step

    def slow_finish(action):
        release.wait(allowance(60))  # (a deadline only: the test releases it)
        return step(action)

    fake_source.step = slow_finish

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            fake_source.push("stopped", {"reason": "breakpoint-hit"})
            await wait_until(pilot, lambda: app.state.target == "stopped")
            await pilot.press("f")
            await wait_until(pilot, lambda: app.state.gdb == "busy: finish")
            assert "gdb busy: finish" in str(app.query_one("#status").render())
            # WHEN a key is pressed while gdb is held in finish THEN it is answered before gdb is released
            await pilot.press("d")
            assert app.call_path.full_names and not release.is_set() and app.state.gdb == "busy: finish"
            assert app.check_action("control", ("step",)) is None  # one gdb command at a time
            release.set()
            await wait_until(pilot, lambda: app.state.gdb == "ready" and ("finish",) in fake_source.calls)
            fake_source.push("finished", "completed")
            await wait_until(pilot, lambda: app.state.finished)
            await pilot.press("q")

    run_pilot(scenario())


def test_interrupt_stops_a_running_target_and_shows_where(fake_source):
    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await pilot.press("i")
            await wait_until(pilot, lambda: "where interrupt stopped" in app.call_path.border_title)
            assert ("interrupt",) in fake_source.calls and app.state.target == "stopped"
            fake_source.push("finished", "completed")
            await wait_until(pilot, lambda: app.state.finished)
            await pilot.press("q")

    run_pilot(scenario())


def test_a_failing_control_command_is_a_toast_not_a_crash(fake_source):
    """The UI's part only: what the source refuses with is shown as the source says it (the real
    source's words for a running target: test_live_gdb's attach test)."""
    toasts: list[tuple[str, str]] = []

    def refuse(action):
        fake_source.calls.append((action,))
        raise NotStopped(f"fake source: no {action} now.")

    fake_source.step = refuse

    async def scenario():
        app = make_app(fake_source)
        app.notify = lambda message, severity="information", **kw: toasts.append((str(message), severity))
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            app.state.target = "stopped"  # the app believes it stopped; the source knows better
            app.refresh_bindings()
            await pilot.press("n")
            await wait_until(pilot, lambda: any(sev == "error" for _, sev in toasts))
            assert toasts == [("fake source: no next now.", "error")] and ("next",) in fake_source.calls
            assert app.state.gdb == "ready"
            fake_source.push("finished", "completed")
            await wait_until(pilot, lambda: app.state.finished)
            await pilot.press("q")

    run_pilot(scenario())


def test_add_a_breakpoint_with_completion_then_remove_it(fake_source):
    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await pilot.press("b")
            assert isinstance(app.screen, AddBreakpoint)
            await pilot.press(*"sigm")
            options = app.screen.query_one(OptionList)
            await wait_until(pilot, lambda: options.option_count == 3, timeout=3)
            assert ("complete", "sigm") in fake_source.calls
            assert options.highlighted is None  # nothing is taken before the user chooses
            await pilot.press("down", "down", "tab")  # the second name: at::_ops::sigmoid::call
            assert app.screen.query_one(Input).value == "at::_ops::sigmoid::call"
            await pilot.press("enter")
            await wait_until(pilot, lambda: "at::_ops::sigmoid::call" in app.state.breakpoints)
            assert ("add", "at::_ops::sigmoid::call") in fake_source.calls
            table = app.query_one(BreakpointsTable)
            assert table.row_count == 2
            # the new breakpoint's row is brought under the cursor, so that it is in view
            await wait_until(pilot, lambda: table.selected_spec == "at::_ops::sigmoid::call")
            # WHEN the new breakpoint is selected and delete pressed THEN it is removed
            table.focus()
            table.move_cursor(row=1)
            await pilot.press("delete")
            await wait_until(pilot, lambda: "at::_ops::sigmoid::call" not in app.state.breakpoints)
            assert ("delete", "at::_ops::sigmoid::call") in fake_source.calls
            assert table.row_count == 1
            assert table.check_action("remove_breakpoint", ()) is True
            # Escape leaves the dialog without adding anything
            await pilot.press("b", "x", "escape")
            assert not isinstance(app.screen, AddBreakpoint)
            assert ("add", "x") not in fake_source.calls
            fake_source.push("finished", "completed")
            await wait_until(pilot, lambda: app.state.finished)
            # once the run has ended there is nothing to remove: the key leaves the footer
            assert table.check_action("remove_breakpoint", ()) is False
            await pilot.press("q")

    run_pilot(scenario())


def test_the_targets_control_sequences_are_shown_not_obeyed(fake_source):
    """The target's output keeps its colours; a window title, a clipboard write, a C1 CSI or a bidi
    override in it (or in a breakpoint name gdb reports) is spelled out, never sent to the terminal."""
    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            fake_source.push("output", "\x1b[31mred\x1b[0m ok\n")
            fake_source.push("output", "a\x1b]52;c;ZWNobw==\x07b \x9b2J \u202eevil\n")
            log = app.query_one(OutputLog)
            await wait_until(pilot, lambda: len(shown(log)) == 2, timeout=3)
            assert shown(log)[0] == "red ok" and log.lines[0].cell_length >= 6
            assert shown(log)[1] == "a52;c;ZWNobw==b \\x9b2J \\u202eevil"  # ESC ] and BEL dropped
            for strip in log.lines:
                assert not any(ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0 or ch == "\u202e" for ch in strip.text)
            await pilot.press("q")

    run_pilot(scenario())
    bp = breakpoint_from_mi({"bkpt": {"number": "2", "addr": "0x10", "original-location": "f\x1b]0;t\x07",
                                      "func": "g\x9b1m", "fullname": "/x\n.cpp", "line": "3"}})
    assert bp.spec == "f\\x1b]0;t\\x07" and bp.locations[0].function == "g\\x9b1m"
    assert bp.locations[0].file == "/x\\n.cpp"


def test_the_targets_stderr_is_shown_in_red_apart_from_its_stdout(fake_source):
    """Its stderr (a terminal of its own: recorder/launch.py) is in the pane too, red where the target
    sets no colour, and a stdout line cut by a stderr one stays whole."""
    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            fake_source.push("output", "half of a ")
            fake_source.push("output", ("stderr", "Traceback (most recent call last):\n"))
            fake_source.push("output", "line\n")
            log = app.query_one(OutputLog)
            await wait_until(pilot, lambda: len(shown(log)) == 2, timeout=3, why=lambda: f"shown: {shown(log)}")
            assert shown(log) == ["Traceback (most recent call last):", "half of a line"]
            styles = [str(seg.style) for seg in log.lines[0]]
            assert any("red" in st for st in styles), styles
            assert not any("red" in str(seg.style) for seg in log.lines[1])
            await pilot.press("q")

    run_pilot(scenario())


def test_output_in_its_pane_and_warnings_on_their_own_line(fake_source):
    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            line = app.query_one(WarningsLine)
            assert not line.display  # no warning yet: no line for them
            fake_source.push("output", "tensor([0.2252], grad_fn=<Sigm")
            fake_source.push("output", "oidBackward0>)\nno newline yet")
            long = "libtorch_cpu.so has no DWARF line information " + "and a long reason " * 20
            fake_source.push("warning", long)
            log = app.query_one(OutputLog)
            # A partial line waits a moment for its end, then is shown as it is.
            await wait_until(pilot, lambda: "no newline yet" in shown(log), timeout=3)
            # The warning is on the warnings line, not among the target's lines (a long one pushed them out).
            await wait_until(pilot, lambda: line.display and "libtorch_cpu.so has no DWARF" in str(line.render()))
            assert shown(log) == ["tensor([0.2252], grad_fn=<SigmoidBackward0>)", "no newline yet"]
            assert "1 warning (w lists them)" in str(line.render())
            fake_source.push("warning", "a second one")
            await wait_until(pilot, lambda: "2 warnings (w lists them)  a second one" in str(line.render()))
            # WHEN w is pressed THEN every warning is listed whole; w closes the list
            await pilot.press("w")
            await wait_until(pilot, lambda: isinstance(app.screen, WarningsScreen))
            listed = str(app.screen.query_one("#warnings-list").render())
            assert " ".join(long.split()) in " ".join(listed.split()) and "a second one" in listed
            await pilot.press("w")
            await wait_until(pilot, lambda: not isinstance(app.screen, WarningsScreen))
            assert log.virtual_size.width <= log.scrollable_content_region.width  # no sideways scrolling
            # WHEN the terminal narrows THEN the lines are wrapped again at the new width, whole
            long = "heartbeat " + " ".join(f"word{i}" for i in range(30))
            fake_source.push("output", long + "\n")
            await wait_until(pilot, lambda: "word29" in " ".join(shown(log)), timeout=3)
            await pilot.resize_terminal(80, 24)
            await wait_until(pilot, lambda: app.has_class("-narrow"))
            # (both once the new layout has settled: at load 19 the pane was seen 18 columns wide with its lines
            # still 38, between the two)
            rest = long.split("heartbeat ", 1)[1]
            await wait_until(pilot, lambda: " ".join(shown(log)).split("heartbeat ", 1)[-1] == rest
                             and log.virtual_size.width <= log.scrollable_content_region.width,
                             why=lambda: f"shown: {shown(log)}, {log.virtual_size} in {log.scrollable_content_region}")
            fake_source.push("finished", "completed")
            await wait_until(pilot, lambda: app.state.finished)
            await pilot.press("q")

    run_pilot(scenario())


def test_quit_asks_before_killing_a_launched_target(fake_source):
    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await pilot.press("q")
            assert isinstance(app.screen, ConfirmQuit)
            assert "kill the target (pid 4242)" in str(app.screen.question)
            # the keys are on the buttons as written (a str label would be markup, "[y]" a tag)
            assert [str(b.label) for b in app.screen.query(Button)] == ["Quit [y]", "Stay [n]"]
            assert str(app.screen.query_one("#question", Label).content) == app.screen.question
            await pilot.press("n")
            assert not isinstance(app.screen, ConfirmQuit) and app.is_running
            await pilot.press("ctrl+q")  # Textual's own quit key asks too
            assert isinstance(app.screen, ConfirmQuit)
            await pilot.press("escape")
            assert ("stop", "quit") not in fake_source.calls
            await pilot.press("q", "y")
            await wait_until(pilot, lambda: not app.is_running, timeout=5)
        assert ("stop", "quit") in fake_source.calls
        assert app.return_code == 0

    run_pilot(scenario())


def test_quit_detaches_from_an_attached_target_without_asking(fake_source):
    fake_source.attached = True

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            # the target's output is not ours to show: the pane says so
            note = " ".join(shown(app.query_one(OutputLog)))
            assert note.startswith("pttrace: attached to a running process: its output goes where"), note
            await pilot.press("q")
            assert not isinstance(app.screen, ConfirmQuit)
            await wait_until(pilot, lambda: not app.is_running, timeout=5)
        assert ("stop", "quit") in fake_source.calls

    run_pilot(scenario())


def test_a_source_that_cannot_start_ends_the_app_with_its_error(fake_source):
    def failing_run(emit):
        emit(type("E", (), {"kind": "failed", "data": TargetError("gdb could not attach to process 1")})())

    fake_source.run = failing_run

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: not app.is_running, timeout=5)
        assert app.return_code == 2
        assert app.state.error == "gdb could not attach to process 1"

    run_pilot(scenario())


def test_enter_takes_the_highlighted_name_and_unknown_names_are_refused(fake_source):
    """Fault 3: enter adds the name chosen with the arrows, not the text typed. Fault 4: a name
    nothing loaded defines is refused at once with the closest names; ctrl+o adds it as pending."""

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            await pilot.press("b", *"sigm")
            options = app.screen.query_one(OptionList)
            await wait_until(pilot, lambda: options.option_count == 3, timeout=3)
            await pilot.press("down", "down", "enter")
            await wait_until(pilot, lambda: "at::_ops::sigmoid::call" in app.state.breakpoints)
            assert ("add", "sigm") not in fake_source.calls

            await pilot.press("b", *"nonexistent_fn_xyz", "enter")
            screen = app.screen
            assert isinstance(screen, AddBreakpoint)
            hint = screen.query_one("#hint")
            await wait_until(pilot, lambda: "no library loaded" in str(hint.render()), timeout=3)
            assert "ctrl+o adds it anyway" in str(hint.render())
            assert [str(screen.query_one(OptionList).get_option_at_index(i).prompt)
                    for i in range(screen.query_one(OptionList).option_count)] == ["at::_ops::sigmoid::call"]
            assert not any(c[0] == "add" and "nonexistent" in c[1] for c in fake_source.calls)
            await pilot.press("ctrl+o")
            await wait_until(pilot, lambda: "nonexistent_fn_xyz" in app.state.breakpoints)
            await pilot.press("q", "y")

    run_pilot(scenario())


def test_the_footer_shows_the_focused_panes_keys(fake_source):
    """In the breakpoints pane the footer offers x (remove) and space (on/off), at 80 columns too."""

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=(80, 24)) as pilot:
            await ready(pilot)
            bar = app.query_one("#keys")
            assert "x remove" not in str(bar.render())
            await pilot.press("1")
            await wait_until(pilot, lambda: "x remove" in str(bar.render()))
            assert "space on/off" in str(bar.render()) and "q quit" in str(bar.render())
            await pilot.press("q", "y")

    run_pilot(scenario())


def test_hits_of_several_processes_are_grouped_as_they_come(fake_source, fixture_session):
    from tracer.session.model import Hit, Thread
    from tracer.tui.process_rows import Heading

    template = next(h for h in fixture_session.hits if h.breakpoint == "wrapper_CPU_sigmoid")
    threads = {10: Thread(1, "python3", lwp=10, pid=10), 11: Thread(1, "python3", lwp=11, pid=11)}

    def hit(seq: int, pid: int) -> Hit:
        return Hit(seq=seq, breakpoint=template.breakpoint, thread=threads[pid], time=float(seq),
                   frames=template.frames)

    def rows(table) -> list:
        return [("H", x.pid) if isinstance(x, Heading) else table.hits[x].seq for x in table.shown]

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            table = app.hits_table
            fake_source.push("process", {"pid": 10, "argv": ["python", "main.py"], "started": "2026-01-01T10:00:00"})
            fake_source.push("hit", hit(1, 10))
            await wait_until(pilot, lambda: len(table.shown) == 1)
            assert table.grouped is None  # one process: no headings
            # WHEN a forked worker's record and hits come, between the parent's
            fake_source.push("process", {"pid": 11, "ppid": 10, "argv": ["python", "main.py"],
                                         "role": "DataLoader worker 0", "started": "2026-01-01T10:00:01"})
            for seq, pid in ((2, 11), (3, 10), (4, 11)):
                fake_source.push("hit", hit(seq, pid))
            await wait_until(pilot, lambda: len(table.hits) == 4 and table.grouped is not None)
            # THEN each process's hits are under its heading, and the cursor follows the newest hit (the
            # call path shows it once it has been drawn)
            assert rows(table) == [("H", 10), 1, 3, ("H", 11), 2, 4]
            await wait_until(pilot, lambda: table.selected_hit.seq == 4 and app.call_path.hit.seq == 4,
                             why=lambda: f"selected {table.selected_hit.seq}, call path {app.call_path.hit.seq}")
            heading = [str(table.get_cell_at(Coordinate(3, c))) for c in range(3)]
            assert heading[1] == "pid 11 (DataLoader worker 0)" and heading[2] == "2 hits · running", heading
            # WHEN the worker ends and the parent hits again THEN its heading says how it ended, its count grows
            fake_source.push("process", {"pid": 11, "ended": "2026-01-01T10:00:02", "exit_code": 0, "state": "exited"})
            fake_source.push("hit", hit(5, 10))
            await wait_until(pilot, lambda: len(table.hits) == 5)
            await wait_until(pilot, lambda: rows(table) == [("H", 10), 1, 3, 5, ("H", 11), 2, 4]
                             and str(table.get_cell_at(Coordinate(4, 2))) == "2 hits · exit code 0",
                             why=lambda: f"rows {rows(table)}, worker heading {table.get_cell_at(Coordinate(4, 2))}")
            assert str(table.get_cell_at(Coordinate(0, 2))) == "3 hits · running"
            assert table.selected_hit.seq == 5 and table.cursor_row == 3
            assert table.border_title == "hits (5) · 2 processes"
            # AND a search keeps the grouping (and the hit the cursor was on)
            table.select_seq(4)
            table.filter("pid 11")
            assert rows(table) == [("H", 10), ("H", 11), 2, 4] and table.selected_hit.seq == 4
            table.filter("")
            table.select_seq(2)
            assert table.selected_hit.seq == 2 and table.cursor_row == 5

    run_pilot(scenario())


def test_a_narrow_status_line_still_says_which_thread_stopped(fake_source):
    """Under 120 columns the status line drops its labels, but a bare thread number would read as anything."""

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=(80, 24)) as pilot:
            await ready(pilot)
            fake_source.push("stopped", {"reason": "signal-received", "signal-name": "SIGINT", "thread-id": "3",
                                         "pid": 4242})
            await wait_until(pilot, lambda: app.state.target == "stopped")
            status = str(app.query_one("#status").render())
            assert "stopped: SIGINT · pid 4242 · thread 3 · " in status, status
            app.state.selected_thread = "2"
            app._redraw_status()
            status = str(app.query_one("#status").render())
            assert " · thread 2 (picked) · " in status, status
            # WHEN the target runs on THEN no thread is named: the pick was for that stop
            fake_source.push("state", "running")
            await wait_until(pilot, lambda: app.state.target == "running")
            status = str(app.query_one("#status").render())
            assert "thread" not in status, status
            await pilot.press("q")

    run_pilot(scenario())


def test_c_at_one_gdbs_stop_turns_to_another_gdb_still_stopped(fake_source, fixture_session):
    """A child that executed Python stands at a stop in a gdb of its own while the main gdb's process is
    stopped too: c continues the one shown, and the TUI then shows the other (its stop, its pid), whose
    keys act on it (sources.LiveSource.resume returns its call path)."""
    sigmoid = next(h for h in fixture_session.hits if h.breakpoint == "wrapper_CPU_sigmoid")
    other = numbered_hits(sigmoid, 1, 1)[0]

    def resume():
        fake_source.calls.append(("resume",))
        fake_source.push("stopped", {"reason": "breakpoint-hit", "thread-id": "1", "pid": 4242})
        return other

    fake_source.resume = resume

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
            fake_source.push("hit", numbered_hits(sigmoid, 2, 1)[0])
            fake_source.push("stopped", {"reason": "breakpoint-hit", "thread-id": "1", "pid": 5151})
            await wait_until(pilot, lambda: app.state.target == "stopped" and app.state.gdb == "ready")
            # WHEN c is pressed THEN the call path and status line show the stop still standing, in its process
            await pilot.press("c")
            # (the title comes with resume()'s answer, the status line with the stop event it pushed: two
            # messages, either first; CI saw the title before the status line once)
            await wait_until(pilot, lambda: app.call_path.border_title.startswith(
                f"call path · pid {other.thread.pid} is still stopped · thread {other.thread.id}")
                and app.state.target == "stopped" and "pid 4242" in str(app.query_one("#status").render()),
                why=lambda: (app.call_path.border_title, str(app.query_one("#status").render())))
            assert app.check_action("control", ("step",)) is True
            await pilot.press("q")

    run_pilot(scenario())


def test_a_batch_of_events_that_comes_while_the_app_closes_is_left_to_the_session_file(fake_source):
    """A batch taken in after the app began to close (its panes being taken down) once failed the whole TUI
    with NoMatches for the output pane (CI, test_parts' graph test): it is dropped, as the session file has it."""
    from tracer.tui.sources import SourceEvent

    async def scenario():
        app = make_app(fake_source)
        async with app.run_test(size=SIZE) as pilot:
            await ready(pilot)
        # the app has closed: a warning, a gdb notice and the run's end arrive after it
        for kind, data in (("warning", "late"), ("gdb", "late notice"), ("finished", "completed")):
            app.inbox.push(SourceEvent(kind, data))
        app._drain()  # the batch's delivery, as a timer set before the close would make it
        assert app.inbox.take() == [], "the batch was taken off the inbox, not left to pile up"
        return app

    app = run_pilot(scenario())
    assert not app.is_running
