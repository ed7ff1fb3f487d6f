"""Raw ptrace for the stops gdb lost (recorder/watchdog.py): run inside gdb, whose main thread is the
tracer of every process it debugs, so only it may read a stop's siginfo, continue it or detach it.

gdb 13 in all-stop mode with ``schedule-multiple`` can lose events under a fork storm (measured: 200
children each hitting one breakpoint hung 4 runs in 7): a parent left in its fork's event stop and the new
child in its first stop, both held by gdb, while gdb believes them running and waits in poll for ever.
"""
from __future__ import annotations

import json
import os
import signal
from functools import lru_cache

PTRACE_CONT = 7
PTRACE_DETACH = 17
PTRACE_GETSIGINFO = 0x4202
EVENTS = {1: "fork", 2: "vfork", 3: "clone", 4: "exec", 5: "vfork-done", 6: "exit", 7: "seccomp"}


@lru_cache(maxsize=None)
def _libc():
    """ctypes and libc's ptrace, at the first rescue rather than with the agent: ctypes was ~3% of the agent's
    import (8M instructions of 280M), which gdb does before the target may start, for a rare request."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = (ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)
    return ctypes, libc


def _ptrace(request: int, pid: int, addr: int = 0, data: int = 0) -> None:
    ctypes, libc = _libc()
    if libc.ptrace(request, pid, addr, data) == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def stop_info(tid: int) -> dict:
    """What a thread in ptrace-stop stopped for: a ptrace event (fork, clone...) or a signal."""
    ctypes = _libc()[0]
    buf = ctypes.create_string_buffer(128)
    try:
        _ptrace(PTRACE_GETSIGINFO, tid, 0, ctypes.addressof(buf))
    except OSError as exc:
        return {"tid": tid, "error": exc.strerror}
    signo = int.from_bytes(buf.raw[0:4], "little", signed=True)
    code = int.from_bytes(buf.raw[8:12], "little", signed=True)
    event = EVENTS.get(code >> 8) if signo == signal.SIGTRAP else None
    return {"tid": tid, "signo": signo, "signal": signal.Signals(signo).name if signo in signal.valid_signals()
            else str(signo), "event": event}


def resume(tid: int, sig: int) -> None:
    _ptrace(PTRACE_CONT, tid, 0, sig)


def release_held(pid: int) -> None:
    """Detach a process and leave it stopped (SIGSTOP delivered as it goes), for a recorder of its own."""
    _ptrace(PTRACE_DETACH, pid, 0, int(signal.SIGSTOP))


def command(arg: str) -> str:
    """``info TID...`` / ``resume TID SIG`` / ``release PID``: the answer as one JSON line."""
    words = arg.split()
    if not words:
        return json.dumps({"error": "no request"})
    try:
        numbers = [int(w) for w in words[1:]]
        if words[0] == "info":
            return json.dumps([stop_info(t) for t in numbers])
        if words[0] == "resume" and len(numbers) == 2:
            resume(numbers[0], numbers[1])
            return json.dumps({"ok": True})
        if words[0] == "release" and len(numbers) == 1:
            release_held(numbers[0])
            return json.dumps({"ok": True})
    except (OSError, ValueError) as exc:
        return json.dumps({"error": str(exc)})
    return json.dumps({"error": f"unknown request {arg!r}"})
