"""Python frames recorded by pttrace, run and attach, on every interpreter the machine has: CPython's own
``py-bt`` (the debug builds' python-gdb helper, reading DWARF) is the reference.

GIVEN tests/targets/known_stack.py (300-deep recursion under a generator, exec'd code, asyncio
coroutines, a named worker thread) calling bin() at the bottom
WHEN pttrace records hits of PyNumber_ToBase (exported by every CPython, called by nothing else)
THEN each hit has every Python frame in py-bt's order with py-bt's lines (stripped copies and Debian's
python3.11: the shape the target built, and the lines of their pyenv original), each group where
its C-level _PyEval_EvalFrameDefault was, no warning about Python frames, and its thread's
threading name next to the OS name.

Where no debug build exists (Debian's python3.11, the stripped copies), an independent oracle too: the
hit pttrace attach records, against py-spy's and pystack's reading of the same stack once the target
stopped itself on that line (tests/targets/known_stack.py ``detach``, tests/targets/sigmoid_stop.py).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from tests import pythons
from tests.conftest import PTTRACE, run_pttrace
from tests.support import Lines, assert_only_unnamed, run_child, stop_process, wait_for
from tracer.session import storage
from tracer.settings import cache_dir

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

BREAK = "PyNumber_ToBase"
CASES = pythons.interpreters()
DEPTH = ["--max-depth", "2000"]
_PYBT_FRAME = re.compile(r'^\s+File "(.*)", line (\d+), in (.*)$')


def _session(directory) -> storage.Session:
    files = sorted(directory.glob("*.jsonl"))
    assert len(files) == 1, files
    return storage.load(files[0])


def _python(hit) -> list[tuple[str, int, str]]:
    """The hit's Python frames, innermost first: (real file path, line, code name)."""
    return [(os.path.realpath(f.file) if f.file.startswith("/") else f.file, f.line, f.function.rsplit(".", 1)[-1])
            for f in reversed(hit.frames) if f.kind == "python"]


_PY_BTS: dict[str, list[tuple[str, int, str]]] = {}


def _py_bt(python) -> list[tuple[str, int, str]]:
    """py-bt at the same stop, from the build's own python-gdb helper (-nx: nothing else is loaded). Made
    once per debug build: four of them are the reference of eight interpreters (pyenv-3.11 and Debian's
    3.11, each pyenv build and its stripped copy), the same target, the same stop, the same output."""
    if str(python) not in _PY_BTS:
        _PY_BTS[str(python)] = _py_bt_of(python)
    return list(_PY_BTS[str(python)])


def _py_bt_of(python) -> list[tuple[str, int, str]]:
    helper = f"{python}-gdb.py"
    # gdb's own index cache, where the ``pttrace run`` of this build just before left its index: gdb reads the
    # build's DWARF names from it instead of indexing them again (~0.4 s of CPU, a few s of wall at load 9)
    index = cache_dir() / "gdb-index"
    out = run_child(["gdb", "-nx", "--batch", "-iex", f"set index-cache directory {index}",
                     "-iex", "set index-cache enabled on", "-iex", f"set auto-load safe-path {helper}",
                     "-ex", "set breakpoint pending on", "-ex", f"break {BREAK}", "-ex", "run", "-ex", "py-bt",
                     "--args", str(python), str(pythons.TARGET), "call"],
                    capture_output=True, text=True, timeout=300).stdout
    frames = [(os.path.realpath(m.group(1)) if m.group(1).startswith("/") else m.group(1), int(m.group(2)),
               m.group(3)) for m in map(_PYBT_FRAME.match, out.splitlines()) if m]
    assert len(frames) > 300, out[-3000:]
    return frames


def _unnamed(name: str) -> tuple[str, ...]:
    """The files whose frames nothing names in known_stack.py's path: Debian's python3.11 and its _asyncio
    module have no .symtab and no DWARF (their static functions); the stripped copies keep their .symtab."""
    return ("python3.11", "_asyncio.cpython-311-x86_64-linux-gnu.so") if name.startswith("debian") else ()


def _python_warnings(session) -> list[str]:
    """The warnings about Python frames (an interpreter without torch rightly warns that it has no tensor
    arguments to read, and one without a helper that it has no py-bt: neither is about the frames)."""
    return [w for w in session.info.warnings
            if "gdb helper" not in w and not w.startswith("tensor and Scalar arguments are not read")]


@pytest.fixture(scope="module", params=CASES, ids=[name for name, _ in CASES])
def recorded(request, tmp_path_factory):
    """``pttrace run`` to the first hit, and the py-bt of the matching pyenv debug build."""
    name, spec = request.param
    python = pythons.resolve(spec)
    if python is None:
        pytest.skip(f"{name}: not on this machine")
    out = tmp_path_factory.mktemp("run")
    proc = run_pttrace("run", "--batch", "--session-dir", str(out), "--python", str(python), "--break", BREAK,
                       "--max-hits", "1", *DEPTH, str(pythons.TARGET), "call")
    assert proc.returncode == 0, proc.stderr[-3000:]
    minor = int(name.rsplit(".", 1)[1])
    reference = pythons.pyenv_python(minor)
    return {"name": name, "session": _session(out), "py_bt": _py_bt(reference) if reference else None}


def test_run_records_what_py_bt_shows(recorded):
    session = recorded["session"]
    assert_only_unnamed(_python_warnings(session), *_unnamed(recorded["name"]))
    [hit] = session.hits
    ours = _python(hit)
    if recorded["name"].startswith("debian"):  # 3.11.2: the stdlib's lines are not pyenv 3.11.7's
        ours = [(f, line if f.startswith(str(pythons.ROOT)) or f.startswith("<") else 0, fn) for f, line, fn in ours]
        theirs = [(f, line if f.startswith(str(pythons.ROOT)) or f.startswith("<") else 0, fn)
                  for f, line, fn in recorded["py_bt"]]
        assert [(os.path.basename(f), line, fn) for f, line, fn in ours] == \
            [(os.path.basename(f), line, fn) for f, line, fn in theirs]
    else:
        assert ours == recorded["py_bt"]


def test_run_records_the_python_thread_name(recorded):
    [hit] = recorded["session"].hits
    assert hit.thread.python_name == "MainThread" and hit.thread.name.startswith("python3")
    assert hit.thread.names == f"{hit.thread.name} [Python: MainThread]"


def test_run_interleaves_each_group_at_its_eval_frame(recorded):
    [hit] = recorded["session"].hits
    frames = list(reversed(hit.frames))  # innermost first
    assert not [f for f in frames if f.kind == "native" and f.function == "_PyEval_EvalFrameDefault"]
    assert frames[0].kind == "native" and frames[0].function == BREAK
    # the exec'd module's group sits just above the PyEval_EvalCode that exec() runs it with
    at = next(i for i, f in enumerate(frames) if f.kind == "python" and f.file == "<known-exec>" and
              f.function == "<module>")
    assert "PyEval_EvalCode" in [f.function for f in frames[at + 1:at + 6]]
    # 3.11+ run in_exec inline in the module's eval frame (3.10: in its own); list() runs the generator
    # in a new one
    where = {f.function: i for i, f in enumerate(frames)
             if f.kind == "python" and f.function in ("in_exec", "numbers")}
    assert where["numbers"] < where["in_exec"] - 1  # native frames between them
    assert (where["in_exec"] == at - 1) == (not recorded["name"].endswith("3.10"))


def runs_on(pid: int) -> None:
    """The detached target runs on: no tracer, not stopped, and its main thread keeps sleeping between
    calls of bin() (its voluntary context switches go on growing)."""

    def status() -> dict:
        with open(f"/proc/{pid}/status") as fh:
            return dict(line.split(":", 1) for line in fh.read().splitlines() if ":" in line)

    first = int(status()["voluntary_ctxt_switches"])

    def running() -> bool:
        now = status()
        return (now["TracerPid"].strip() == "0" and now["State"].split()[0] in "RS"
                and int(now["voluntary_ctxt_switches"]) > first + 2)

    wait_for(running, 30, "the detached target to run on", why=status)


@pytest.fixture(scope="module", params=["pyenv-3.10", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13", "debian-3.11",
                                               "stripped-3.12"])
def attached(request, tmp_path_factory):
    """``pttrace attach`` for 6 hits (both threads call bin(); later hits of a stack reuse its walk). After
    the run fixture's recordings: gdb's index cache is warm for these interpreters."""
    spec = dict(CASES)[request.param]
    python = pythons.resolve(spec)
    if python is None:
        pytest.skip(f"{request.param}: not on this machine")
    target = subprocess.Popen([str(python), str(pythons.TARGET), "wait"], stdout=subprocess.PIPE, text=True)
    try:
        assert Lines(target.stdout, str(python)).next(120).strip() == "ready"
        out = tmp_path_factory.mktemp("attach")
        stats = out / "reuse.json"
        proc = run_pttrace("attach", "--batch", "--session-dir", str(out), "--break", BREAK, "--max-hits", "6",
                           *DEPTH, str(target.pid), env={"PTTRACE_STACK_REUSE_STATS": str(stats)})
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs_on(target.pid)
        return {"session": _session(out), "reuse": json.loads(stats.read_text()), "pid": target.pid,
                "name": request.param}
    finally:
        stop_process(target)
        target.stdout.close()


def test_attach_records_every_thread(attached):
    session = attached["session"]
    assert_only_unnamed(_python_warnings(session), *_unnamed(attached["name"]))
    by_thread = {}
    for hit in session.hits:
        by_thread.setdefault(hit.thread.lwp == attached["pid"], []).append(_python(hit))
    main, worker = by_thread.get(True, []), by_thread.get(False, [])
    assert main and worker, [h.thread for h in session.hits]
    for frames in main:
        names = [fn for _, _, fn in frames]
        assert names[:302] == ["bottom"] + ["recurse"] * 301 and names[-2:] == ["main", "<module>"]
        assert frames == main[0]
    for frames in worker:
        assert [fn for _, _, fn in frames] == ["waiter", "run", "_bootstrap_inner", "_bootstrap"]
    names = {(hit.thread.lwp == attached["pid"], hit.thread.python_name) for hit in session.hits}
    assert names == {(True, "MainThread"), (False, "known-worker")}
    assert attached["reuse"]["reused"] >= 1  # the reuse path read the same frames from the thread state


def test_torch_sigmoid_on_debian_python_without_dwarf(hello_recording, tmp_path):
    """The hello-world sigmoid path on Debian's python3.11: the same Python frames as on the test venv's
    pyenv 3.11 with DWARF (same torch, same script)."""
    python = pythons.debian_torch_python()
    if python is None:
        pytest.skip("Debian's python3.11 is not here (or the tests do not run on 3.11)")
    proc = run_pttrace("run", "--batch", "--session-dir", str(tmp_path), "--python", str(python),
                       "--break", "wrapper_CPU_sigmoid", "--max-hits", "1", "scripts/hello-world.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    session = _session(tmp_path)
    assert_only_unnamed(_python_warnings(session), "python3.11")
    [hit] = session.hits
    _, reference = hello_recording
    want = next(h for h in reference.hits if h.breakpoint == "wrapper_CPU_sigmoid")
    assert _python(hit) == _python(want)
    assert [fn for _, _, fn in _python(hit)][0] == "forward" and len(_python(hit)) >= 3


def _hit_frames(oracle, unnamed: tuple[str, ...]) -> tuple[object, list[tuple[str, int, str]]]:
    assert oracle.pttrace.returncode == 0, oracle.pttrace.stderr[-3000:]
    session = storage.load(oracle.session)
    assert_only_unnamed(_python_warnings(session), *unnamed)
    [hit] = session.hits
    return hit, [(f.file, f.line, f.function) for f in reversed(hit.frames) if f.kind == "python"]


@pytest.mark.parametrize("name", ["debian-3.11", "stripped-3.10", "stripped-3.12", "stripped-3.13"])
def test_attach_agrees_with_py_spy_and_pystack(name, tmp_path):
    """An independent oracle where no debug build exists: pttrace attach records a hit of bin() in the
    known stack (300-deep recursion, a generator, exec'd code, coroutines) and detaches; the target
    stops itself on that line; py-spy and pystack read the same Python stack without DWARF."""
    python = pythons.resolve(dict(CASES)[name])
    if python is None:
        pytest.skip(f"{name}: not on this machine")
    oracle = pythons.attach_then_stop(python, [str(pythons.TARGET), "detach"], PTTRACE, BREAK, tmp_path)
    hit, frames = _hit_frames(oracle, _unnamed(name))
    assert hit.thread.lwp == oracle.pid and len(frames) > 300
    assert pythons.oracle_disagreements(frames, oracle, oracle.pid, "MainThread") == []


def test_torch_sigmoid_attach_on_debian_python_agrees_with_py_spy_and_pystack(tmp_path):
    """The sigmoid path in attach on Debian's python3.11 (no DWARF, libpython static, torch's cp311
    wheel): the hit's Python frames, through nn.Module's calls, are py-spy's and pystack's."""
    python = pythons.debian_torch_python()
    if python is None:
        pytest.skip("Debian's python3.11 is not here (or the tests do not run on 3.11)")
    oracle = pythons.attach_then_stop(python, [str(pythons.ROOT / "tests" / "targets" / "sigmoid_stop.py")],
                                      PTTRACE, "wrapper_CPU_sigmoid", tmp_path)
    hit, frames = _hit_frames(oracle, ("python3.11",))  # no asyncio there
    assert "wrapper_CPU_sigmoid(" in hit.frames[-1].function
    assert [fn for _, _, fn in frames][:2] == ["Stopper.forward", "Module._call_impl"]
    assert hit.thread.python_name == "MainThread"
    assert pythons.oracle_disagreements(frames, oracle, oracle.pid, "MainThread") == []
