"""The Python-frame reader (tracer.pyruntime, no gdb, no debug info) on every interpreter the machine has.

GIVEN tests/targets/known_stack.py stopped (its own SIGSTOP) at the bottom of a known stack: 300-deep
recursion under a generator, exec'd code, asyncio coroutines, and a named worker thread
WHEN the reader reads /proc/PID/mem
THEN every thread's frames (file, line, function), innermost first, are what pystack and py-spy read
from the same stopped process, the stack has the shape the target built, and each thread's
``threading`` name is read by its ident.
"""
from __future__ import annotations

import os

import pytest

from tests import pythons
from tracer.pyruntime.objects import ThreadNames
from tracer.pyruntime.process import find_runtime, open_runtime

CASES = pythons.interpreters()


@pytest.fixture(scope="module", params=CASES, ids=[name for name, _ in CASES])
def reading(request):
    name, spec = request.param
    python = pythons.resolve(spec)
    if python is None:
        pytest.skip(f"{name}: not on this machine")
    proc = pythons.start_stopped(python)
    try:
        runtime, mem = open_runtime(proc.pid)
        try:
            threads = [(ts, runtime.frames(ts.address)) for ts in runtime.threads()]
            names = ThreadNames(runtime).names()
        finally:
            mem.close()
        yield {"name": name, "pid": proc.pid, "runtime": runtime, "threads": threads, "names": names,
               "defined_in": find_runtime(proc.pid)[2], "pystack": pythons.pystack_threads(proc.pid),
               "py_spy": pythons.py_spy_threads(proc.pid)}
    finally:
        pythons.finish(proc)


def _main_and_worker(reading):
    by_size = sorted(reading["threads"], key=lambda t: len(t[1].frames))
    assert len(by_size) == 2, [len(c.frames) for _, c in by_size]
    return by_size[1], by_size[0]


def test_the_stack_the_target_built(reading):
    (_, main), (_, worker) = _main_and_worker(reading)
    assert main.complete and worker.complete, (main.error, worker.error)
    names = [f.function.rsplit(".", 1)[-1] for f in main.frames]
    assert names[:302] == ["bottom"] + ["recurse"] * 301
    target = [n for n, f in zip(names, main.frames) if f.file == str(pythons.TARGET)]
    assert target[302:] == ["numbers", "inner", "outer", "main", "<module>"]
    exec_frames = [(f.function, f.line) for f in main.frames if f.file == "<known-exec>"]
    assert exec_frames == [("in_exec", 3), ("<module>", 5)]
    lines = [_line_of("os.kill(os.getpid(), signal.SIGSTOP)"), _line_of("return bottom()"),
             _line_of("return recurse(n - 1)")]
    assert [f.line for f in main.frames[:3]] == lines
    assert "waiter" in [f.function for f in worker.frames]
    assert [f.function.rsplit(".", 1)[-1] for f in worker.frames][-1] == "_bootstrap"


def _line_of(statement: str) -> int:
    """The line of the target that holds just this statement."""
    text = pythons.TARGET.read_text().splitlines()
    [line] = [i for i, ln in enumerate(text, 1) if ln.strip() == statement]
    return line


def test_matches_pystack_frame_by_frame(reading):
    ours = sorted([(f.file, f.line, f.function.rsplit(".", 1)[-1]) for f in chain.frames]
                  for _, chain in reading["threads"])
    theirs = sorted(reading["pystack"].values())
    # pystack names files by the path the interpreter was started from (a copy's symlinked stdlib).
    norm = [[(os.path.realpath(f) if f.startswith("/") else f, line, fn) for f, line, fn in t] for t in theirs]
    assert [[(os.path.realpath(f) if f.startswith("/") else f, line, fn) for f, line, fn in t] for t in ours] == norm


def test_matches_py_spy_with_thread_ids(reading):
    spy = reading["py_spy"]
    for ts, chain in reading["threads"]:
        if ts.native_id is None:  # 3.10 keeps only the pthread_t: match by the frames
            candidates = [frames for _, frames in spy.values()]
        else:
            assert ts.native_id in spy, (ts.native_id, list(spy))
            candidates = [spy[ts.native_id][1]]
        ours = [(f.file, f.line, f.function) for f in chain.frames]
        assert any(pythons.same_frames(ours, theirs) for theirs in candidates), ours


def test_groups_follow_the_c_eval_frames(reading):
    """One group per C-level eval frame: 3.10 runs each Python frame in its own; 3.11+ run Python-to-
    Python calls inline, so the 301 recursive calls share one group."""
    (_, main), _ = _main_and_worker(reading)
    minor = reading["runtime"].layout.minor
    if minor == 10:
        assert all(len(g) == 1 for g in main.groups)
    else:
        first = main.groups[0]
        assert [f.function for f in first[:302]] == ["bottom"] + ["recurse"] * 301
        # the generator is entered from C (list()), exec'd code from exec() (it calls in_exec inline), the
        # coroutines from the event loop's C code
        assert [g[-1].function for g in main.groups][:2] == ["numbers", "<module>"]
        assert main.groups[2][-1].function in ("inner", "outer")  # 3.11 enters the awaited coroutine from C


def test_reads_the_interpreter_it_was_given(reading):
    minor = reading["runtime"].layout.minor
    defined_in = reading["defined_in"]
    assert f"python3.{minor}" in os.path.basename(defined_in)
    if reading["name"].startswith("stripped"):
        assert str(pythons.CACHE) in defined_in  # the stripped copy, not the pyenv original


def test_reads_each_threads_python_name(reading):
    """threading._active read through sys.modules: dicts, ints and instance attributes (a dict on 3.10,
    managed values on 3.11/3.12, inline values on 3.13) of this build, with no debug information."""
    (main_ts, _), (worker_ts, _) = _main_and_worker(reading)
    assert reading["names"] == {main_ts.thread_id: "MainThread", worker_ts.thread_id: "known-worker"}
