"""The processes of a session as every view shows them: one row per process (its role or command line,
parent, start and end, how it ended, its hits) and the hits of each, in the order the processes started.

A session of one process (or one recorded before pttrace followed children) has no process records:
its hits are the target's, and views show no process grouping for it.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from typing import Sequence

from tracer.hit_table import HitTable
from tracer.model import Hit, Process, Session


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


def groups(session: Session) -> list[ProcessGroup]:
    """The hits of each process (every recorded process, hits or not), processes in the order they
    started; by rank first when the run has ranks (torchrun)."""
    out: dict[int | None, ProcessGroup] = {p.pid: ProcessGroup(p, p.pid) for p in session.processes}
    for pid in pids_with_hits(session.hits):
        if pid not in out:
            out[pid] = ProcessGroup(session.process(pid), pid)
    for group in out.values():
        group.hits = hits_of(session.hits, group.pid)
    ordered = list(out.values())
    if any(g.rank is not None for g in ordered):
        ordered.sort(key=lambda g: (g.rank is None, g.rank if g.rank is not None else 0))
    return ordered


def several(session: Session) -> bool:
    """Whether views show processes: the session recorded more than one."""
    return len(session.processes) > 1 or len([p for p in pids_with_hits(session.hits) if p is not None]) > 1


def timespan(process: Process) -> str:
    start = (process.started or "?").replace("T", " ").split("+")[0]
    end = (process.ended or "").replace("T", " ").split("+")[0]
    if end and end[:10] == start[:10]:
        end = end[11:]
    return f"{start} – {end or '…'}"


def describe(process: Process) -> str:
    """One line: ``pid 12 (DataLoader worker 0), child of 11: python x.py; 13:05:01 – 13:05:04, exit code 0``."""
    parent = f", child of {process.ppid}" if process.ppid else ""
    return f"{process.label}{parent}: {command(process)}; {timespan(process)}, {process.outcome}"
