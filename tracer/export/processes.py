"""The processes of a session as every view shows them: one row per process (its role or command line,
parent, start and end, how it ended, its hits) and the hits of each, in the order the processes started.

A session of one process (or one recorded before pttrace followed children) has no process records:
its hits are the target's, and views show no process grouping for it.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from typing import Iterable, Sequence

from tracer.session.helpers import HelperProgram, helper_programs, is_helper
from tracer.session.hit_table import HitTable
from tracer.session.model import Hit, Process, Session


@dataclass
class ProcessGroup:
    process: Process | None  # None: hits of a process the session has no record of
    pid: int | None
    hits: Sequence[Hit] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.process is not None:
            return self.process.label
        return f"pid {self.pid}" if self.pid is not None else "the target"

    @property
    def rank(self) -> int | None:
        return self.process.rank if self.process is not None else None


def command(process: Process, limit: int = 120) -> str:
    text = shlex.join(process.argv) if process.argv else "?"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pids_with_hits(hits: Sequence[Hit]) -> list[int | None]:
    """The pids hits ran in, in order of their first hit (a table of hits: once a site, not once a hit)."""
    if isinstance(hits, HitTable):
        counts = hits.site_counts()
        first = hits.first_rows(counts)
        return list(dict.fromkeys(hits.sites[s].thread.pid for s in sorted(counts, key=lambda s: first[s])))
    return list(dict.fromkeys(h.thread.pid for h in hits))


def hits_of(hits: Sequence[Hit], pid: int | None) -> Sequence[Hit]:
    if isinstance(hits, HitTable):
        return hits.where(lambda site: site.thread.pid == pid)
    return [h for h in hits if h.thread.pid == pid]


def order(processes: Sequence[Process], pids: Iterable[int | None]) -> list[ProcessGroup]:
    """A group (no hits yet) for every process, recorded or seen in ``pids`` (the pids hits ran in, in
    order of their first hit): processes in the order they started; by rank first when the run has ranks
    (torchrun). The order every view shows them in; the TUI's hits pane groups with it too."""
    pids = list(pids)
    out: dict[int | None, ProcessGroup] = {p.pid: ProcessGroup(p, p.pid) for p in processes
                                           if not is_helper(p, pids)}
    for pid in pids:
        if pid not in out:
            out[pid] = ProcessGroup(None, pid)
    ordered = list(out.values())
    if any(g.rank is not None for g in ordered):
        ordered.sort(key=lambda g: (g.rank is None, g.rank if g.rank is not None else 0))
    return ordered


def groups(session: Session) -> list[ProcessGroup]:
    """The hits of each process (every recorded process, hits or not), in ``order``."""
    ordered = order(session.processes, pids_with_hits(session.hits))
    for group in ordered:
        if group.process is None:
            group.process = session.process(group.pid)
        group.hits = hits_of(session.hits, group.pid)
    return ordered


def several_of(processes: Sequence[Process], pids: Iterable[int | None]) -> bool:
    """Whether views show processes: more than one was recorded, or hits ran in more than one."""
    pids = list(pids)
    traced = [p for p in processes if not is_helper(p, pids)]
    return len(traced) > 1 or len({p for p in pids if p is not None}) > 1


def helpers(session: Session) -> list[HelperProgram]:
    """The programs that are not Python the run executed (a compiler, openssl), folded by program: views
    show one line each instead of a row per process."""
    return helper_programs(session.processes, pids_with_hits(session.hits))


def several(session: Session) -> bool:
    """Whether views show processes: the session recorded more than one."""
    return several_of(session.processes, pids_with_hits(session.hits))


def timespan(process: Process) -> str:
    start = (process.started or "?").replace("T", " ").split("+")[0]
    end = (process.ended or "").replace("T", " ").split("+")[0]
    if end and end[:10] == start[:10]:
        end = end[11:]
    return f"{start} – {end or '…'}"


def hosts(processes: Sequence[Process]) -> list[str]:
    """The machines the processes ran on, in order of their first process (older sessions say none)."""
    return list(dict.fromkeys(p.host for p in processes if p.host))


def describe(process: Process, with_host: bool = False) -> str:
    """One line: ``pid 12 (DataLoader worker 0), child of 11: python x.py; 13:05:01 – 13:05:04, exit code 0``;
    ``with_host`` (a session of several machines): ``…, exit code 0, on node-2``."""
    parent = f", child of {process.ppid}" if process.ppid else ""
    host = f", on {process.host}" if with_host and process.host else ""
    return f"{process.label}{parent}: {command(process)}; {timespan(process)}, {process.outcome}{host}"
