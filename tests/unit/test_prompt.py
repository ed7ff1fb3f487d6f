"""The gdb prompt's pure parts: what a typed line is to the run, and pttrace's call-path rows as gdb's
frame levels (real frame shapes: Python frames run by one eval frame, inlined frames, a C call between)."""
from __future__ import annotations

import pytest

from tracer.recorder.prompt import classify, frame_levels, moved_to, needs_symbols, row_of_level, runs_code
from tracer.session.model import Frame


@pytest.mark.parametrize("line, kind", [
    ("p $rdi", "plain"), ("x/4gx $rsp", "plain"), ("info registers", "plain"), ("call a.print()", "plain"),
    ("bt full", "plain"), ("up", "plain"), ("thread 2", "plain"), ("", "plain"),
    ("next", "resuming"), ("s", "resuming"), ("fin", "resuming"), ("until 42", "resuming"),
    ("stepi 3", "resuming"), ("adv foo.c:3", "resuming"),
    ("c", "continuing"), ("continue 3", "continuing"),
    ("tensor a", "plain"), ("kill", "refused"), ("q", "refused"), ("run", "refused"), ("detach", "refused"), ("shell ls", "refused"),
    ("!ls", "refused"), ("b foo", "refused"), ("delete 1", "refused"), ("pi", "refused"), ("del", "refused"),
])
def test_classify(line, kind):
    assert classify(line).name == kind


def test_a_refusal_says_what_to_do_instead():
    assert "b adds one" in classify("break initModule").why
    assert "q quits" in classify("quit").why


def test_runs_code():
    assert runs_code("call graph->dump()") and runs_code("p x.dump()") and runs_code("call n")
    assert not runs_code("p x") and not runs_code("info frame") and not runs_code("x/4gx $rsp")


def py(name):
    return Frame(kind="python", function=name, file="m.py", line=1)


def native(name, address=None, inlined=False):
    return Frame(kind="native", function=name, address=address, inlined=inlined)


# Outermost first, as a Hit keeps them: main -> eval (two Python frames) -> C call -> eval (one) -> kernel,
# an inlined frame inside the kernel's caller.
FRAMES = [native("main", 1), py("<module>"), py("forward"), native("_PyEval_Vector", 2),
          native("cfunction_call", 3), py("inner"), native("THPVariable_sigmoid", 4),
          native("inlined_helper", 5, inlined=True), native("wrapper_CPU_sigmoid", 6)]


def test_frame_levels_count_an_eval_frame_once_for_its_python_frames():
    levels = frame_levels(FRAMES)
    assert levels[-1] == 0  # the kernel is frame #0
    assert levels[-2] == 1 and levels[-3] == 2  # an inlined frame is a gdb frame of its own
    assert levels[5] == 3  # `inner`: the eval frame under cfunction_call
    assert levels[4] == 4 and levels[3] == 5
    assert levels[1] == levels[2] == 6  # one eval frame runs both
    assert levels[0] == 7


def test_row_of_level_picks_the_innermost_python_frame_of_an_eval_frame():
    assert row_of_level(FRAMES, 0) == 8
    assert row_of_level(FRAMES, 6) == 2
    assert row_of_level(FRAMES, 99) is None


def test_moved_to_reads_the_level_gdb_selected():
    assert moved_to("up", "#1  0x00007ffff527c456 in f () at x.h:23\n23\t  return;") == 1
    assert moved_to("frame 9", "#9  0x00007ffff5f152f8 in ?? () from libtorch_python.so") == 9
    assert moved_to("p 1", "#1 looks like a frame") is None


def test_needs_symbols():
    assert needs_symbols("Cannot evaluate function -- may be inlined")
    assert needs_symbols('No symbol "graph" in current context.')
    assert not needs_symbols("Cannot access memory at address 0x0") and not needs_symbols(None)


def test_pttrace_commands_go_to_the_agent():
    from tracer.recorder.prompt import as_gdb_line

    assert as_gdb_line("tensor $rsi") == "pttrace-tensor $rsi"
    assert as_gdb_line("p tensor") == "p tensor"


def test_thread_rows_from_gdbs_thread_info():
    from tracer.recorder.prompt import thread_rows

    payload = {"current-thread-id": "2", "threads": [
        {"id": "1", "target-id": "Thread 0x7ffff7dd2740 (LWP 10801)", "name": "python3", "state": "stopped",
         "frame": {"level": "0", "addr": "0x00007ffff7ea8e40", "func": "__GI___nanosleep",
                   "file": "nanosleep.c", "line": "25"}},
        {"id": "2", "target-id": "Thread 0x7ffff0 (LWP 10805)", "name": "worker-3", "state": "stopped",
         "frame": {"addr": "0x00007fffe35eec40", "func": "??", "from": "/x/libtorch_cpu.so"}}]}
    one, two = thread_rows(payload)
    assert (one.id, one.lwp, one.name, one.frame, one.current) == ("1", 10801, "python3",
                                                                   "__GI___nanosleep at nanosleep.c:25", False)
    assert two.current and two.frame == "0x00007fffe35eec40 in ?? () from libtorch_cpu.so"


def test_gdbs_linkage_names_are_demangled():
    from tracer.recorder.unknowns import demangled

    said = "Single stepping until exit from function _ZN2at12_GLOBAL__N_119wrapper_CPU_sigmoidERKNS_6TensorE, which"
    assert demangled(said) == ("Single stepping until exit from function "
                               "at::wrapper_CPU_sigmoid, which")  # the short name the call path shows
    assert demangled("no names here") == "no names here"


def test_gdbs_location_numbering_warning_is_taken_out_of_an_answer_and_nothing_else():
    # GIVEN what gdb 13 printed during `call ...->dump()` after pttrace gave it a library's symbols
    from tracer.recorder.prompt import _GDB_BOOKKEEPING
    said = (" 0\n 1\nwarning: location number not found for breakpoint 1 address 0x7ffff52671d3.\n"
            "warning: location number not found for breakpoint 1 address 0x7ffff52671d3.\n 2\n"
            "warning: Could not load shared library symbols for foo.so.\n")
    # THEN only gdb's bookkeeping lines go: the dump's lines and every other warning stay, in order
    assert _GDB_BOOKKEEPING.sub("", said) == " 0\n 1\n 2\nwarning: Could not load shared library symbols for foo.so.\n"
