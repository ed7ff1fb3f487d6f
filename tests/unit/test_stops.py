"""The stop handler's reading of gdb's ``*stopped`` records, from MI lines a real gdb 13.1 wrote."""
from __future__ import annotations

from pathlib import Path

import pytest
from pygdbmi import gdbmiparser

from tracer.recorder.stops import StopKind, read_stop

TRANSCRIPT = Path(__file__).resolve().parent.parent / "data" / "mi_stops.txt"


def recorded(scenario: str, nth: int = 0) -> dict:
    lines = [line.split(" ", 1)[1] for line in TRANSCRIPT.read_text().splitlines()
             if line.startswith(scenario + " ")]
    rec = gdbmiparser.parse_response(lines[nth])
    assert rec["type"] == "notify" and rec["message"] == "stopped"
    return rec["payload"]


def read(scenario: str, nth: int = 0, ending: bool = False, interrupting: bool = False):
    return read_stop(recorded(scenario, nth), ending=ending, interrupting=interrupting)


def test_a_breakpoint_hit_names_its_thread():
    stop = read("breakpoint")
    assert stop.kind is StopKind.BREAKPOINT and stop.thread_id == "1"


@pytest.mark.parametrize("nth,reason", [(1, "function-finished"), (2, "end-stepping-range")])
def test_finish_and_next_leave_the_target_stopped_for_the_controller(nth, reason):
    stop = read("step", nth)
    assert stop.kind is StopKind.STEPPED and stop.reason == reason


def test_exit_codes_are_octal_in_mi():
    assert read("exit3").kind is StopKind.EXITED and read("exit3").exit_code == 3
    assert read("normal").exit_code == 0


def test_a_process_killed_by_a_signal_says_which():
    stop = read("kill")
    assert stop.kind is StopKind.KILLED and stop.signal == "SIGKILL"


def test_a_segfault_is_a_crash_recorded_on_its_thread():
    stop = read("segv")
    assert stop.kind is StopKind.CRASHED and stop.signal == "SIGSEGV" and stop.thread_id == "1"


def test_the_targets_own_signals_are_passed_on():
    assert read("usr1").kind is StopKind.SIGNAL


@pytest.mark.parametrize("ending,interrupting,kind", [
    (False, True, StopKind.INTERRUPTED),  # the controller's interrupt: stay stopped
    (True, False, StopKind.ENDING),  # the run is being ended: the run loop carries on
    (True, True, StopKind.ENDING),
    (False, False, StopKind.SIGNAL),  # somebody else's SIGINT: the target's to handle
])
def test_a_sigint_stop_is_ours_only_when_we_asked_for_it(ending, interrupting, kind):
    assert read("interrupt", ending=ending, interrupting=interrupting).kind is kind


def test_library_loads_are_decided_then_continued():
    assert read("solib").kind is StopKind.LIBRARIES


def test_a_stop_without_a_reason_is_a_step_out_of_code_without_debug_info():
    # gdb 13 gives no reason after a finish out of a frame without line info.
    assert read_stop({"thread-id": "1"}, ending=False, interrupting=False).kind is StopKind.STEPPED
    assert read_stop({"thread-id": "1"}, ending=True, interrupting=False).kind is StopKind.OTHER


def test_a_stop_keeps_the_breakpoint_number_and_the_frame_for_the_views():
    """The TUI tells a stop as gdb does ("Breakpoint 1, f (...) at file:line"): it needs both."""
    from tracer.tui.state import describe_stop

    stop = read("breakpoint")
    where = dict(stop.frame)
    assert stop.breakpoint == "1" and where.get("func") and where.get("addr", "").startswith("0x")
    text = describe_stop({"reason": stop.reason, "bkptno": stop.breakpoint, "frame": where})
    assert text == "Breakpoint 1, work at t.c:7"


def test_an_exec_outside_a_hold_is_handed_over_not_left_stopped():
    # catch exec stops there (an exec that bypassed libc's execve): the exec'd process is detached, the rest go on.
    stop = read("exec")
    assert stop.kind is StopKind.EXECD and stop.thread_id == "1"
