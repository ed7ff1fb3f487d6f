"""Noticing the events gdb loses, and taking the run past them.

gdb 13 (all-stop, ``schedule-multiple``, ``detach-on-fork off``) can lose events when many processes fork
and exit at once: measured, a target forking 200 children that each hit a breakpoint hung 4 runs in 7, the
parent left in its fork's event stop and the new child in its first stop, both held by gdb (state ``t``)
while gdb believed them running and waited in poll; the exit of another child was lost with it. Nothing
would ever come again.

What gdb loses there is a wake-up, not the events (measured: with gdb idle in poll and the parent and its
new child in ptrace stops, a SIGCHLD sent to gdb by hand made it take both events and go on; one run woken
44 times so recorded all 200 hits). So, while pttrace believes the target runs and gdb has said nothing
for a while, this compares what the kernel says of every process gdb holds (``/proc/PID/task/TID/stat``,
``TracerPid``) with that belief. When every one of their threads sits in a ptrace stop and gdb, idle,
has not used the CPU for a tenth of a second, gdb is woken: a SIGCHLD, as the kernel would have sent it, which
makes gdb collect whatever waits for it (harmless when nothing does). Only when a few wake-ups change
nothing for seconds is the stop taken as lost: gdb's own tracer thread (the agent, rescue.py) reads why
each thread stopped and
  - continues a thread stopped at a fork, clone or vfork event, or for a signal (passed on; a SIGSTOP of
    gdb's own is dropped),
  - hands a child gdb never learnt of (held, its breakpoint bytes put back) to a recorder of its own, as
    a child that executed Python is (children.py), so its hits are recorded too,
  - takes note of a process gdb lost the end of,
and says each in a warning. A thread stopped at a breakpoint that gdb never reported cannot be taken on
(its hit is lost with it): the run is ended there, with a warning that says so.
"""
from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from tracer.gdb.mi import GdbCommandError
from tracer.recorder import guard
from tracer.recorder.agent_link import AgentError
from tracer.recorder.children import Execd
from tracer.recorder.launch import cmdline
from tracer.recorder.shutdown import LOST_EVENT

if TYPE_CHECKING:
    from tracer.gdb.mi import MiConnection
    from tracer.recorder.agent_link import AgentLink
    from tracer.recorder.children import ExecChildren
    from tracer.recorder.outcome import Outcome
    from tracer.recorder.processes import ProcessTable

log = logging.getLogger("pttrace.recorder")

# Seconds every held thread must sit in a ptrace stop, gdb idle, before gdb is woken (again). Each wake-up
# takes gdb on with some chance, not after some time: a 100-child storm's stalls (beside another storm, load
# 4-6) ended after 1, 2, 3... wake-ups, whatever their spacing (~1.2, 2.2, 3.1 s apart at the former 0.5 s
# after 0.5 s of quiet; ~0.7, 1.4, 2.3 s doubling from 0.1 s), so they come at this pace, 0.1 s after the
# last (~0.3 s a wake-up with the look's own pace): a SIGCHLD too many is harmless.
WAKE_AFTER = 0.1
# Wake-ups that change nothing (gdb says nothing after them) for this long before the stop counts as lost:
# measured, gdb went on after 1 to 10 in a row 0.9-1 s apart (105 stalls over 25 200-child runs, beside
# another storm on 2 cores: 53 after one, 37 after two or three), and a rescue hands processes to gdbs of
# their own. (An -exec-interrupt after them changed nothing either: gdb sends SIGINT to processes all in
# ptrace stops.)
WAKING_FOR = 20.0
STUCK_FOR = 3.0  # seconds stuck after the last of them before the rescue (rescue.py) takes the run on
CHECK_EVERY = 0.1  # seconds between two looks (a look reads /proc/*/status: ~5 ms with 300 processes)
QUIET = 0.2  # seconds without a word from gdb before the recorder's loop asks for a look


def _runs(pid: int) -> bool:
    """Its main thread runs, sleeps or waits on I/O: not in a ptrace stop, not ended."""
    return (guard.state_and_cpu(pid) or ("?",))[0] in ("R", "S", "D")


def _gone(tid: int) -> bool:
    """The thread has ended (or is a zombie): nothing left to detach or continue."""
    return guard.process_state(tid) in (None, "Z", "X")


def traced_by(tracer: int) -> list[int]:
    """Every process whose tracer is ``tracer`` (thread-group leaders: /proc lists no other)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and guard.traced_by(int(name)) == tracer:
            found.append(int(name))
    return found


def tasks(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def _in_ptrace_stop(pid: int, tid: int) -> bool:
    return (guard.state_and_cpu(pid, tid) or ("?",))[0] == "t"


def _taken_on(info: dict) -> bool:
    """A stop the rescue can take the run past: a fork, clone or vfork event, or a signal other than a
    breakpoint's SIGTRAP (a lost breakpoint stop, or a stop that cannot be read, cannot be)."""
    signo = info.get("signo") if isinstance(info.get("signo"), int) else 0
    return info.get("event") in ("fork", "vfork", "clone", "vfork-done") or bool(signo and signo != signal.SIGTRAP)


class _TakenBack(Exception):
    """gdb resumed a thread the rescue was taking from it: gdb found its event after all."""

    def __init__(self, tid: int):
        super().__init__(tid)
        self.tid = tid


def all_in_ptrace_stop(pids: list[int]) -> bool:
    states = [guard.state_and_cpu(pid, tid) for pid in pids for tid in tasks(pid)]
    return bool(states) and all(s is not None and s[0] == "t" for s in states)


@dataclass
class _Look:
    """gdb's CPU time when the watchdog last saw it change, and since when it has not."""

    gdb_cpu: int
    since: float


class Watchdog:
    """Looks, while the run loop hears nothing from gdb, for processes gdb holds but forgot."""

    def __init__(self, mi: "MiConnection", agent: "AgentLink", processes: "ProcessTable", children: "ExecChildren",
                 outcome: "Outcome", warn: Callable[[str], None]):
        self._mi, self._agent, self._processes, self._children = mi, agent, processes, children
        self._outcome, self._warn = outcome, warn
        self._look: _Look | None = None
        self._last = 0.0
        self._heard = 0.0  # when gdb last said something (the recorder's quiet_since)
        self._woken = 0  # wake-ups since gdb last said something
        self._woken_since = 0.0  # when the first of them was
        self.wake_ups = 0  # every wake-up of the run (the log says each)
        self.rescues = 0

    def check(self, heard: float) -> bool:
        """A look, ``heard`` being when gdb last said something; True when the run was ended (a lost stop
        that cannot be taken on)."""
        now = time.monotonic()
        if now - self._last < CHECK_EVERY:
            return False
        self._last = now
        if heard != self._heard:  # gdb spoke since the last look: whatever it had lost, it found
            self._heard, self._woken = heard, 0
        live = self._processes.live()
        # A process believed running that has ended (a zombie, or reaped) while gdb sleeps: gdb missed or
        # kept its end. Seen at the end of a storm at load 6: the target's own end never reported, and
        # reactions.vanished() called the run a crash 3 s later; a wake-up makes gdb report what it holds.
        ended = [i.pid for i in live if i.pid and i.state == "running" and _gone(i.pid)]
        if not ended and (not any(i.state == "running" for i in live) or any(_runs(i.pid) for i in live if i.pid)):
            # A process gdb holds runs: nothing is stuck (and no scan of /proc: a quiet run looks cheaply).
            self._look = None
            return False
        gdb = guard.state_and_cpu(self._mi.proc.pid)
        held = traced_by(self._mi.proc.pid)
        stopped = all_in_ptrace_stop(held)
        if gdb is None or gdb[0] != "S" or not (stopped or ended):
            self._look = None
            return False
        if self._look is None or self._look.gdb_cpu != gdb[1]:
            self._look = _Look(gdb[1], now)
            return False
        if not self._woken or now - self._woken_since < WAKING_FOR:
            if now - self._look.since >= WAKE_AFTER:
                self._wake(held if stopped else ended, stopped)
            return False
        if not stopped or now - self._look.since < STUCK_FOR:  # an end alone: reactions.vanished() says it
            return False
        self._look = None
        try:
            return self._rescue(held)
        except (AgentError, GdbCommandError) as exc:
            self._warn(f"gdb lost an event and pttrace could not take the run past it ({exc.message}); the run "
                       "was ended there, every hit before it is kept")
            self._outcome.end_reason = LOST_EVENT
            return True

    def _wake(self, pids: list[int], stopped: bool = True) -> None:
        """gdb missed the SIGCHLD of events that wait for it: another one makes its event loop collect them."""
        self._look = None  # stuck again for WAKE_AFTER before the next one
        if not self._woken:
            self._woken_since = time.monotonic()
        self._woken += 1
        self.wake_ups += 1
        log.info("gdb idle while %s (%s) %s: woken (SIGCHLD), wake-up %d",
                 "every process it holds" if stopped else "the processes", ", ".join(map(str, pids)),
                 "sits in a ptrace stop" if stopped else "have ended unreported", self.wake_ups)
        try:
            os.kill(self._mi.proc.pid, signal.SIGCHLD)
        except OSError as exc:  # gdb gone: the run loop hears of it
            log.debug("waking gdb: %s", exc)

    def _rescue(self, held: list[int]) -> bool:
        # gdb's own thread list is no help here: asking it reads the registers of every thread it believes
        # in, and fails on one whose end it lost. The processes gdb announced are the process table's.
        known = {i.pid for i in self._processes.inferiors.values() if i.pid is not None}
        asked = time.monotonic()
        stops = {pid: [(tid, self._info(tid)) for tid in tasks(pid)] for pid in held if pid in known}
        if self._taken_back(held, asked):
            return False
        lost = [(pid, tid, info) for pid in held if pid in known for tid, info in stops[pid] if not _taken_on(info)]
        if lost:
            # Decided before anything is taken from gdb: a rescue half done, then the end of the run, left
            # the handed-over target to be killed with the run (its recorder: "No such process").
            pid, tid, info = lost[0]
            self._warn(f"gdb lost a stop of process {pid} (thread {tid}, {info.get('signal') or info}) and "
                       "pttrace cannot take it on without gdb: the run was ended there, every hit recorded "
                       "before it is kept")
            self._outcome.end_reason = LOST_EVENT
            return True
        said: list[str] = []
        try:
            for pid in held:
                if pid not in known:
                    said.append(self._adopt(pid))
                    continue
                for tid, info in stops[pid]:
                    event = info.get("event")
                    signo = info.get("signo") if isinstance(info.get("signo"), int) else 0
                    if event in ("fork", "vfork"):
                        # gdb has lost this process's fork, and loses every later one (measured: each fork of
                        # the same parent lost after the first): it goes to a gdb of its own, as its child does.
                        said.append(self._move(pid, f"its {event} event was lost"))
                        break
                    if _taken_on(info):
                        sig = 0 if event or signo == signal.SIGSTOP else signo
                        self._do(f"resume {tid} {sig}", lambda: _gone(tid) or not _in_ptrace_stop(pid, tid),
                                 f"continuing thread {tid}")
                        what = f"its {event} event" if event else f"signal {info.get('signal')}"
                        said.append(f"thread {tid} of process {pid} was left stopped at {what}; continued")
        except _TakenBack as back:
            log.info("gdb took thread %s back while pttrace released it: the run goes on with gdb", back.tid)
            if said:
                self._said(said)
            return False
        for inferior in self._processes.live():
            if inferior.pid is not None and inferior.pid not in held:
                end = guard.zombie_end(inferior.pid)
                self._processes.exited(inferior.group, *(end or (None, None)), by_gdb=False)
                how = ("its exit status is not known" if end is None else f"exit code {end[0]}, read from /proc"
                       if end[1] is None else f"killed by {end[1]}, read from /proc")
                said.append(f"process {inferior.pid} ended without gdb reporting it ({how})")
        self._said(said)
        return False

    def _said(self, said: list[str]) -> None:
        self.rescues += 1
        self._warn("gdb lost events while processes forked and exited (gdb 13 under a fork storm); pttrace took "
                   "the run past them: " + "; ".join(said))

    def _taken_back(self, held: list[int], asked: float) -> bool:
        """gdb came to the events itself while the agent read them (a command wakes its event loop): gdb
        said something, or a thread it held left its ptrace stop, or a process joined them. Then nothing
        is taken from gdb (detaching a process gdb is handling made it fail: "Couldn't get registers: No
        such process", and the run ended); the next look starts afresh."""
        now_held = traced_by(self._mi.proc.pid)
        if self._mi.last_notify < asked and sorted(now_held) == sorted(held) and all_in_ptrace_stop(held):
            return False
        log.info("gdb took up the stopped processes itself while pttrace read them: nothing taken from it")
        return True

    def _info(self, tid: int) -> dict:
        """Why a thread is in its ptrace stop (rescue.stop_info), asked again if gdb's answer is lost."""
        for _ in range(3):
            try:
                info = self._agent.ptrace(f"info {tid}")
            except AgentError as exc:
                log.debug("ptrace info %s: %s", tid, exc)
                continue
            if isinstance(info, list) and info and isinstance(info[0], dict):
                return info[0]
        raise AgentError(f"the agent could not read why thread {tid} stopped")

    def _do(self, request: str, done: Callable[[], bool], what: str) -> None:
        """A ptrace request by gdb's tracer thread, checked by its effect in /proc (gdb can swallow the
        agent's answer: measured once in a storm, an empty reply to a request that was carried out)."""
        try:
            answer = self._agent.ptrace(request)
        except AgentError as exc:
            answer = {"error": exc.message}
        if isinstance(answer, dict) and answer.get("ok"):
            return
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            if done():
                return
            time.sleep(0.05)
        raise AgentError(f"{what}: {answer.get('error') if isinstance(answer, dict) else answer}")

    def _move(self, pid: int, why: str) -> str:
        """A process gdb announced but can no longer follow: taken from gdb held, traced by a recorder of its
        own from where it stands."""
        inferior = next((i for i in self._processes.inferiors.values() if i.pid == pid), None)
        self._release(pid)
        argv = cmdline(pid) or []
        if inferior is not None:
            self._processes.handed_over(inferior, argv)
        self._children.hand_over(Execd(pid, argv, None))
        return f"process {pid} ({why}) was handed to a recorder of its own"

    def _release(self, pid: int) -> None:
        """Detached from gdb, stopped, every breakpoint byte of gdb's put back."""
        self._children.holding(pid)
        os.kill(pid, signal.SIGSTOP)  # pending before the detach: it stops at once, whatever the detach delivers
        for tid in tasks(pid) or [pid]:  # ptrace holds each thread on its own
            try:
                self._do(f"release {tid}", lambda: _gone(tid) or guard.traced_by(tid) != self._mi.proc.pid,
                         f"detaching thread {tid}")
            except AgentError:
                if guard.traced_by(tid) == self._mi.proc.pid and not _in_ptrace_stop(pid, tid):
                    raise _TakenBack(tid) from None  # gdb runs it again: its SIGSTOP is passed over (user_stop.py)
                raise
        try:
            guard.remove_breakpoints(pid, resume=False)  # held: its recorder continues it once attached
        except guard.RepairError as exc:
            log.debug("repairing %s: %s", pid, exc)

    def _adopt(self, pid: int) -> str:
        """A child gdb holds but never announced (its fork event was lost): detached held, its breakpoint
        bytes put back, and traced by a recorder of its own."""
        self._release(pid)
        argv = cmdline(pid) or []
        self._processes.adopted(pid, argv)
        self._children.hand_over(Execd(pid, argv, None))
        return f"process {pid}, a child gdb never announced, was handed to a recorder of its own"
