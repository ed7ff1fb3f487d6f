"""What the recorder tells its listener (the TUI's live source, or nobody in batch mode), one frozen
dataclass per kind. They are sent from the recorder's own threads; a listener must not block."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Union

from tracer.session.model import Breakpoint, Hit


@dataclass(frozen=True)
class TargetStateChanged:
    """The target is now "running", "stopped", "exited" or "detached"; a child's recorder also says
    "finished" (its recording ended)."""

    state: str
    child: int | None = None  # a child that executed Python: its own recorder's target (children.py)


@dataclass(frozen=True)
class TargetOutput:
    """Text the launched target wrote to its terminal: ``stream`` is ``stderr`` when its stderr has a
    terminal of its own (launch.TargetTerminal), else ``stdout`` (both, in order)."""

    text: str
    stream: str = "stdout"


@dataclass(frozen=True)
class HitRecorded:
    """A hit the agent appended to the session (its frames already filled from our index). ``child``: the
    pid of a child that executed Python, whose own recorder recorded it (children.py); its ``seq`` is
    that recorder's, numbered again after the main session's hits when the sessions are read together."""

    hit: Hit
    child: int | None = None


@dataclass(frozen=True)
class ProcessRecorded:
    """A ``process`` record appended to the session (what is known of one process, again as it ends)."""

    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BreakpointRecorded:
    """A breakpoint record the agent appended (sent again whenever its locations change)."""

    breakpoint: Breakpoint


@dataclass(frozen=True)
class GdbBreakpointChanged:
    """gdb's own news of a breakpoint (``=breakpoint-created/modified``: a pending one resolved)."""

    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TargetStopped:
    """The target stopped and stays stopped for the controller; ``reason`` as gdb's MI gives it
    ("breakpoint-hit", "end-stepping-range", "signal-received", ...; None after a finish out of a
    frame without debug info)."""

    reason: str | None
    thread_id: str | None = None
    signal: str | None = None
    breakpoint: str | None = None  # gdb's number of the breakpoint hit
    frame: tuple[tuple[str, str], ...] = ()  # where: (key, value) of func, addr, file, line, from
    returned: tuple[str, str] | None = None  # a finish: gdb's value history name ("$1") and the value
    process: int | None = None  # the pid of the process that stopped, when gdb says (several processes)
    child: int | None = None  # a child that executed Python, stopped in its own recorder's gdb (children.py)


@dataclass(frozen=True)
class WarningRaised:
    """Something the user should know; the run goes on. Also written to the session."""

    message: str


@dataclass(frozen=True)
class EvalsRecorded:
    """``--eval``: the values the agent evaluated at hit ``seq`` (session.evals.Evaluated each)."""

    seq: int
    values: tuple


@dataclass(frozen=True)
class GraphRecorded:
    """A TorchScript graph the agent read (``graph`` record, session.torchscript.TsGraph), once per graph."""

    graph: Any


@dataclass(frozen=True)
class RecorderFinished:
    """The session is closed with this status; nothing follows."""

    status: str


def from_child(pid: int, event: "RecorderEvent") -> "RecorderEvent | None":
    """What the recorder of a child that executed Python tells the main recording's listener: its hits,
    its process records and its warnings (as ``storage.load`` words them); its stops and its target's state,
    marked as the child's (a TUI steers it through that recorder's controller); its end as the state
    "finished". The rest (its breakpoints, its output) is the child's own business."""
    if isinstance(event, TargetStopped):
        return dataclasses.replace(event, process=event.process or pid, child=pid)
    if isinstance(event, TargetStateChanged):
        return TargetStateChanged(event.state, child=pid)
    if isinstance(event, RecorderFinished):
        return TargetStateChanged("finished", child=pid)
    if isinstance(event, HitRecorded):
        return HitRecorded(event.hit, child=pid)
    if isinstance(event, ProcessRecorded):
        return event
    if isinstance(event, WarningRaised):
        return WarningRaised(f"process {pid}: {event.message}")
    return None


RecorderEvent = Union[TargetStateChanged, TargetOutput, HitRecorded, ProcessRecorded, BreakpointRecorded,
                      GdbBreakpointChanged, TargetStopped, WarningRaised, RecorderFinished, EvalsRecorded, GraphRecorded]
Listener = Callable[[RecorderEvent], None]
