"""Faults lose nothing and leave nothing behind: crashes, kills, signals, deep and odd stacks, threads.

Every test runs the real pttrace with a real gdb on a real Python that imports torch, and checks
afterwards that no gdb (and no launched target) of its own is still running.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PTTRACE, ROOT, gdb_pids, our_processes, run_pttrace
from tests.support import Lines, allowance, private_mount_prefix, run_child, signalled_when, stop_process, wait_for
from tracer.session import storage

pytestmark = [pytest.mark.gdb, pytest.mark.slow]

TARGETS = ROOT / "tests" / "targets"


def session_file(directory: Path) -> Path:
    files = list(directory.glob("*.jsonl"))
    assert len(files) == 1, files
    return files[0]


def session_in(directory: Path):
    return storage.load(session_file(directory))


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    return [int(a) for a, b in (line.split() for line in out.splitlines()) if int(b) == pid]


def processes_named(fragment: str) -> list[int]:
    """Our own (tagged) processes whose command line contains ``fragment``, zombies excluded."""
    from tests.conftest import _ours

    out = subprocess.run(["ps", "-eo", "pid=,stat=,args="], capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        pid, stat, args = line.split(None, 2)
        if fragment in args and "pytest" not in args and not stat.startswith("Z") and _ours(int(pid)):
            found.append(int(pid))
    return found


def wait_for_hits(directory: Path, n: int, timeout: float = 90) -> None:
    def recorded():
        return any(f.read_text().count('"type":"hit"') >= n for f in directory.glob("*.jsonl"))

    wait_for(recorded, timeout, f"{n} hits recorded in {directory}", step=0.1)


def gone(fragment: str, timeout: float = 30) -> None:
    """Wait until no process of ours runs ``fragment`` (a child being reaped may linger a moment)."""
    wait_for(lambda: not processes_named(fragment), timeout, f"{fragment} to end",
             why=lambda: f"still running: {processes_named(fragment)}")


@pytest.fixture
def no_leftovers():
    before = gdb_pids()
    yield
    # A gdb this test started and that is on its way out is waited for; one that stays fails the test
    # and is killed, so that the next test starts clean.
    try:
        wait_for(lambda: gdb_pids() <= before, 10, "the test's gdb to end", why=lambda: f"{gdb_pids() - before}")
    finally:
        for pid in gdb_pids() - before:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_target_segfault_records_the_crash_path(tmp_path, no_leftovers):
    # (a hit in libz's zlibVersion before the crash, no torch: the claim is about the crash)
    proc = run_pttrace("run", "--batch", "-b", "zlibVersion", "--session-dir", str(tmp_path),
                       "--", str(TARGETS / "crash.py"), "segv", "--no-torch")
    assert proc.returncode == 0, proc.stderr
    s = session_in(tmp_path)
    assert s.info.status == "target-crashed"
    assert s.hits[0].breakpoint == "zlibVersion"
    crash = s.hits[-1]
    assert crash.signal == "SIGSEGV" and crash.breakpoint is None
    py = [f for f in crash.frames if f.kind == "python"]
    assert py[-1].function == "string_at"  # ctypes' own Python wrapper, then the C crash below it
    assert any(f.file.endswith("crash.py") and f.source.startswith("ctypes.string_at(0)") for f in py)
    assert crash.innermost.kind == "native"
    assert not processes_named(str(TARGETS / "crash.py"))


@pytest.mark.parametrize("how,status,code", [("exit3", "completed", 3), ("sigkill", "target-crashed", None)])
def test_target_exit_paths(tmp_path, no_leftovers, how, status, code):
    # (without torch: how the process ends is the claim, a hit before it in libz's zlibVersion)
    proc = run_pttrace("run", "--batch", "-b", "zlibVersion", "--session-dir", str(tmp_path),
                       "--", str(TARGETS / "crash.py"), how, "--no-torch")
    assert proc.returncode == 0, proc.stderr
    s = session_in(tmp_path)
    assert s.info.status == status
    assert s.info.exit_code == code
    assert [h.breakpoint for h in s.hits] == ["zlibVersion"]


def test_pttrace_killed_mid_run_leaves_a_session_whose_frames_are_all_named(tmp_path, no_leftovers):
    # GIVEN a hot breakpoint in libtorch_cpu.so, whose frames gdb gets no names for (the agent records
    # them by library and offset; pttrace's fill records would have named them)
    p = subprocess.Popen([*PTTRACE, "run", "--batch", "-b", "at::_ops::add_Tensor::call", "--session-dir",
                          str(tmp_path), str(ROOT / "bench" / "hot_add.py"), "100000"], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_hits(tmp_path, 20)
        helpers = children_of(p.pid)
        # WHEN pttrace itself is killed, with no chance to write anything more
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=allowance(30))
        wait_for(lambda: not any(_alive(c) for c in helpers), 30, "gdb to end with the pttrace that started it",
                 why=lambda: f"alive: {[c for c in helpers if _alive(c)]}")
    finally:
        stop_process(p)
    # THEN every frame reads back named, its hits in order, even without the fill records written while
    # it ran (pttrace can die before it writes any: they are taken out here)
    (path,) = tmp_path.glob("*.jsonl")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if not line.startswith('{"type":"fill"')))
    s = storage.load(path)
    assert s.info.status == "interrupted" and len(s.hits) >= 20
    assert [h.seq for h in s.hits] == list(range(1, len(s.hits) + 1))
    cpu = [f for h in s.hits for f in h.frames if (f.library or "").endswith("/libtorch_cpu.so")]
    assert cpu and all(f.offset is not None for f in cpu)  # recorded by offset...
    assert all(f.function and f.layer for h in s.hits for f in h.frames if f.kind == "native")  # ...named now
    assert s.hits[-1].innermost.function.startswith("at::_ops::add_Tensor::call(")


@pytest.mark.parametrize("victim", ["gdb", "target"])
def test_kill_9_of_gdb_or_the_target_leaves_a_session_whose_frames_are_all_named(tmp_path, no_leftovers, victim):
    # (gdb killed mid-run: every hit kept, in order, exit 3, the session interrupted and saying why, the launched
    # target gone: what test_gdb_killed_mid_run_keeps_every_hit checked with a run of its own)
    # GIVEN a hot breakpoint in libtorch_cpu.so (its frames recorded by library and offset, named by pttrace)
    p = subprocess.Popen([*PTTRACE, "run", "--batch", "-b", "at::_ops::add_Tensor::call", "--session-dir",
                          str(tmp_path), str(ROOT / "bench" / "hot_add.py"), "100000"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_hits(tmp_path, 20)
        gdbs = [c for c in children_of(p.pid) if c in gdb_pids()]
        assert len(gdbs) == 1
        pid = gdbs[0] if victim == "gdb" else children_of(gdbs[0])[0]
        # WHEN gdb, or the target under it, is killed with SIGKILL mid-run
        os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=allowance(90))
    finally:
        stop_process(p)
    assert p.returncode == (3 if victim == "gdb" else 0), err
    # THEN the session loads with its hits in order, every native frame named
    s = session_in(tmp_path)
    assert s.info.status == ("interrupted" if victim == "gdb" else "target-crashed"), s.info.status
    if victim == "gdb":  # and the session says how gdb ended
        assert any("killed by signal 9" in w for w in s.info.warnings), s.info.warnings
    assert len(s.hits) >= 20 and [h.seq for h in s.hits] == list(range(1, len(s.hits) + 1))
    cpu = [f for frames in s.hits.frame_lists() for f in frames if (f.library or "").endswith("/libtorch_cpu.so")]
    assert cpu and all(f.offset is not None for f in cpu)
    unnamed = [f for frames in s.hits.frame_lists() for f in frames if f.kind == "native" and not f.function]
    assert not unnamed, unnamed[:3]
    assert s.hits[-1].innermost.function.startswith("at::_ops::add_Tensor::call(")
    assert not processes_named(str(ROOT / "bench" / "hot_add.py")), "the launched target survived"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_pttrace_signalled_kills_launched_target_and_saves(tmp_path, no_leftovers, sig):
    # (a loop of libz calls, no torch: the claim is about the run)
    p = subprocess.Popen([*PTTRACE, "run", "--batch", "-b", "zlibVersion", "--session-dir", str(tmp_path), "--",
                          str(TARGETS / "loop.py"), "--no-torch"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = signalled_when(p, lambda: wait_for_hits(tmp_path, 3), sig)
    assert p.returncode == 128 + sig, err
    s = session_in(tmp_path)
    assert s.info.status == "interrupted"
    assert len(s.hits) >= 3
    assert "session saved to" in out
    gone(str(TARGETS / "loop.py"))


def _count(counter: Path) -> int:
    text = counter.read_text().strip()
    return int(text) if text else 0


def _assert_running_untraced(target: subprocess.Popen, counter: Path) -> None:
    """Alive, not stopped, no tracer, and still counting its own calls (its counter file grows by 20: its
    call ran 20 times more after pttrace left)."""
    assert target.poll() is None, "the attached target died"
    with open(f"/proc/{target.pid}/status") as fh:
        status = fh.read()
    assert "TracerPid:\t0" in status, status
    assert "(stopped)" not in status and "(tracing stop)" not in status, status
    start = _count(counter)
    wait_for(lambda: _count(counter) >= start + 20, 30, "the target's own count to grow by 20",
             why=lambda: f"count {start} -> {_count(counter)}, state {_state(target.pid)}")


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return "gone"


def _tracer(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return int(next(line.split()[1] for line in fh if line.startswith("TracerPid:")))


@pytest.mark.parametrize("moment", ["attaching", "recording", "detaching"])
def test_sigint_while_attached_detaches_and_target_lives(tmp_path, no_leftovers, moment):
    # GIVEN a Python calling torch.tensor in a loop (counting its calls in a file), and pttrace attaching;
    # libz's zlibVersion instead of torch but while attaching, whose window is gdb reading torch's symbols
    # (the other two claims are about the run: importing torch took 2.5 s of CPU at load 8)
    counter = tmp_path / "count"
    torch = moment == "attaching"
    target = subprocess.Popen([sys.executable, str(TARGETS / "loop.py"), *([] if torch else ["--no-torch"]),
                               str(counter)], stdout=subprocess.PIPE, text=True)
    p = None
    try:
        assert Lines(target.stdout, "loop.py").next(60).strip() == "looping"
        p = subprocess.Popen([*PTTRACE, "attach", str(target.pid), "--batch", "-b",
                              "THPVariable_tensor" if torch else "zlibVersion",
                              "--session-dir", str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        # WHEN Ctrl-C arrives while gdb is attaching (it has ptrace-attached and reads symbols, no hit
        # recorded yet), while hits are recorded, or again and again while pttrace is already detaching
        if moment == "attaching":
            wait_for(lambda: _tracer(target.pid) or p.poll() is not None, 60, "gdb to attach to the target",
                     why=lambda: f"pttrace's children {children_of(p.pid)}, gdbs {gdb_pids()}")
            assert p.poll() is None
            p.send_signal(signal.SIGINT)
        else:
            wait_for_hits(tmp_path, 3)
            p.send_signal(signal.SIGINT)
            if moment == "detaching":
                # Again and again until gdb has let the target go (its TracerPid): each one comes while the
                # first Ctrl-C's detach is under way, seen, not assumed from a sleep
                again = []

                def let_go() -> bool:
                    if p.poll() is not None or not _tracer(target.pid):
                        return True
                    p.send_signal(signal.SIGINT)
                    again.append(time.monotonic())
                    return False

                wait_for(let_go, 60, "pttrace to detach from the target", step=0.02)
                assert again, "the target was let go before a second Ctrl-C: none came while detaching"
        out, err = p.communicate(timeout=allowance(60))
        # THEN pttrace ends cleanly with 130 (as a Ctrl-C'd program does), says it detached, and the
        # target runs on, untraced, counting
        assert p.returncode == 130, (p.returncode, err)
        s = session_in(tmp_path)
        assert s.info.status == "detached"
        if moment == "attaching":
            assert len(s.hits) == 0, "the Ctrl-C came after the first hit: not while attaching"
        else:
            assert len(s.hits) >= 3
        _assert_running_untraced(target, counter)
        _assert_running_untraced(target, counter)
    finally:
        stop_process(p)
        target.kill()
        target.wait()


def test_deep_recursion_is_capped_and_marked(tmp_path, no_leftovers):
    # (a libz call at the bottom, no torch: the claim is about the depth)
    proc = run_pttrace("run", "--batch", "-b", "zlibCompileFlags", "--max-depth", "300", "--session-dir",
                       str(tmp_path), "--", str(TARGETS / "deep.py"), "--no-torch")
    assert proc.returncode == 0, proc.stderr
    s = session_in(tmp_path)
    hit = s.hits[0]
    assert hit.truncated
    assert len(hit.frames) == 300
    # The innermost frames are the ones kept: the library's function, under the recursion.
    assert hit.innermost.function.startswith("zlibCompileFlags")
    assert sum(1 for f in hit.frames if f.kind == "python" and f.function == "down") >= 250


def test_eight_threads_each_hit_recorded_with_its_thread(tmp_path, no_leftovers):
    # (each thread's calls are libz's, no torch: the claim is about the threads)
    proc = run_pttrace("run", "--batch", "-b", "zlibCompileFlags", "--session-dir", str(tmp_path),
                       "--", str(TARGETS / "threads.py"), "--no-torch")
    assert proc.returncode == 0, proc.stderr
    s = session_in(tmp_path)
    assert len(s.hits) == 40
    by_name: dict[str, int] = {}
    for h in s.hits:
        by_name[h.thread.name] = by_name.get(h.thread.name, 0) + 1
        assert [f.function for f in h.frames if f.kind == "python"][-1] == "work"
    assert by_name == {f"worker-{i}": 5 for i in range(8)}
    assert len({h.thread.lwp for h in s.hits}) == 8


def test_script_path_with_spaces_and_shell_characters_in_args_and_a_non_utf8_name(tmp_path, no_leftovers):
    # GIVEN a script in a directory with spaces, whose own name is not UTF-8 and has a space, and arguments
    # a shell would expand (one run for both odd paths: each is a whole run under gdb; no torch in the
    # target, whose hit is in libz: the claim is about its path and arguments)
    directory = tmp_path / "dir with spaces"
    directory.mkdir()
    odd = os.path.join(os.fsencode(directory), b"my caf\xe9 script.py")
    with open(odd, "wb") as fh:
        fh.write((TARGETS / "argv_echo.py").read_bytes())
    args = ["$HOME", "a b", "; touch /tmp/pttrace-pwned", "`id`", "*"]
    proc = run_child([*PTTRACE, "run", "--batch", "-b", "zlibVersion", "--session-dir", str(tmp_path / "s"),
                      "--", os.fsdecode(odd), *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                     env={**os.environ, "ARGV_ECHO_NO_TORCH": "1"})
    # THEN the target gets its arguments as they were, none of them run by a shell
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("ARGV="))
    assert json.loads(line[5:]) == args
    assert not os.path.exists("/tmp/pttrace-pwned")
    # AND its one hit names the script where it is
    s = session_in(tmp_path / "s")
    assert len(s.hits) == 1
    py = [f for f in s.hits[0].frames if f.kind == "python"]
    assert py[-1].file.startswith(str(directory) + "/my caf") and py[-1].file.endswith(" script.py"), py[-1].file


def test_session_directory_removed_mid_run_is_a_clear_error(tmp_path, no_leftovers):
    sdir = tmp_path / "s"
    p = subprocess.Popen([*PTTRACE, "run", "--batch", "-b", "zlibVersion", "--session-dir", str(sdir),  # no torch
                          "--max-hits", "400", "--", str(TARGETS / "loop.py"), "--no-torch"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_hits(sdir, 2)
        shutil.rmtree(sdir)
        out, err = p.communicate(timeout=allowance(120))
    finally:
        stop_process(p)
    assert p.returncode == 2
    assert "session file" in err and "Traceback" not in err
    assert not processes_named(str(TARGETS / "loop.py"))


def test_disk_full_mid_run_is_a_clear_error_and_keeps_what_was_written(tmp_path, no_leftovers):
    # GIVEN a session directory on a 32 KiB tmpfs (in a private mount namespace: nothing to clean up): the
    # records before the first hit take ~14 KiB and a hit of loop.py ~70 bytes (its stack interned), so the
    # disk fills after ~250 hits, ~5 s (256 KiB took 3,500 hits and a minute of the suite)
    prefix = private_mount_prefix()
    if prefix is None:
        pytest.skip("cannot make a private mount namespace here (unshare refused)")
    full = tmp_path / "full"
    full.mkdir()
    loader = ("import glob, sys; from tracer.session import storage; "
              "s = storage.load(glob.glob(sys.argv[1] + '/*.jsonl')[0]); "
              "print('LOADED', s.info.status, len(s.hits), [h.seq for h in s.hits] == list(range(1, len(s.hits) + 1)))")
    script = ('mount -t tmpfs -o size=32k tmpfs "$1" || exit 99; '
              '"$2" -m tracer run --batch -b zlibVersion --session-dir "$1" -- "$3" --no-torch; echo "RC=$?"; '
              '"$2" -c "$4" "$1"')
    # WHEN the target keeps hitting the breakpoint until the disk is full
    proc = run_child([*prefix, "sh", "-c", script, "sh", str(full), sys.executable,
                      str(TARGETS / "loop.py"), loader], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert "RC=" in proc.stdout, (proc.stdout, proc.stderr)
    # THEN pttrace stops with one clear sentence and exit 2, no hang, and no process left behind
    assert "RC=2" in proc.stdout, proc.stderr
    assert "could not write the session file" in proc.stderr and "No space left on device" in proc.stderr
    assert "Traceback" not in proc.stderr
    # AND every hit written before the disk filled is still there, numbered without gaps
    loaded = next(line for line in proc.stdout.splitlines() if line.startswith("LOADED"))
    _, status, count, contiguous = loaded.split()
    assert status == "interrupted" and int(count) >= 5 and contiguous == "True", loaded
    assert not processes_named(str(TARGETS / "loop.py")), "the launched target survived"


def test_gdb_runs_no_init_file_and_no_auto_load_script_but_the_interpreters_helper(tmp_path, no_leftovers):
    # GIVEN scripts gdb would run without -nx and a strict auto-load path: a .gdbinit in the working
    # directory, one in $HOME and in $XDG_CONFIG_HOME, and a -gdb.py beside a library the target loads
    marks = tmp_path / "marks"
    marks.mkdir()
    home = tmp_path / "home"
    (home / ".config" / "gdb").mkdir(parents=True)
    for i, init in enumerate([tmp_path / ".gdbinit", home / ".gdbinit", home / ".config" / "gdb" / "gdbinit"]):
        init.write_text(f"shell touch {marks}/init{i}\npython open({str(marks / f'py{i}')!r}, 'w').close()\n")
    lib = tmp_path / "libevil.so"
    shutil.copy(next(p for p in ("/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1")
                     if os.path.exists(p)), lib)
    (tmp_path / "libevil.so-gdb.py").write_text(f"open({str(marks / 'autoload')!r}, 'w').close()\n")
    script = tmp_path / "t.py"
    # (no torch: the claim is gdb's and the target's libraries', and a hit in the library with the -gdb.py
    # beside it is one; importing torch took 2.5 s of CPU at load 8)
    script.write_text(f"import ctypes\nctypes.CDLL({str(lib)!r}).zlibVersion()\n")
    # WHEN pttrace traces it from that directory, with that home (its caches where they were: an empty
    # $HOME/.cache made this a cold run, every index and CFI copy rebuilt, 3x the time and nothing more shown)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    proc = run_pttrace("run", "--batch", "-b", "zlibVersion", "--session-dir", str(tmp_path / "s"),
                       str(script), cwd=tmp_path, env={"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                                                       "XDG_CACHE_HOME": cache, "PYTHONPATH": str(ROOT)})
    # THEN the run records its hit, in that library, and none of those scripts ran
    assert proc.returncode == 0, proc.stderr
    (hit,) = session_in(tmp_path / "s").hits
    assert hit.innermost.library == str(lib), (hit.innermost.function, hit.innermost.library)
    assert list(marks.iterdir()) == []


def test_the_interpreter_typed_first_as_after_gdbs_args_is_the_one_traced(tmp_path, no_leftovers):
    # GIVEN `pttrace run -- /usr/bin/python3.11 SCRIPT ARGS`, as one types `gdb --args python SCRIPT` (it ran the
    # venv's python on the interpreter's ELF file as a script: "SyntaxError: source code cannot contain null bytes")
    debian = "/usr/bin/python3.11"
    if not os.path.exists(debian):
        pytest.skip("no Debian python3.11")
    proc = run_pttrace("run", "--batch", "--max-hits", "1", "-b", "zlibVersion", "--session-dir", str(tmp_path), "--",
                       debian, str(TARGETS / "loop.py"), "--no-torch")
    # THEN that interpreter runs the script and is the session's
    assert proc.returncode == 0, proc.stderr
    s = session_in(tmp_path)
    assert s.info.python == "%d.%d.%d" % tuple(int(x) for x in run_child(
        [debian, "-c", "import sys; print(*sys.version_info[:3])"], capture_output=True, text=True).stdout.split())
    assert s.processes[0].argv[:2] == [debian, str(TARGETS / "loop.py")], s.processes[0].argv
    assert len(s.hits) == 1 and s.hits[0].innermost.function == "zlibVersion"


@pytest.mark.parametrize("case", ["missing-script", "dir-script", "bad-python", "no-gdb", "old-gdb", "bad-spec",
                                  "launcher-python", "two-pythons"])
def test_bad_input_is_one_sentence_and_exit_2(tmp_path, no_leftovers, case):
    env = {}
    args = ["run", "--batch", "--session-dir", str(tmp_path), "-b", "THPVariable_tensor"]
    if case == "missing-script":
        args += ["scripts/hello-wrld.py"]
        expect = "script not found"
    elif case == "dir-script":
        args += ["scripts"]
        expect = "not a readable file"
    elif case == "bad-python":
        args += ["--python", "/bin/true", "scripts/hello-world.py"]
        expect = "not a Python interpreter"
    elif case == "no-gdb":
        env = {"PTTRACE_GDB": str(tmp_path / "no-such-gdb")}
        args += ["scripts/hello-world.py"]
        expect = "gdb is not installed"
    elif case == "old-gdb":
        fake = tmp_path / "gdb"
        fake.write_text("#!/bin/sh\necho 'GNU gdb (GDB) 9.2'\n")
        fake.chmod(0o755)
        env = {"PTTRACE_GDB": str(fake)}
        args += ["scripts/hello-world.py"]
        expect = "needs gdb 12.1 or newer"
    elif case == "launcher-python":  # pyenv's shims are shell scripts: gdb cannot run them
        shim = tmp_path / "python3"
        shim.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
        shim.chmod(0o755)
        args += [str(shim), "scripts/hello-world.py"]
        expect = "is a launcher"
    elif case == "two-pythons":
        args += ["--python", "/usr/bin/python3.11", sys.executable, "scripts/hello-world.py"]
        expect = "two interpreters"
    else:
        args += ["-b", "*0xzz", "scripts/hello-world.py"]
        expect = "gdb rejects the breakpoint '*0xzz'"
    proc = run_pttrace(*args, env=env)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert expect in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


# A gdb that dies during pttrace's start-up, after the session file is opened: the real gdb runs behind a
# wrapper that passes pttrace's commands on, and at the target's terminal (``-inferior-tty-set``, sent once the
# session file is open) kills gdb, leaves a mark, and kills itself with SIGKILL (the gdb pttrace started).
DYING_GDB = """
import os, signal, subprocess, sys
if "--version" in sys.argv:
    os.execvp("gdb", ["gdb", *sys.argv[1:]])
gdb = subprocess.Popen(["gdb", *sys.argv[1:]], stdin=subprocess.PIPE)
for line in sys.stdin.buffer:
    if b"-inferior-tty-set" in line:
        gdb.kill()
        gdb.wait()
        open(os.environ["DYING_GDB_MARK"], "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    gdb.stdin.write(line)
    gdb.stdin.flush()
"""


def test_gdb_dying_during_start_up_ends_the_session_with_why(tmp_path, no_leftovers, capsys, monkeypatch):
    wrapper, mark, sessions = tmp_path / "dying-gdb", tmp_path / "killed", tmp_path / "s"
    wrapper.write_text(f"#!{sys.executable}\n{DYING_GDB}")
    wrapper.chmod(0o755)
    before = set(our_processes())
    # WHEN gdb dies while pttrace sets it up
    proc = run_pttrace("run", "--batch", "--gdb", str(wrapper), "-b", "THPVariable_tensor", "--session-dir",
                       str(sessions), str(TARGETS / "loop.py"), env={"DYING_GDB_MARK": str(mark)})
    assert mark.exists(), proc.stderr  # it died where the test made it die, not earlier
    # THEN pttrace says so in one sentence and exits 3 (gdb died), as when gdb dies while the target runs
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr == "pttrace: gdb exited during start-up (killed by signal 9).\n"
    # AND the session file on disk ends with an end record that gives the reason (a warning too: every view
    # shows it), not as a recording cut off while it ran
    (path,) = sessions.glob("*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[0]["type"] == "header"
    assert records[-1]["type"] == "end" and records[-1]["status"] == "failed"
    assert records[-1]["reason"] == "gdb exited during start-up (killed by signal 9)."
    s = storage.load(path)
    assert s.info.status == "failed" and s.info.ended
    told = "the recording did not start: gdb exited during start-up (killed by signal 9)."
    assert told in s.info.warnings
    # AND the breakpoint asked for is listed, as not set and why (the session still says what was asked)
    assert [(b.spec, b.error, b.locations) for b in s.breakpoints] == [
        ("THPVariable_tensor", "the recording did not start", [])]
    # AND every view names it failed, in the yellow of the other ends that are not `completed`, with the reason
    views_of_a_failed_session(path, told, capsys, monkeypatch)
    # AND nothing of the run is left: no gdb, no target (a probe of the interpreter pttrace left to finish
    # on its own, when its answer was not cached yet, ends within the deadline)
    wait_for(lambda: not set(our_processes()) - before, 60, "every process of the run to end",
             why=lambda: f"still running: {set(our_processes()) - before}")


def views_of_a_failed_session(path: Path, told: str, capsys, monkeypatch) -> None:
    """`pttrace sessions` and `show`, the markdown and JSON exports and the TUI's view of a session whose
    start-up failed: each says `failed` and ``told`` (the warning with the reason)."""
    from tracer.cli import main
    from tests.tui.support import run_pilot, wait_until
    from tracer.tui.app import make_app
    from tracer.tui.sources import SessionSource

    yellow = "\x1b[33m"
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich writes its colours as for a terminal
    monkeypatch.delenv("COLUMNS", raising=False)  # and its lines whole, as into a pipe
    assert main(["sessions", "--session-dir", str(path.parent)]) == 0
    out = capsys.readouterr().out
    assert f"{yellow}failed" in out and f"{yellow}{told}" in out, out
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{yellow}  failed" in out and f"{yellow}warning: {told}" in out, out
    notes = path.parent / "notes.md"
    assert main(["export", str(path), "-o", str(notes)]) == 0
    rows = dict((cell.strip() for cell in line.strip().strip("|").split("|", 1))
                for line in notes.read_text().splitlines() if line.startswith("| **"))
    assert rows["**status**"] == "failed" and told in rows["**warnings**"].split("<br>"), rows
    assert "not set: the recording did not start" in notes.read_text()  # the breakpoint asked for
    capsys.readouterr()
    assert main(["export", str(path), "--format", "json"]) == 0
    exported = json.loads(capsys.readouterr().out)["session"]
    assert exported["status"] == "failed" and told in exported["warnings"]

    async def view():
        app = make_app(SessionSource.open(path))
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: app.state.finished)
            line = str(app.query_one("#warnings").render())  # the warnings' own line, not the output pane
            status = str(app.query_one("#status").render())
            assert "recorded, failed" in status and f"1 warning (w lists them)  {told}" in line, (status, line)
            await pilot.press("q")

    run_pilot(view())


def test_a_fault_of_pttrace_while_gdb_is_set_up_ends_the_session_with_why(tmp_path, monkeypatch, no_leftovers):
    # GIVEN a real run whose start-up meets a fault of pttrace's own once the session file is open (the
    # breakpoints' arming raises what no part of pttrace expects)
    from tracer.recorder import Recorder, TraceConfig, startup

    def arm(*args, **kwargs):
        raise RuntimeError("a fault while arming")

    monkeypatch.setattr(startup, "arm", arm)
    recorder = Recorder(TraceConfig(breakpoints=("THPVariable_tensor",), script=str(TARGETS / "loop.py"),
                                    session_dir=tmp_path, forward_output=False, forward_input=False))
    # WHEN it starts THEN the fault comes out as it was (a bug: its traceback), gdb is gone, and the session
    # file ends with an end record that says what happened
    with pytest.raises(RuntimeError, match="a fault while arming"):
        recorder.start()
    assert recorder.mi is not None and recorder.mi.proc.poll() is not None
    end = json.loads(session_file(tmp_path).read_text().splitlines()[-1])
    assert (end["type"], end["status"]) == ("end", "failed")
    assert end["reason"] == "pttrace failed during start-up: RuntimeError: a fault while arming"
    assert session_in(tmp_path).info.status == "failed"


def test_a_fault_of_the_tui_between_start_up_and_run_ends_the_session_with_why(tmp_path, monkeypatch,
                                                                                  no_leftovers):
    # GIVEN the TUI's live source over a real recorder, which fails after the recorder started (gdb set up,
    # the session open) and before its run began
    from tracer.recorder import TraceConfig
    from tracer.tui.sources import LiveSource

    source = LiveSource(TraceConfig(breakpoints=("THPVariable_tensor",), script=str(TARGETS / "loop.py"),
                                    session_dir=tmp_path, live=True, forward_output=False, forward_input=False))

    def started_up(emit):
        raise RuntimeError("a fault of the UI's")

    monkeypatch.setattr(source, "_started_up", started_up)
    events: list = []
    # WHEN it runs THEN the fault comes out, the recording is ended (gdb gone) and its session says why
    with pytest.raises(RuntimeError, match="a fault of the UI's"):
        source.run(events.append)
    assert source.finished and source.engine.mi.proc.poll() is not None
    end = json.loads(session_file(tmp_path).read_text().splitlines()[-1])
    assert end["type"] == "end" and end["reason"] == "pttrace failed: RuntimeError: a fault of the UI's"
    assert session_in(tmp_path).info.status == "interrupted"
    gone(str(TARGETS / "loop.py"))


def test_attach_to_a_process_already_traced(tmp_path, no_leftovers):
    # The child asks to be traced by its parent (this test), so it has a tracer already.
    code = ("import ctypes, time; ctypes.CDLL(None).ptrace(0, 0, 0, 0); print('traced', flush=True); "
            "time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert Lines(child.stdout, "the traced child").next(60).strip() == "traced"
        proc = run_pttrace("attach", str(child.pid), "--batch", "-b", "x", "--session-dir", str(tmp_path))
        assert proc.returncode == 2
        assert "already being traced" in proc.stderr
    finally:
        child.kill()
        child.wait()


def test_attach_to_a_kernel_thread_is_refused_in_one_sentence(tmp_path, no_leftovers):
    # (with --force it reached gdb, failed inside the TUI's worker, and the TUI ended with exit 0 and no word)
    with open("/proc/2/comm") as fh:
        comm = fh.read().strip()  # kthreadd, the parent of the kernel's threads
    proc = run_pttrace("attach", "--force", "2", "--batch", "-b", "x", "--session-dir", str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"pttrace: process 2 ({comm}) is a kernel thread: it runs no program to attach to.\n"
    assert list(tmp_path.iterdir()) == []


# pttrace run under a child subreaper: a process pttrace started and left behind is re-parented to this
# wrapper, which lists it (pid and command line), then kills and reaps it so that the test leaves nothing.
SUBREAPER = """
import ctypes, json, os, signal, subprocess, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
left = []
for entry in os.listdir("/proc"):
    try:
        with open(f"/proc/{entry}/stat") as fh:
            ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        if ppid != os.getpid():
            continue
        with open(f"/proc/{entry}/cmdline", "rb") as fh:
            left.append([int(entry), fh.read().replace(b"\\0", b" ").decode(errors="replace")])
    except (OSError, ValueError, IndexError):
        continue
for pid, _ in left:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass
print(json.dumps({"rc": done.returncode, "stderr": done.stderr, "left": left}))
"""


# A gdb that fails pttrace's start-up once a probe of pttrace's (an interpreter it started) runs: it waits
# for one among its siblings, writes its pid to the mark, and exits with 1 (its --version is the real gdb's).
PROBE_WAITING_GDB = """#!%s
import os, sys, time
if "--version" in sys.argv:
    os.execvp("gdb", ["gdb", *sys.argv[1:]])
end = time.monotonic() + float(os.environ["PROBE_WAIT"])
while time.monotonic() < end:
    for entry in (e for e in os.listdir("/proc") if e.isdigit()):
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getppid() and int(entry) != os.getpid() and b"-m" not in argv:
            open(os.environ["PROBE_MARK"], "w").write(entry)
            sys.exit(1)
    time.sleep(0.05)
sys.exit(1)
"""


def test_a_failed_start_up_with_an_empty_cache_leaves_no_process_behind(tmp_path):
    # An empty cache: the torch-facts probes (layout, key numbering) run in the background while gdb
    # starts; this gdb fails as soon as one of them runs, so pttrace exits while it does.
    gdb = tmp_path / "gdb"
    gdb.write_text(PROBE_WAITING_GDB % sys.executable)
    gdb.chmod(0o755)
    mark = tmp_path / "probe"
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), PTTRACE_GDB=str(gdb), PROBE_MARK=str(mark),
               PROBE_WAIT=str(allowance(120)))
    proc = run_child([sys.executable, "-c", SUBREAPER, *PTTRACE, "run", "--batch", "--session-dir",
                      str(tmp_path / "sessions"), "-b", "THPVariable_tensor", "scripts/hello-world.py"],
                     cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["rc"] != 0 and "Traceback" not in out["stderr"], out
    assert mark.exists(), f"no probe of pttrace's ran while gdb started: {out}"
    assert out["left"] == [], f"processes pttrace left running: {out['left']}"


def _gdb_child(pid: int) -> bool:
    for child in children_of(pid):
        try:
            with open(f"/proc/{child}/comm") as fh:
                if fh.read().strip() == "gdb":
                    return True
        except OSError:
            pass
    return False


@pytest.mark.parametrize("moment", ["gdb-spawned", "session-open"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_pttrace_starts_ends_it_cleanly(tmp_path, no_leftovers, sig, moment):
    # GIVEN pttrace starting a run: its gdb spawned first, its threads (gdb's readers, the torch facts, the
    # CFI copies, the key tables) importing pttrace's modules beside the main thread. A KeyboardInterrupt
    # raised in that main thread once landed inside importlib's lock bookkeeping and left the import lock
    # held: pttrace hung for ever with its gdb and the target stopped (commands/_signals.py).
    p = subprocess.Popen([*PTTRACE, "run", "--batch", "-b", "zlibVersion", "--session-dir", str(tmp_path), "--",
                          str(TARGETS / "loop.py"), "--no-torch"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        if moment == "gdb-spawned":
            wait_for(lambda: _gdb_child(p.pid) or p.poll() is not None, 30, "pttrace's gdb to start", step=0.005)
        else:
            wait_for(lambda: any(tmp_path.glob("*.jsonl")) or p.poll() is not None, 30, "the session file",
                     step=0.005)
        assert p.poll() is None, p.communicate()
        # WHEN the signal comes
        p.send_signal(sig)
        # THEN pttrace ends promptly, says why, and its session (if the file was open) ends with the reason
        out, err = p.communicate(timeout=allowance(30))
    finally:
        stop_process(p)
    assert p.returncode == 128 + sig, (out, err)
    assert "Traceback" not in err, err
    files = list(tmp_path.glob("*.jsonl"))
    if moment == "session-open" or files:
        # (the session file was open: it ends with the reason, as a later signal's does)
        s = session_in(tmp_path)
        assert s.info.status == "interrupted"
        end = json.loads(session_file(tmp_path).read_text().splitlines()[-1])
        assert end["type"] == "end" and end["reason"] == {signal.SIGINT: "sigint", signal.SIGTERM: "sigterm"}[sig]
    else:
        # (before it: one sentence, nothing left on disk)
        assert err.strip() == f"pttrace: interrupted ({signal.Signals(sig).name}) while starting: nothing was recorded."
    gone(str(TARGETS / "loop.py"))


def test_a_signal_at_any_moment_of_the_first_hits_leaves_the_end_record_last(tmp_path, no_leftovers):
    # GIVEN runs of a loop of libz calls, each signalled at another moment after its target started: during
    # the stop for libz's load and the continue after it, the first hit (the agent writing it from inside
    # gdb) and the ones after. pttrace counted the target "running" only from gdb's *running, which follows
    # the continue's ^running: a SIGHUP in between sent no interrupt, and gdb went on into a hit whose record
    # the agent wrote after the end record (test_hangup's [record] case failed in 2 suites of 3).
    for n, delay in enumerate([0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2]):
        folder = tmp_path / str(n)
        p = subprocess.Popen([*PTTRACE, "run", "--batch", "-b", "zlibVersion", "--session-dir", str(folder), "--",
                              str(TARGETS / "loop.py"), "--no-torch"], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            def started() -> bool:
                files = list(folder.glob("*.jsonl")) if folder.exists() else []
                return bool(files) and '"started"' in files[0].read_text() or p.poll() is not None
            wait_for(started, 60, "the target's start in the session", step=0.002)
            time.sleep(delay)
            # WHEN SIGTERM comes
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=allowance(30))
        finally:
            stop_process(p)
        # THEN the end record is the session's last line, every hit before it
        assert p.returncode == 143, (delay, out, err)
        lines = [json.loads(line) for line in session_file(folder).read_text().splitlines()]
        kinds = [rec["type"] for rec in lines]
        assert kinds[-1] == "end" and kinds.count("end") == 1, (delay, kinds[-5:])
        assert lines[-1]["reason"] == "sigterm", (delay, lines[-1])
        gone(str(TARGETS / "loop.py"))


def test_a_hangup_the_shell_ignores_is_ignored_as_under_nohup(tmp_path, no_leftovers):
    # GIVEN pttrace started as `nohup` starts it: SIGHUP ignored from the parent on
    p = subprocess.Popen([*PTTRACE, "run", "--batch", "-b", "zlibVersion", "--timeout", str(allowance(4)),
                          "--session-dir", str(tmp_path), "--", str(TARGETS / "loop.py"), "--no-torch"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    # WHEN the terminal hangs up mid-run
    out, err = signalled_when(p, lambda: wait_for_hits(tmp_path, 3), signal.SIGHUP)
    # THEN the run goes on to its own end (--timeout), not the hang-up's
    assert p.returncode == 0, err
    end = json.loads(session_file(tmp_path).read_text().splitlines()[-1])
    assert end["reason"] == "timeout", end
