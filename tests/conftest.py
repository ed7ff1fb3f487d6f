"""Shared fixtures: a real gdb, a real torch, real processes.

The expensive thing is gdb loading libtorch's symbols (~4 s), so one recording of hello-world.py
with several breakpoints is made once per test run and shared by many assertions.
"""
from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.support import run_child

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
HELLO = SCRIPTS / "hello-world.py"
PYTHON = sys.executable
PTTRACE = [PYTHON, "-m", "tracer"]

# One recording, many breakpoints: every layer of the hello-world path in a single gdb run.
HELLO_BREAKS = [
    "initModule",
    "wrapper_CPU_sigmoid",
    "THPVariable_tensor",
    "wrapper_CPU_sigmoid_backward",
    "THPVariable_tensr",  # misspelled on purpose: never resolves
]


# The longest test files, longest first (the quiet CI's --durations and a whole run's, 2026-11-27): they run
# first. scripts/test.sh's two workers take whole files in collection order (--no-loadscope-reorder); with
# xdist's default order (files with the most tests first) these few-test files came last, and one worker ran
# the fork storm or the IValue scenario alone while the other had nothing left. The other files keep their order.
LONGEST_FIRST = (
    "integration/test_fork_storm.py", "tui/test_prompt_gdb.py", "integration/test_faults.py",
    "integration/test_processes.py", "tui/test_exec_child_gdb.py", "integration/test_compiled.py",
    "integration/test_ops.py", "integration/test_op_follow.py", "integration/test_cfi.py",
    "integration/test_bigdebug.py", "integration/test_python_frames_gdb.py", "tui/test_live_processes.py",
    "integration/test_survival.py", "tui/test_terminal_faults.py", "integration/test_run_targets.py",
    "tui/test_threads_gdb.py", "tui/test_live_gdb.py", "integration/test_attach.py", "integration/test_hot_path.py",
    "integration/test_torchscript.py", "tui/test_steps_vs_gdb.py", "unit/test_interp_layout.py",
    "integration/test_target_streams.py", "integration/test_op_keysets.py",
)


def _file_rank(item) -> int:
    path = item.nodeid.split("::", 1)[0].removeprefix("tests/")
    try:
        return LONGEST_FIRST.index(path)
    except ValueError:
        return len(LONGEST_FIRST)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_file_rank)  # stable: each file's tests, and the files not named, keep their order
    if shutil.which("gdb") is None:
        skip = pytest.mark.skip(reason="gdb is not installed (.ci/run installs it)")
        for item in items:
            if "gdb" in item.keywords:
                item.add_marker(skip)


# A suite started where SIGINT is ignored (a script's background job, nohup) handed that on to every pttrace
# it started, which keeps a SIGINT ignored by inheritance (commands/_signals.py, 542608a): the tests that send
# pttrace a Ctrl-C then failed or waited out their deadlines (measured: test_faults' SIGINT case timed out after
# 96 s). Python's own handler is taken back here, so the processes the tests start get SIGINT's default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# The same for a hang-up and SIGTERM under `nohup` (measured: a fresh-clone `.ci/run` started by a nohup'd
# script failed test_survival's two SIGHUP cases, each pttrace keeping its inherited SIG_IGN to the test's
# deadline). A handler that does nothing keeps them ignored here, and a handler is not inherited through exec:
# the processes the tests start get the default.
for _signum in (signal.SIGHUP, signal.SIGTERM):
    if signal.getsignal(_signum) == signal.SIG_IGN:
        signal.signal(_signum, lambda signum, frame: None)

# pytest-xdist's workers get COLUMNS=80 and LINES=24 (execnet's defaults): rich would then cut pttrace's
# tables to 80 columns in every child, where a run without workers leaves them whole.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)

# Every process this test run starts (pttrace, its gdb, the targets) inherits this tag, so a check for
# leftovers counts only our own processes, not those of anything else running on the machine.
TEST_TAG = f"PTTRACE_TEST_TAG={uuid.uuid4().hex}"
os.environ["PTTRACE_TEST_TAG"] = TEST_TAG.split("=", 1)[1]


def _ours(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return TEST_TAG.encode() in fh.read().split(b"\0")
    except OSError:
        return False


def gdb_pids() -> set[int]:
    """The gdb processes started by this test run (to check that a test left none behind)."""
    out = subprocess.run(["ps", "-eo", "pid=,comm="], capture_output=True, text=True).stdout
    pids = {int(line.split()[0]) for line in out.splitlines() if line.split()[-1] == "gdb"}
    return {pid for pid in pids if _ours(pid)}


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def our_processes() -> list[int]:
    """Every live process this test run started (pttrace, gdb, targets, tmux), this one left out."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and int(e) != os.getpid() and _ours(int(e))
            and alive(int(e))]


_LEFT_RUNNING: list[str] = []


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """The last net under the fixtures' own clean-up: whatever of ours still runs once every fixture has
    been torn down is killed, and named in the summary (a test that leaves a process is a defect). Under
    pytest-xdist each worker has a tag of its own and its own net; the controller started only them."""
    if not hasattr(session.config, "workerinput") and session.config.getoption("numprocesses", None):
        return
    for pid in our_processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:160]
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        _LEFT_RUNNING.append(f"{pid} {command}")


def pytest_terminal_summary(terminalreporter):
    if _LEFT_RUNNING:
        terminalreporter.section("processes the tests left running (killed)")
        for line in _LEFT_RUNNING:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def worker_id(request) -> str:
    """pytest-xdist's worker name ("gw0"), or "master" in a run without workers (xdist's own fixture of
    that name, when the plugin is not there)."""
    workerinput = getattr(request.config, "workerinput", None)
    return workerinput["workerid"] if workerinput else "master"


@pytest.fixture(autouse=True)
def _settings_of_the_environment():
    """A command run in-process installs its settings: the next test reads the environment again."""
    yield
    from tracer import settings

    settings.install(None)


def run_pttrace(*args: str, cwd: Path | None = None, timeout: float = 300, env: dict | None = None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return run_child([*PTTRACE, *args], cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout,
                     env=full_env)


def nm_defined(lib: str) -> str:
    """``nm -C --defined-only LIB``'s output, kept in tests/.cache by the library's path, size and mtime: two
    modules compare with nm's reading of libtorch_cpu.so (2 s of CPU, 157 MB each time)."""
    st = os.stat(lib)
    cache = ROOT / "tests" / ".cache" / "nm"
    path = cache / f"{os.path.basename(lib)}-{st.st_size}-{st.st_mtime_ns}.txt"
    if path.exists():
        return path.read_text()
    out = run_child(["nm", "-C", "--defined-only", lib], capture_output=True, text=True, check=True,
                    timeout=600).stdout
    cache.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(f".{os.getpid()}.part")
    part.write_text(out)
    os.replace(part, path)  # whole or absent, for the other worker
    return out


@pytest.fixture(scope="session")
def hello_recording(tmp_path_factory, worker_id):
    """``pttrace run --batch scripts/hello-world.py`` with HELLO_BREAKS; returns (process, session).
    Recorded once per test run: pytest-xdist's workers share the first one's recording (a lock and a
    pickled result in the run's common temporary directory)."""
    from tracer.session import storage

    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    with open(shared / "hello_recording.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "hello_recording.pickle"
        if done.exists():
            proc, path = pickle.loads(done.read_bytes())
            return proc, storage.load(path)
        session_dir = Path(tempfile.mkdtemp(prefix="hello_sessions", dir=shared))
        args = ["run", "--batch", "--session-dir", str(session_dir)]
        for spec in HELLO_BREAKS:
            args += ["--break", spec]
        proc = run_pttrace(*args, str(HELLO))
        files = sorted(session_dir.glob("*.jsonl"))
        assert proc.returncode == 0, proc.stderr
        assert len(files) == 1, (proc.stdout, proc.stderr)
        done.write_bytes(pickle.dumps((proc, files[0])))
        return proc, storage.load(files[0])


@pytest.fixture(scope="session")
def debug_ext() -> Path:
    """The pttrace_demo operator library built with -g -O0 (scripts/build_debug_ext.py; cached)."""
    proc = run_child([PYTHON, str(SCRIPTS / "build_debug_ext.py")], capture_output=True, text=True,
                     timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Path(proc.stdout.strip().splitlines()[-1])
