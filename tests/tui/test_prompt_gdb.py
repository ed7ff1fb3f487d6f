"""The gdb prompt (``:``) driving a real gdb: lines typed in the TUI run in the frame selected in the call
path, on the -g -O0 debug extension (locals, a call into torch, up/frame moving the selection, tab
completion, history, refused lines) and on the release wheel (registers, memory, a Python row: lines run at the
first stop of tests/tui/test_steps_vs_gdb.py's run, before its steps)."""
from __future__ import annotations

import re
import sys

import pytest

from tests.tui.support import run_pilot, type_line, wait_until
from tracer.recorder import TraceConfig
from tracer.tui.app import make_app
from tracer.tui.sources import LiveSource
from tracer.tui.widgets.output import OutputLog
from tracer.tui.widgets.prompt_bar import PromptBar


async def ask(pilot, app, line: str) -> str:
    """Type ``line`` at the prompt and return what the output pane got for it (its echo first)."""
    log = app.query_one(OutputLog)
    before = len(log._lines)
    if not app.query_one(PromptBar).display:
        await pilot.press("colon")
    await type_line(pilot, line)
    await pilot.press("enter")

    def answered():
        """gdb's answer to the line in the output pane"""
        return app.state.gdb == "ready" and len(log._lines) > before + 1

    await wait_until(pilot, answered, timeout=120, step=0.1)
    # gdb's console lines come before its ^done: once ready, the answer is in the pane when the app has
    # handled its messages. The target's own output (a call's print) comes through its terminal: the
    # tests that call a function wait for what it prints.
    await pilot.wait_for_scheduled_animations()
    lines = [line.plain for line in list(log._lines)[before:]]
    # A stop's own words (finish's "Run till exit ... Value returned") can land just after `before` was
    # taken: the answer is what follows the line's echo.
    echo = f"(gdb) {line}"
    assert echo in lines, lines
    return "\n".join(lines[lines.index(echo) + 1:])



def stop_mode_source(tmp_path, breakpoint: str, **target) -> LiveSource:
    """A live source that records in stop mode (the TUI drives gdb) with one breakpoint; ``target``: the
    program, as ``script=`` or ``code=``."""
    return LiveSource(TraceConfig(breakpoints=(breakpoint,), python=sys.executable, session_dir=tmp_path,
                                  live=True, forward_output=False, mode="stop", **target))

def stopped_at_first_hit(app) -> bool:
    """the target stopped at its first hit, shown in the call path"""
    return app.state.target == "stopped" and app.call_path.hit is not None and app.state.gdb == "ready"


def stopped_in(app, short: str) -> bool:
    """the target stopped with the given function innermost, selected in the call path"""
    path = app.call_path
    return (app.state.target == "stopped" and app.state.gdb == "ready" and path.hit is not None
            and path.frames[path.selected_frame_index()].short == short)


@pytest.mark.gdb
def test_prompt_on_the_debug_extension_then_the_seeds_ivalue_dump_in_a_boxed_kernel(tmp_path, debug_ext):
    # GIVEN a Python calling the -g -O0 demo's boxed operator, then its operator with a CPU kernel, in stop
    # mode (one run for both: the first `call` into libtorch_cpu.so makes gdb read its symbols, ~10 s)
    lib = debug_ext
    code = (f"import torch; torch.ops.load_library({str(lib)!r}); a = torch.arange(4, dtype=torch.float32); "
            "print('result', torch.ops.pttrace_demo.boxed_scale(a, 3, 'seventeen')); "
            "print(torch.ops.pttrace_demo.scale_add(a, a, 2.0))")
    from tracer.commands.ops import _in_background, _values_layout  # as the CLI establishes the tensor layout

    config = TraceConfig(breakpoints=("pttrace_demo::scale_add_cpu", "pttrace_demo::boxed_scale_stack"),
                         python=sys.executable, code=code, session_dir=tmp_path, live=True, forward_output=False,
                         mode="stop", values_layout_later=_in_background(_values_layout, sys.executable, None))
    source = LiveSource(config)

    async def scenario():
        app = make_app(source)
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: stopped_at_first_hit(app), timeout=120, step=0.2)
            await seeds_ivalue_dump(pilot, app)

            # WHEN c goes on THEN the target stops in the demo operator's CPU kernel
            await pilot.press("c")
            await wait_until(pilot, lambda: stopped_in(app, "pttrace_demo::scale_add_cpu"), timeout=120,
                             step=0.2)
            path = app.call_path
            log = app.query_one(OutputLog)

            # WHEN `info locals` is typed THEN gdb lists the kernel's locals (frame #0, selected)
            said = await ask(pilot, app, "info locals")
            assert re.search(r"^a_c = ", said, re.M) and re.search(r"^po = 0x", said, re.M), said

            # WHEN pttrace's `tensor` is given the argument (a reference) or its register THEN the tensor's
            # metadata and values are read from memory by pttrace's reader
            for expr in ("a", "$rsi"):
                said = await ask(pilot, app, f"tensor {expr}")
                assert re.fullmatch(r"at::Tensor at 0x[0-9a-f]+: float32\[4\] cpu = \[0\.0, 1\.0, 2\.0, 3\.0\]", said), said

            # WHEN a method of at::Tensor defined in libtorch_cpu.so is called THEN it runs in the target
            # (gdb got the symbols of the library it had as unwind tables only for the dump above)
            said = await ask(pilot, app, "call a.print()")
            await wait_until(pilot, lambda: "CPUFloatType [4]]" in "\n".join(x.plain for x in log._lines),
                             timeout=10)  # print() writes to the target's terminal

            # WHEN `up` is typed THEN gdb selects frame #1 and so does the call path; `p $pc` runs there
            said = await ask(pilot, app, "up")
            assert said.startswith("#1  ") and "WrapFunctionIntoRuntimeFunctor_" in said, said
            frame = path.frames[path.selected_frame_index()]
            assert "WrapFunctionIntoRuntimeFunctor_" in frame.function
            said = await ask(pilot, app, "p $pc")
            assert f"0x{frame.address:x}" in said and "WrapFunctionIntoRuntimeFunctor_" in said, said

            # WHEN the kernel's row is selected again THEN the next line runs in frame #0
            path.select_frame(len(path.frames) - 1)
            said = await ask(pilot, app, "frame")
            assert said.startswith("#0  pttrace_demo::scale_add_cpu"), said

            # WHEN tab is pressed after `info reg` THEN gdb's completion fills the line
            bar = app.query_one(PromptBar)
            await type_line(pilot, "info reg")
            await pilot.press("tab")
            await wait_until(pilot, lambda: bar.value == "info registers ", timeout=30)
            bar.value = ""

            # WHEN ↑ is pressed THEN the last line comes back
            await pilot.press("up")
            assert bar.value == "frame"
            bar.value = ""

            # WHEN a line would end the target THEN it is refused with what to do instead
            said = await ask(pilot, app, "kill")
            assert "not run at pttrace's prompt" in said and "q quits" in said, said
            assert app.state.target == "stopped"
            await pilot.press("escape")

            # WHEN f, then n, are pressed THEN after each the innermost frame shown (and selected) is where
            # gdb's `frame` says it is, and the finish tells the value returned, as gdb does
            for key, action in (("f", "finish"), ("n", "next")):
                before = path.hit
                await pilot.press(key)
                await wait_until(pilot, lambda: path.hit is not before and f"where {action} stopped" in path.border_title
                                 and app.state.gdb == "ready", timeout=60, step=0.1)
                said = await ask(pilot, app, "frame")
                await pilot.press("escape")
                m = re.search(r" at (\S+):(\d+)", said)
                inner = path.frames[-1]
                assert m and (m.group(1), int(m.group(2))) == (inner.file, inner.line), (said, inner)
                assert path.selected_frame_index() == len(path.frames) - 1
                if action == "finish":
                    assert re.search(r"Value returned is \$\d+ = ", "\n".join(x.plain for x in log._lines))

            # WHEN c lets the run end THEN the call path is no longer titled for a stop that is over, and
            # the boxed op returned what it always does: the dumps changed nothing
            await pilot.press("c")
            await wait_until(pilot, lambda: app.state.finished, timeout=60)
            assert "over: " in path.border_title, path.border_title
            await wait_until(pilot, lambda: "result tensor([0., 3., 6., 9.])" in output_text(app),
                             timeout=10, why=lambda: f"the output pane ends {output_text(app)[-1500:]!r}")
            await pilot.press("q")
            await wait_until(pilot, lambda: not app.is_running, timeout=30)
        return app

    run_pilot(scenario(), timeout=600)
    assert source.engine.mi.proc.poll() is not None, "the TUI left its gdb behind"


def output_text(app) -> str:
    return "\n".join(x.plain for x in app.query_one(OutputLog)._lines)


async def seeds_ivalue_dump(pilot, app) -> None:
    """The seeds' IValue dump: the debug extension's boxed kernel (its arguments are IValues on the
    dispatcher's stack), the target stopped in the function it hands the stack to by reference."""
    path = app.call_path
    assert path.frames[path.selected_frame_index()].short == "pttrace_demo::boxed_scale_stack"
    assert any(f.short == "pttrace_demo::boxed_scale_cpu" for f in path.frames)
    # WHEN the seeds' line is typed as they write it THEN IValue::dump (libtorch_cpu.so) runs in the
    # target and prints the op's first argument, the tensor it was given, in the output pane
    line = "call ((c10::IValue *)stack._M_impl._M_start)->dump()"
    await ask(pilot, app, line)
    await wait_until(pilot, lambda: "[ CPUFloatType{4} ]" in output_text(app).split(f"(gdb) {line}")[-1],
                     timeout=20)
    dumped = output_text(app).split(f"(gdb) {line}")[-1]
    assert re.search(r"^\s*0\n\s*1\n\s*2\n\s*3\n\[ CPUFloatType\{4\} \]", dumped, re.M), dumped

    # WHEN `up` selects the boxed kernel, whose stack is a pointer THEN `stack->` reaches the
    # other arguments: the int and the string the op was called with
    said = await ask(pilot, app, "up")
    assert said.startswith("#1  ") and "pttrace_demo::boxed_scale_cpu" in said, said
    for index, printed in ((2, "seventeen"), (1, "3")):
        line = f"call ((c10::IValue *)stack->_M_impl._M_start)[{index}].dump()"
        await ask(pilot, app, line)
        await wait_until(pilot, lambda: re.search(f"^{printed}$", output_text(app).split(f"(gdb) {line}")[-1], re.M),
                         timeout=20)
    await pilot.press("escape")


async def prompt_on_the_release_wheel(pilot, app) -> None:
    """The prompt at hello-world.py's first stop in the CPU sigmoid kernel of the release wheel (no DWARF):
    registers, memory, gdb's backtrace named by pttrace, a Python row's eval frame. Run by
    tests/tui/test_steps_vs_gdb.py at that stop, before its steps (one stop-mode run of hello-world.py for
    both: a whole run of torch under gdb fewer); it leaves gdb in frame #0, where it found it."""
    path = app.call_path
    kernel = path.frames[-1]

    # WHEN registers and memory are asked for THEN gdb answers in the kernel's frame
    said = await ask(pilot, app, "p $rdi")
    assert re.fullmatch(r"\$\d+ = -?\d+", said), said
    said = await ask(pilot, app, "x/4gx $rsp")
    assert re.match(r"0x[0-9a-f]+:\s+0x[0-9a-f]{16}\s+0x[0-9a-f]{16}", said), said
    said = await ask(pilot, app, "info registers rip")
    assert re.match(rf"rip\s+0x{kernel.address:x}\b", said), said
    said = await ask(pilot, app, "info registers")
    assert all(re.search(rf"^{r}\s+0x", said, re.M) for r in ("rax", "rsp", "eflags")), said

    # WHEN gdb's backtrace passes through libtorch_cpu.so (unwind tables only: gdb says `?? ()`)
    # THEN its lines carry pttrace's names for those addresses
    said = await ask(pilot, app, "bt 3")
    assert "?? ()" not in said and re.match(r"#0  0x[0-9a-f]+ in at::wrapper_CPU_sigmoid \(\) from \S*libtorch_cpu\.so",
                                             said), said
    # AND so does the stop's own line in the output pane
    stop_notes = [x.plain for x in app.query_one(OutputLog)._lines if "Breakpoint" in x.plain]
    assert stop_notes and "wrapper_CPU_sigmoid" in stop_notes[0] and "??" not in stop_notes[0], stop_notes

    # WHEN a Python row is selected THEN the line runs in the eval frame that runs it
    python_rows = [i for i, f in enumerate(path.frames) if f.kind == "python"]
    path.select_frame(python_rows[-1])
    said = await ask(pilot, app, "frame")
    assert re.match(r"#\d+\s+.*_PyEval_EvalFrameDefault", said), said

    # the kernel's row again, and gdb with it (finish acts on gdb's selected frame)
    path.select_frame(len(path.frames) - 1)
    said = await ask(pilot, app, "frame")
    assert said.startswith("#0  ") and "wrapper_CPU_sigmoid" in said, said
    await pilot.press("escape")
