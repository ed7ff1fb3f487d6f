"""What a gdb ``*stopped`` record means for the recording: a pure function of the MI payload and of
what the recorder is waiting for, so that it is tested from recorded MI transcripts without a gdb.

The recorder then acts on the ``Stop`` (tracer/recorder/reactions.py): record, continue, end the run.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, Mapping

# Signals that end the target: its stack is recorded as the crash path before it goes.
FATAL_SIGNALS = frozenset({"SIGSEGV", "SIGABRT", "SIGBUS", "SIGFPE", "SIGILL"})
# gdb reports a stop from -exec-interrupt as SIGINT (or signal 0 when attached in all-stop mode).
INTERRUPT_SIGNALS = frozenset({"SIGINT", "0"})
STEP_REASONS = frozenset({"end-stepping-range", "function-finished", "location-reached"})


class StopKind(enum.Enum):
    EXITED = "exited"  # the process exited; exit_code says how
    KILLED = "killed"  # the process was ended by a signal it did not handle
    CRASHED = "crashed"  # a fatal signal arrived: record the stack, then end the run
    SIGNAL = "signal"  # the target's own signal: pass it on
    ENDING = "ending"  # the interrupt of a run that is being ended: the run loop takes it from here
    INTERRUPTED = "interrupted"  # our interrupt() from the controller: stay stopped
    LIBRARIES = "libraries"  # libraries loaded (stop-on-solib-events): decide their symbols, continue
    BREAKPOINT = "breakpoint"  # a breakpoint the agent handled without letting gdb go on
    STEPPED = "stepped"  # a step, next or finish is done: stay stopped for the controller
    EXECD = "execd"  # a followed process executed a program outside a hold: handed over or let go, it runs on
    VFORKED = "vforked"  # a followed process vforked (catch vfork): its child is taken through its exec
    OTHER = "other"  # nothing to do (a watchpoint, say): the target stays stopped


@dataclass(frozen=True)
class Stop:
    """What one ``*stopped`` record means to the recording."""

    kind: StopKind
    reason: str | None
    group: str | None = None  # the inferior's thread group ("i1"), for exits
    thread_id: str | None = None
    signal: str | None = None
    exit_code: int | None = None
    breakpoint: str | None = None  # gdb's breakpoint number, for a breakpoint hit
    frame: tuple[tuple[str, str], ...] = ()  # where it stopped: func, addr, file, line, from (what MI gives)
    returned: tuple[str, str] | None = None  # a finish: ("$1", the value), as gdb's "Value returned is $1 = ..."


_FRAME_KEYS = ("func", "addr", "file", "line", "from")


def read_stop(payload: Mapping[str, Any], *, ending: bool, interrupting: bool) -> Stop:
    """``ending``: the recorder is ending the run (a requested stop); ``interrupting``: the controller
    asked for an interrupt whose stop has not come yet."""
    stop = _read_stop(payload, ending=ending, interrupting=interrupting)
    frame = payload.get("frame")
    where = tuple((k, str(frame[k])) for k in _FRAME_KEYS if isinstance(frame, dict) and frame.get(k))
    value = payload.get("return-value")
    returned = (str(payload.get("gdb-result-var") or "$"), str(value)) if value is not None else None
    return replace(stop, breakpoint=payload.get("bkptno"), frame=where, returned=returned)


def _read_stop(payload: Mapping[str, Any], *, ending: bool, interrupting: bool) -> Stop:
    reason = payload.get("reason")
    thread = payload.get("thread-id")
    group = payload.get("id")
    if reason in ("exited-normally", "exited"):
        code = payload.get("exit-code")
        return Stop(StopKind.EXITED, reason, group=group, exit_code=int(code, 8) if code else 0)
    if reason == "exited-signalled":
        return Stop(StopKind.KILLED, reason, group=group, signal=payload.get("signal-name"))
    if reason == "signal-received":
        sig = payload.get("signal-name") or "signal"
        if sig in INTERRUPT_SIGNALS and ending:
            return Stop(StopKind.ENDING, reason, thread_id=thread, signal=sig)
        if sig in INTERRUPT_SIGNALS and interrupting:
            return Stop(StopKind.INTERRUPTED, reason, thread_id=thread, signal=sig)
        if sig in FATAL_SIGNALS:
            return Stop(StopKind.CRASHED, reason, thread_id=thread, signal=sig)
        return Stop(StopKind.SIGNAL, reason, thread_id=thread, signal=sig)
    if reason == "vfork":
        return Stop(StopKind.VFORKED, reason, thread_id=thread)
    if reason == "exec":
        return Stop(StopKind.EXECD, reason, thread_id=thread)
    if reason == "solib-event":
        return Stop(StopKind.LIBRARIES, reason, thread_id=thread)
    if reason == "breakpoint-hit":
        return Stop(StopKind.BREAKPOINT, reason, thread_id=thread)
    if reason in STEP_REASONS:
        return Stop(StopKind.STEPPED, reason, thread_id=thread)
    if reason is None and not ending:
        # A finish or step out of a frame without debug info stops with no reason: still a stop.
        return Stop(StopKind.STEPPED, None, thread_id=thread)
    return Stop(StopKind.OTHER, reason, thread_id=thread)
