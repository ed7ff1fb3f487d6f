"""Waiting on real processes without guessing: one deadline rule, one way to read a child's output.

A test waits for something it can observe (a hit in the session file, a line the target printed, a
process gone), never for a fixed time. Deadlines stretch with the machine's load (``allowance``), so a
test that fails on a loaded machine failed because the thing never happened, not because it was late.
"""
from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from typing import Callable, IO, TypeVar

T = TypeVar("T")


def allowance(seconds: float) -> float:
    """A time limit stretched when the machine runs more than it has cores for: the limit says the code
    under test is not blocked by its own work, not that a shared machine is idle."""
    return seconds * max(1.0, _load() / (os.cpu_count() or 1))


def _load() -> float:
    """The 1-minute load average, or the threads runnable right now when more (the average lags a burst:
    another test worker starting gdb over libtorch while this one measures)."""
    try:
        with open("/proc/loadavg") as fh:
            running = int(fh.read().split()[3].split("/")[0]) - 1  # less the one reading it
    except (OSError, ValueError, IndexError):
        running = 0
    return max(os.getloadavg()[0], float(running))


def wait_for(condition: Callable[[], T], timeout: float = 30.0, what: str | None = None,
             why: Callable[[], str] | None = None, step: float = 0.02) -> T:
    """Poll ``condition`` until it returns something true and return that; after ``allowance(timeout)``
    fail with ``what`` (or the condition's docstring) and ``why()``, the state the test saw."""
    limit = allowance(timeout)
    end = time.monotonic() + limit
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            said = what or condition.__doc__ or getattr(condition, "__name__", repr(condition))
            state = f"; {why()}" if why is not None else ""
            raise AssertionError(f"timed out after {limit:.1f} s waiting for {said}{state}")
        time.sleep(step)


class ChildEnded(AssertionError):
    """The child closed its output before saying what the test waited for."""


class Lines:
    """A child's output read line by line by a thread, so that every read has a deadline: a child that
    hangs fails the test after the deadline, one that ends (EOF) fails it at once with what it said."""

    def __init__(self, stream: IO, name: str = "the child"):
        self.name = name
        self.seen: list = []
        self._queue: "queue.Queue" = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO) -> None:
        try:
            for line in stream:
                self._queue.put(line)
        except (OSError, ValueError):  # the test closed the pipe while the thread read it
            pass
        self._queue.put(None)

    def _get(self, seconds: float):
        """The next line within ``seconds`` (already scaled); ChildEnded at EOF."""
        try:
            line = self._queue.get(timeout=max(0.0, seconds))
        except queue.Empty:
            raise AssertionError(f"{self.name} said nothing for {seconds:.1f} s; last lines: {self.seen[-5:]}")
        if line is None:
            self._queue.put(None)  # EOF stays EOF for the next read
            raise ChildEnded(f"{self.name} closed its output; last lines: {self.seen[-5:]}")
        self.seen.append(line)
        return line

    def next(self, timeout: float = 30.0):
        """The next line (with its newline); ChildEnded at EOF, AssertionError after the deadline."""
        return self._get(allowance(timeout))

    def until(self, predicate: Callable[[str], bool], timeout: float = 30.0):
        """The first line ``predicate`` accepts, within one deadline for all the lines read on the way."""
        end = time.monotonic() + allowance(timeout)
        while True:
            line = self._get(end - time.monotonic())
            if predicate(line):
                return line

    def fresh(self, predicate: Callable[[str], bool], quiet: float = 0.1, timeout: float = 30.0):
        """A line ``predicate`` accepts that the child printed now, not one waiting in the pipe: the first
        accepted line read after no line came for ``quiet`` seconds (the child between two steps)."""
        end = time.monotonic() + allowance(timeout)
        while True:
            try:
                self._get(min(quiet, end - time.monotonic()))
            except ChildEnded:
                raise
            except AssertionError:  # quiet: what comes next is printed from now on
                break
            if time.monotonic() > end:
                raise AssertionError(f"{self.name} never paused between two lines; last lines: {self.seen[-5:]}")
        return self.until(predicate, max(0.1, (end - time.monotonic()) / max(1.0, allowance(1.0))))


def signalled_when(proc: subprocess.Popen, ready, sig: int, timeout: float = 60.0) -> tuple[str, str]:
    """``proc`` sent ``sig`` once ``ready()`` has returned (a wait that raises when it times out), then its
    output once it ended (``timeout`` scaled by the load); stopped with everything it started whatever happens."""
    try:
        ready()
        proc.send_signal(sig)
        return proc.communicate(timeout=allowance(timeout))
    finally:
        stop_process(proc)


def stop_process(proc: subprocess.Popen | None, timeout: float = 30.0) -> None:
    """Kill a process this test started if it still runs, with everything it started (``kill_tree``), and
    reap it (a fixture's last word)."""
    if proc is None:
        return
    if proc.poll() is None:
        kill_tree(proc)
    try:
        proc.wait(timeout=allowance(timeout))
    except subprocess.TimeoutExpired:
        pass


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (every thread's ``children`` list in /proc)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                found += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return found


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` and every process under it. Not its process group: pttrace starts gdb in a
    session of its own (a Ctrl-C must reach pttrace only), so the group would leave gdb and the target
    behind. Each process is stopped before its children are listed, so none forks a new one or dies and
    hands its children to init (out of the walk's reach) between the listing and the kill."""
    if proc.poll() is not None:
        return
    frozen: list[int] = []
    todo = [proc.pid]
    while todo:
        pid = todo.pop()
        if pid in frozen:
            continue
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            continue
        frozen.append(pid)
        todo += _children(pid)
    for pid in frozen:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def run_child(argv: list, timeout: float = 300.0, check: bool = False, capture_output: bool = False,
        input=None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` whose limit stretches with the load (``allowance``) and which, when the limit
    passes or the test is interrupted, kills the child and everything it started (``kill_tree``):
    ``subprocess.run`` kills only the child, and pttrace's gdb and target would run on."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    limit = allowance(timeout)
    with subprocess.Popen(argv, **kwargs) as proc:
        try:
            out, err = proc.communicate(input, timeout=limit)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            try:
                out, err = proc.communicate(timeout=allowance(30))
            except subprocess.TimeoutExpired:  # something that escaped the walk holds the pipe
                out = err = None
            raise subprocess.TimeoutExpired(proc.args, limit, out, err) from None
        except BaseException:
            kill_tree(proc)
            raise
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check:
        result.check_returncode()
    return result


def private_mount_prefix() -> list[str] | None:
    """``unshare`` arguments for a private mount namespace (a user namespace too when not root): mounts
    made in it vanish with its last process, so a test has nothing to clean up."""
    if not shutil.which("unshare"):
        return None
    flags = ["--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        flags = ["--user", "--map-root-user", *flags]
    probe = subprocess.run(["unshare", *flags, "true"], capture_output=True)
    return ["unshare", *flags] if probe.returncode == 0 else None


def fifo_line(path, proc: subprocess.Popen, timeout: float = 120.0) -> str:
    """The first line a child writes into the fifo at ``path``, within a deadline; the child's end first
    fails at once (a plain ``open`` of a fifo waits for a writer forever)."""
    end = time.monotonic() + allowance(timeout)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opens at once; the writer's open then goes through
    data = b""
    try:
        while b"\n" not in data:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:  # a writer is there, with nothing written yet
                chunk = b""
            data += chunk
            if chunk:
                continue
            if proc.poll() is not None:
                raise ChildEnded(f"the child ended ({proc.returncode}) before writing a line into {path}")
            if time.monotonic() > end:
                raise AssertionError(f"nothing written into {path} in {allowance(timeout):.0f} s: {data!r}")
            time.sleep(0.01)
    finally:
        os.close(fd)
    return data.decode(errors="replace").split("\n", 1)[0] + "\n"


UNNAMED_FRAMES = "have no function name"  # tracer/recorder/tailer.py's unnamed_warning
# Debian's libffi8 (3.4.4-1) has no .symtab: a ctypes call's ffi_call_unix64 and ffi_call_int are nameless
# (its .dynsym has only the exported functions) and apt here has no debug package for it.
LIBFFI = "libffi.so.8"


def unnamed_frames_in(warning: str) -> str | None:
    """The library an unnamed-frames warning names (its file name), None for any other warning."""
    if UNNAMED_FRAMES not in warning or not warning.split(": ")[-1:]:
        return None
    head = warning.split(" have no function name", 1)[0]
    if head.startswith("process ") and ": " in head:  # a child's, merged into the session
        head = head.split(": ", 1)[1]
    return os.path.basename(head.removeprefix("frames in ")) if head.startswith("frames in ") else ""


def assert_only_unnamed(warnings, *libraries: str) -> None:
    """The session's warnings are exactly one unnamed-frames warning for each of ``libraries`` (file names, e.g.
    "libffi.so.8": what this machine's libraries lack, checked as such), and nothing else."""
    told = [unnamed_frames_in(w) for w in warnings]
    others = [w for w, lib in zip(warnings, told) if lib is None]
    assert not others and sorted(told) == sorted(libraries), (list(libraries), list(warnings))
