"""A process pttrace holds stopped (SIGSTOP) is continued even if pttrace dies while it holds it.

A child that executed Python waits, stopped, while a recorder of its own starts and attaches (a second or
two; children.py). If pttrace is killed meanwhile (SIGKILL, the machine's OOM killer), nothing of it is
left to send the SIGCONT. So a small process of its own, started at the first hold, is told each pid on a
pipe ("+PID" held, "-PID" let go); when the pipe closes, pttrace's end whatever it was, it continues every
pid still held, and ends. It runs in a session of its own, so that the terminal's Ctrl-C does not end it
first.
"""
from __future__ import annotations

import logging
import subprocess
import sys
import threading

log = logging.getLogger("pttrace.recorder")

_KEEPER = """\
import os, signal, sys
held = set()
for line in sys.stdin:
    op, pid = line[:1], line[1:].strip()
    if pid.isdigit():
        (held.add if op == "+" else held.discard)(int(pid))
for pid in held:
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError:
        pass
"""


class Keeper:
    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def held(self, pid: int) -> None:
        """Before the SIGSTOP: the keeper continues ``pid`` if pttrace ends before ``released``."""
        with self._lock:
            if self._proc is None:
                try:
                    self._proc = subprocess.Popen([sys.executable, "-S", "-c", _KEEPER], stdin=subprocess.PIPE,
                                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                                  start_new_session=True)
                except OSError as exc:
                    log.warning("no keeper for held processes: %s", exc)
                    return
            self._say(f"+{pid}")

    def released(self, pid: int) -> None:
        with self._lock:
            if self._proc is not None:
                self._say(f"-{pid}")

    def close(self) -> None:
        """The keeper continues what is still held (nothing, normally) and ends."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _say(self, line: str) -> None:
        try:
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.write(line.encode() + b"\n")
            self._proc.stdin.flush()
        except OSError as exc:
            log.warning("the keeper of held processes is gone: %s", exc)
