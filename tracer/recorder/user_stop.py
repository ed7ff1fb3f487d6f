"""A stop signal sent to the target (``kill -STOP PID``, ``kill -TSTP PID``) keeps it stopped, as it
keeps the program run alone, until a SIGCONT.

Under ptrace a stop signal does not stop a process for long: gdb reports it and whatever gdb does next
resumes the process. Measured with gdb 13: a SIGSTOP (which gdb does not pass on) was dropped, and a
SIGTSTP (passed on) stopped the process for an instant before gdb resumed it; the target ran on through
both, where alone it stops. So pttrace leaves a process that received one stopped in gdb until a SIGCONT
is pending for it (``ShdPnd`` in /proc/PID/status: a SIGCONT sent to a ptrace-stopped process is queued,
not acted on), then continues it. gdb stops every process of the run at once (all-stop): the run's other
processes wait too, and a warning says so. The watchdog (watchdog.py) leaves a stopped run alone: it looks
only while pttrace believes the target runs.

A stop signal the target handles itself (its bit in ``SigCgt``) is passed on, as before; so is one that
a gdb or pttrace sent (the stop's siginfo names its sender): a gdb stops every thread it believes it
holds with SIGSTOP, and a process handed from one gdb to another (watchdog.py) can still get the first
one's.
"""
from __future__ import annotations

import logging
import os
import signal
from typing import Callable

log = logging.getLogger("pttrace.recorder")

STOP_SIGNALS = {s.name: int(s) for s in (signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)}


def _status_mask(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _bit(signo: int) -> int:
    return 1 << (signo - 1)


def handles(pid: int, signo: int) -> bool:
    """The process has a handler of its own for ``signo``."""
    return bool(_status_mask(pid, "SigCgt") & _bit(signo))


def cont_pending(pid: int) -> bool:
    """A SIGCONT waits for ``pid`` (sent to the process: its shared pending set)."""
    return bool((_status_mask(pid, "ShdPnd") | _status_mask(pid, "SigPnd")) & _bit(signal.SIGCONT))


def ours(sender: int | None) -> bool:
    """The signal came from pttrace itself or from a gdb (a stop of its own that reached a process it no
    longer holds), not from the user."""
    if sender is None:
        return False
    if sender == os.getpid():
        return True
    try:
        with open(f"/proc/{sender}/comm") as fh:
            return fh.read().strip().startswith("gdb")
    except OSError:
        return False  # gone already: /bin/kill, not a gdb (gdb outlives the stops it causes)


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


class UserStops:
    """The one process kept stopped for a stop signal, and the SIGCONT that lets the run go on."""

    def __init__(self, resume: Callable[[], object], warn: Callable[[str], None], others: Callable[[int], int],
                 sender: Callable[[], int | None]):
        self._resume = resume  # gdb continues the run (-exec-continue)
        self._sender = sender  # the pid that sent the signal of the stop gdb reports now (its siginfo)
        self._warn = warn
        self._others = others  # how many other processes gdb holds besides this one
        self.pid: int | None = None
        self._waking: int | None = None  # continued for a SIGCONT not reported yet
        self._warned = False

    def keep(self, pid: int | None, name: str | None) -> bool:
        """True when the stop for signal ``name`` in ``pid`` is kept (the caller does not continue)."""
        signo = STOP_SIGNALS.get(name or "")
        if name == "SIGCONT" and pid == self._waking:
            self._waking = None
            return False
        if pid is None or signo is None or pid == self._waking:
            # A stop signal reported again by another thread after the SIGCONT that ended it (gdb reports
            # one thread's at a time): already over.
            return False
        if signo != signal.SIGSTOP and handles(pid, signo):
            return False
        sender = self._sender()
        if ours(sender):
            log.debug("process %s: %s from %s (a gdb's or pttrace's), not kept", pid, name, sender)
            return False
        self.pid = pid
        log.info("process %s received %s: kept stopped until it receives SIGCONT", pid, name)
        others = self._others(pid)
        if others and not self._warned:
            self._warned = True
            self._warn(f"process {pid} received {name}: it is kept stopped until it receives SIGCONT (`kill -CONT "
                       f"{pid}`), and gdb, which stops all at once, holds the run's {others} other process(es) "
                       "with it")
        return True

    def poll(self) -> bool:
        """Continue the run once the kept process has a SIGCONT pending (or is gone); True when it did."""
        pid = self.pid
        if pid is None or not (cont_pending(pid) or gone(pid)):
            return False
        self.pid = None
        self._waking = pid
        log.info("process %s received SIGCONT: the run goes on", pid)
        self._resume()
        return True

    def resumed(self) -> None:
        """The run was continued by other means (the user's continue at a prompt): nothing is kept."""
        self.pid = None
