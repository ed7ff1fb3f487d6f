"""The hits pane's rows when hits come from several processes: for each process (in the order every view
shows them, ``tracer.export.processes.order``) a heading row, then the rows of its hits in table order.
Plain Python, no Textual.

Each process's hits are an array of indexes into the session's ``HitTable`` (4 bytes a hit), built with
C-level loops (a million hits of a few processes: tens of milliseconds), extended as a live run records.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import compress
from typing import Iterable, NamedTuple

from tracer.export import processes as PR
from tracer.session.hit_table import HitTable
from tracer.session.model import Process


class Heading(NamedTuple):
    """The row that heads a process's hits."""

    pid: int | None


class ProcessRows(Sequence):
    """Row positions -> a ``Heading`` or the index of a hit in ``table``."""

    def __init__(self, table: HitTable, processes: Sequence[Process] = ()) -> None:
        self.table = table
        self.processes = list(processes)
        self.members: dict[int | None, array] = {}
        self._pids: dict[int | None, None] = {}  # pids hits ran in, in order of their first hit
        self._site_pids: list[int | None] = []  # the pid of each site of the table, as far as seen
        self.groups: list[PR.ProcessGroup] = []
        self._starts: list[int] = []  # the position of each group's heading
        self._regroup()

    # --- building ------------------------------------------------------------------------------
    def add(self, indexes: Sequence[int]) -> None:
        """Take in hits (indexes into the table, ascending, after those taken so far)."""
        if not len(indexes):
            return
        sites = self.table.sites
        self._site_pids += [s.thread.pid for s in sites[len(self._site_pids):]]
        rows = self.table.rows
        site_rows = [rows[i] for i in indexes] if not isinstance(indexes, range) else rows[indexes.start:indexes.stop]
        by_pid: dict[int | None, set[int]] = {}
        for site in dict.fromkeys(site_rows):
            by_pid.setdefault(self._site_pids[site], set()).add(site)
        new = False
        for pid, its_sites in by_pid.items():
            mine = self.members.get(pid)
            if mine is None:
                mine = self.members[pid] = array("i")
                new = True
            if len(by_pid) == 1:
                mine.extend(indexes)
            else:
                mine.extend(compress(indexes, map(its_sites.__contains__, site_rows)))
        if new:
            first = {pid: self.members[pid][0] for pid in self.members}
            self._pids = dict.fromkeys(sorted(first, key=first.__getitem__))
            self._regroup()
        else:
            self._restart()

    def set_processes(self, processes: Sequence[Process]) -> None:
        """What the session says of its processes now (a live run tells more as they start and end)."""
        self.processes = list(processes)
        self._regroup()

    def _regroup(self) -> None:
        self.groups = PR.order(self.processes, self._pids)
        self._restart()

    def _restart(self) -> None:
        starts, at = [], 0
        for group in self.groups:
            starts.append(at)
            at += 1 + len(self.members.get(group.pid, ()))
        self._starts = starts
        self._len = at

    # --- reading -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._len

    def __getitem__(self, position):
        if isinstance(position, slice):
            return [self[i] for i in range(*position.indices(len(self)))]
        if position < 0:
            position += self._len
        if not 0 <= position < self._len:
            raise IndexError(position)
        g = bisect_right(self._starts, position) - 1
        offset = position - self._starts[g]
        pid = self.groups[g].pid
        return Heading(pid) if offset == 0 else self.members[pid][offset - 1]

    def group_of(self, pid: int | None) -> PR.ProcessGroup | None:
        return next((g for g in self.groups if g.pid == pid), None)

    def heading_position(self, pid: int | None) -> int | None:
        return next((self._starts[i] for i, g in enumerate(self.groups) if g.pid == pid), None)

    def hits_in(self, pid: int | None) -> int:
        return len(self.members.get(pid, ()))

    def position_of(self, index: int) -> int | None:
        """The row of the hit at ``index`` of the table; None if it is not among the rows."""
        if not 0 <= index < len(self.table):
            return None
        site = self.table.rows[index]
        pid = self._site_pids[site] if site < len(self._site_pids) else self.table.sites[site].thread.pid
        mine = self.members.get(pid)
        if mine is None:
            return None
        i = bisect_left(mine, index)
        if i >= len(mine) or mine[i] != index:
            return None
        g = next(n for n, group in enumerate(self.groups) if group.pid == pid)
        return self._starts[g] + 1 + i

    def newest(self) -> int | None:
        """The row of the most recent hit among the rows."""
        last = max((m[-1] for m in self.members.values() if len(m)), default=None)
        return None if last is None else self.position_of(last)

    def pids(self) -> Iterable[int | None]:
        return self._pids
