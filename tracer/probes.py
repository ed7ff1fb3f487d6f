"""The interpreters pttrace starts to ask a torch build its facts (layout probe, key numbering, dispatch
tables, where torch is), tracked so that none outlives pttrace.

These run on background threads while gdb starts (commands/ops.py ``_in_background``); a start-up that
fails early used to exit with such a probe still importing torch, orphaned for seconds. ``end_all()`` runs
at pttrace's exit (atexit, registered with the first probe): every probe still running is ended and reaped,
and none starts after it.
"""
from __future__ import annotations

import _thread
import atexit

TYPE_CHECKING = False  # not typing's (a warm `where` does not import typing); mypy still reads the block
if TYPE_CHECKING:
    import subprocess
# subprocess itself is imported where a probe starts: a warm `pttrace where` starts none, and its imports are
# kept to what it uses (tests/integration/test_where.py), ~5 ms of its 65.

_lock = _thread.allocate_lock()  # _thread, not threading: ~1 ms of a warm `pttrace where`
_running: set[subprocess.Popen] = set()
_closed = False
_registered = False
# SIGTERM first: a probe that has imported torch ends in milliseconds; SIGKILL after this many seconds.
_GRACE = 2.0


class ProbesClosed(OSError):
    """pttrace is exiting: no probe starts any more (raised to the background thread that asked)."""


def popen(cmd: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(cmd, **kwargs)``, ended at pttrace's exit unless ``done()`` was said first."""
    import subprocess

    global _registered
    with _lock:  # under the lock: end_all() either sees this process or refuses to start it
        if _closed:
            raise ProbesClosed("pttrace is exiting")
        if not _registered:
            atexit.register(end_all)
            _registered = True
        proc = subprocess.Popen(cmd, **kwargs)
        _running.add(proc)
    return proc


def done(proc: subprocess.Popen) -> None:
    with _lock:
        _running.discard(proc)


def run(cmd: list[str], *, timeout: float, input: str | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, timeout=...)``, the process tracked while it runs."""
    import subprocess

    proc = popen(cmd, stdin=subprocess.PIPE if input is not None else None, stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True, **kwargs)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    finally:
        done(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def end_all() -> list[int]:
    """End and reap every probe still running; no probe starts after this. Their pids."""
    import subprocess

    global _closed
    with _lock:
        _closed = True
        procs = list(_running)
        _running.clear()
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return [p.pid for p in procs]
