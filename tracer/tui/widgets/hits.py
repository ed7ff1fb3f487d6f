"""The hits pane: one row per recorded hit, appended in batches while a run records; ``/`` filters. Hits
of several processes are grouped by process, each under a heading row that says what it ran and how it
ended (``tracer.tui.process_rows``)."""
from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Sequence

from rich.text import Text
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.widgets import DataTable

from tracer.export import paths as P
from tracer.export import processes as PR
from tracer.session.hit_table import HitTable
from tracer.session.model import Hit, Process
from tracer.tui.messages import HitSelected
from tracer.tui.process_rows import Heading, ProcessRows
from tracer.tui.widgets._style import ROW_BINDINGS, RowJumps, frame_name, searched_texts
from tracer.tui.widgets.search import SearchBar
from tracer.tui.widgets.table import Table


def haystack(hit: Hit) -> str:
    """The text a search looks in: the breakpoint, the thread, and each frame's names and place."""
    parts = [hit.breakpoint or "", hit.signal or "", hit.thread.names]
    if hit.thread.pid is not None:
        parts.append(f"pid {hit.thread.pid}")
    for f in hit.frames:
        parts += searched_texts(f)
    return "\n".join(parts).lower()


class HitSearch:
    """What ``/`` lets through: the hits whose text (``haystack``) holds the needle, lower-cased. The text is
    made once for the hits that share their frames, breakpoint and thread (a hot path's)."""

    def __init__(self) -> None:
        self.needle = ""
        self._haystacks: dict[tuple, str] = {}

    def matches(self, hit: Hit) -> bool:
        if not self.needle:
            return True
        key = (id(hit.frames), hit.breakpoint, hit.signal, hit.thread.names, hit.thread.pid)
        text = self._haystacks.get(key)
        if text is None:
            text = self._haystacks[key] = haystack(hit)
        return self.needle in text or self.needle in (hit.breakpoint or "").lower()

    def matching(self, hits: HitTable, first: int) -> array:
        """The indexes from ``first`` on of the hits let through (one test a site)."""
        sites = {i for i, site in enumerate(hits.sites) if self.matches(site.hit(0, 0.0))}
        rows = hits.rows
        return array("i", (i for i in range(first, len(rows)) if rows[i] in sites))


class HitsTable(RowJumps, Table):
    """A window of rows onto the session's hits: ``hits`` is the app's table of every hit (a few numbers
    each, ``tracer.session.hit_table``), ``matching`` the indexes of those a search lets through (all of them
    unless one filters), ``shown`` what each row shows: ``matching`` itself, or once hits come from
    several processes a ``ProcessRows`` (headings and hit indexes). The rows are
    ``shown[start:start + WINDOW]``; the window follows the cursor, so a million hits cost a few hundred
    rows."""

    BINDINGS = [Binding(k, a, d, show=False) for k, a, d in ROW_BINDINGS]
    WINDOW = 400  # rows: Textual measures each row it is given (~1 ms a row on a busy machine)
    MARGIN = 40  # the cursor this close to the window's edge, with hits beyond it: the window moves

    def __init__(self, follow: bool = False, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.follow = follow
        """Live runs: while the cursor sits on the newest hit, new hits move it along."""
        self.hits = HitTable()
        self.matching: array | range = range(0)
        """All of them (a range) or, while a search filters, the indexes it lets through."""
        self.shown: Sequence = range(0)
        self.grouped: ProcessRows | None = None
        self.processes: list[Process] = []  # what the session says of its processes
        self.start = 0
        self.cwd: str | None = None
        self.search = HitSearch()
        self._auto_row: int | None = None
        self._selected: int | None = None  # the index in ``shown`` last told as selected
        self.pids: set[int] = set()  # the processes hits came from: shown with each hit once there are several
        self._pid_sites = 0  # sites of self.hits whose pid is in self.pids
        self._taken = 0  # hits of self.hits taken in (the app's table grows before add_hits is called)
        self.border_title = "hits"

    def on_mount(self) -> None:
        self.add_column("#", key="seq")
        self.add_column("breakpoint", key="bp")
        # The thread last: it is nearly always the main one, and the pane is narrow.
        self.add_column("innermost frame", key="inner")
        self.add_column("called from", key="from")
        self.add_column("thread", key="thread")

    @property
    def position(self) -> int:
        """The cursor's index in ``shown``."""
        return self.start + self.cursor_row

    @property
    def following(self) -> bool:
        if not self.follow:
            return False
        newest = self.newest_position()
        return newest is None or self.position >= newest

    def newest_position(self) -> int | None:
        """The row of the most recent hit shown (grouped by process, not always the last row); None
        without any."""
        if self.grouped is not None:
            return self.grouped.newest()
        return len(self.shown) - 1 if self.shown else None

    def _heading(self, heading: Heading) -> tuple:
        grouped = self.grouped
        group = grouped.group_of(heading.pid) if grouped is not None else None
        process = group.process if group is not None else None
        label = group.label if group is not None else f"pid {heading.pid}"
        n = grouped.hits_in(heading.pid) if grouped is not None else 0
        counted = f"{n:,} hit{'' if n == 1 else 's'}"
        if process is None:
            return (Text(""), Text(label, style="bold yellow", no_wrap=True), Text(counted, style="yellow"), "", "")
        ended = f"{counted} · {process.outcome}"
        where = PR.timespan(process) + (f" · {process.host}" if process.host and self._hosts() > 1 else "")
        return (Text(""), Text(label, style="bold yellow", no_wrap=True), Text(ended, style="yellow"),
                Text(PR.command(process), style="grey70", no_wrap=True), Text(where, style="grey70", no_wrap=True))

    def _hosts(self) -> int:
        return len({p.host for p in self.processes if p.host})

    def _row(self, hit: Hit) -> tuple:
        inner = hit.innermost
        origin = P.innermost_python(hit.frames)
        thread = f"{hit.thread.id}" + (f" {hit.thread.names}" if hit.thread.names else "")
        return (
            Text(str(hit.seq), justify="right"),
            Text(hit.breakpoint or (hit.signal or "?"), style="cyan" if hit.breakpoint else "bold red"),
            frame_name(inner) if inner else Text("(no frames)", style="grey50"),
            Text(P.frame_location(origin, self.cwd) or "", style="green", no_wrap=True) if origin else "",
            Text(thread, no_wrap=True),
        )

    def _rows(self, first: int, stop: int) -> list[tuple]:
        hits, shown = self.hits, self.shown
        out = []
        for i in range(first, stop):
            item = shown[i]
            out.append(self._heading(item) if isinstance(item, Heading) else self._row(hits[item]))
        return out

    def _hit_at(self, position: int) -> Hit | None:
        """The hit on row ``position`` of ``shown`` (None on a process's heading)."""
        item = self.shown[position]
        return None if isinstance(item, Heading) else self.hits[item]

    def _fill(self, start: int, position: int | None = None) -> None:
        """Rows for ``shown[start:start + WINDOW]``, the cursor on ``position`` (an index in ``shown``)."""
        start = max(0, min(start, len(self.shown) - 1))
        self.start = start
        self.clear()
        self.add_rows(self._rows(start, min(len(self.shown), start + self.WINDOW)))
        if position is not None and self.row_count:
            self.move_cursor(row=max(0, min(position - start, self.row_count - 1)), animate=False)

    def _show(self, position: int) -> None:
        """Put the cursor on ``shown[position]``, moving the window if it is not in it."""
        if not self.start <= position < self.start + self.row_count:
            self._fill(min(position - self.WINDOW // 2, len(self.shown) - self.WINDOW), position)
        else:
            self.move_cursor(row=position - self.start)

    def add_hits(self, hits: Sequence[Hit]) -> None:
        """Take in the hits recorded since the last call: ``hits`` is the app's table of them all (a new
        table replaces the old), or a list of new hits to add to it."""
        follow = self.following
        first = self._taken == 0  # no hit shown yet (the rows may hold the processes' headings already)
        seen = self._take(hits)
        new = self._match_new(seen)
        self._place(new, follow)
        self._retitle()
        newest = self.newest_position()
        if follow and newest is not None:
            self._follow(newest)
        if first:
            self._select_first(follow, newest)

    def _take(self, hits: Sequence[Hit]) -> int:
        """Adopt ``hits`` (see add_hits); how many of them were taken in before."""
        if isinstance(hits, HitTable):
            # the app's own table, grown since the last call: the hits past those taken in are new
            seen = self._taken if hits is self.hits else 0
            self.hits = hits
        else:
            seen = self._taken
            self.hits.extend(hits)
        self._taken = len(self.hits)
        if seen == 0 and self.row_count:
            self.clear()
            self.start = 0
        if seen == 0:
            self._pid_sites = 0
            self.grouped = None
        sites = self.hits.sites  # only the sites new since the last call: a live run adds hits often
        self.pids.update(site.thread.pid for site in sites[self._pid_sites:] if site.thread.pid is not None)
        self._pid_sites = len(sites)
        return seen

    def _match_new(self, seen: int):
        """The indexes of the new hits the search (if any) keeps; ``matching`` grown by them."""
        if self.search.needle:
            new = self.search.matching(self.hits, seen)
            # A search's matches so far (an array since it began), then the new ones.
            self.matching = (self.matching if seen and isinstance(self.matching, array) else array("i")) + new
            return new
        self.matching = range(len(self.hits))
        return range(seen, len(self.hits))

    def _place(self, new, follow: bool) -> None:
        """Rows for the new hits: grouped by process from the second process on, else in the window."""
        if self.grouped is None and PR.several_of(self.processes, self.pids):
            kept = self._selected_index()
            grouped = self._group()
            position = grouped.position_of(kept) if kept is not None else None
            self._fill(0 if position is None else position - self.WINDOW // 2, position)
        elif self.grouped is not None:
            self._add_grouped(self.grouped, new, follow)
        else:
            self.shown = self.matching
            end = self.start + self.row_count
            if follow and len(self.shown) > self.start + self.WINDOW:
                # Keep the newest quarter: the next hits are added to it, row by row, until it is full again.
                self._fill(len(self.shown) - self.WINDOW // 4)
            elif end < len(self.shown) and self.row_count < self.WINDOW:
                self.add_rows(self._rows(end, min(len(self.shown), self.start + self.WINDOW)))

    def _follow(self, newest: int) -> None:
        """The cursor on the newest hit, the window moved to it if it is outside."""
        if not self.start <= newest < self.start + self.row_count:
            self._fill(newest - self.WINDOW // 2)
        self._auto_row = newest - self.start
        self.move_cursor(row=self._auto_row)
        if self.grouped is not None and newest != self._selected:
            # A redrawn window may leave the cursor's row number as it was: no highlight news then.
            self._selected = newest
            hit = self._hit_at(newest)
            if hit is not None:  # the newest row is always a hit, never a heading
                self.post_message(HitSelected(hit, auto=True))

    def _select_first(self, follow: bool, newest: int | None) -> None:
        """The first hits taken in: one of them is selected and said, even if the cursor did not move."""
        grouped = self.grouped
        if grouped is not None and not follow and newest is not None:
            first_pid = grouped.groups[0].pid
            position = grouped.position_of(grouped.members[first_pid][0]) if grouped.hits_in(first_pid) else None
            self._show(newest if position is None else position)
        elif self.shown and self.cursor_row == 0:
            # the cursor did not move: say so anyway
            self._selected = self.start
            hit = self._hit_at(self.start)
            if hit is not None:
                self.post_message(HitSelected(hit, auto=follow))

    def _selected_index(self) -> int | None:
        """The index in the table of the hit the cursor is on (None on a heading, or with no rows)."""
        if not self.row_count or not 0 <= self.position < len(self.shown):
            return None
        item = self.shown[self.position]
        return None if isinstance(item, Heading) else item

    def _group(self) -> ProcessRows:
        """Hits from several processes: the rows become each process's heading and hits."""
        grouped = self.grouped = ProcessRows(self.hits, self.processes)
        grouped.add(self.matching)
        self.shown = grouped
        return grouped

    def _add_grouped(self, grouped: ProcessRows, new: Sequence[int], follow: bool) -> None:
        """New hits land in their process's group, maybe above the window or inside it: the window keeps
        the hit the cursor is on, and is drawn again only when its rows changed."""
        if not len(new):
            return
        kept = self.shown[self.position] if self.row_count and self.position < len(self.shown) else None
        top = self.shown[self.start] if self.row_count and self.start < len(self.shown) else None
        before = [self.shown[i] for i in range(self.start, self.start + self.row_count)]
        grouped.add(new)
        start = self._position_of_item(top) if top is not None else 0
        start = self.start if start is None else start
        rows = len(self.shown) - start
        if self.row_count == self.WINDOW and rows >= self.WINDOW:
            after = [self.shown[i] for i in range(start, start + self.row_count)]
        else:
            after = [self.shown[i] for i in range(start, min(len(self.shown), start + self.WINDOW))]
        if after == before or (start == self.start and after[:len(before)] == before):
            # Hits above the window moved it down, or rows came at its end: the rest stays as it is, but
            # for the hit counts of the headings in it.
            self.start = start
            if len(after) > len(before):
                self.add_rows(self._rows(start + len(before), start + len(after)))
            for row, item in enumerate(before):
                if isinstance(item, Heading):
                    self.update_cell_at(Coordinate(row, 2), self._heading(item)[2])
            return
        position = self._position_of_item(kept) if kept is not None else None
        if follow:
            position = None  # add_hits then moves to the newest
        self._fill(start, position)

    def _position_of_item(self, item) -> int | None:
        if self.grouped is None:  # ungrouped rows are the hits' own positions
            return item
        if isinstance(item, Heading):
            return self.grouped.heading_position(item.pid)
        return self.grouped.position_of(item)

    def set_processes(self, processes: list[Process]) -> None:
        """What the session says of its processes (a live run: again as each starts and ends)."""
        self.processes = list(processes)
        if self.grouped is None:
            if PR.several_of(self.processes, self.pids):
                self.add_hits([])
            return
        kept = self._selected_index()
        self.grouped.set_processes(self.processes)
        position = self.grouped.position_of(kept) if kept is not None else None
        self._fill(self.start, position if position is not None else self.position)

    def _retitle(self) -> None:
        title = f"hits ({len(self.hits):,})"
        if self.search.needle:
            title = f"hits · {len(self.matching):,} of {len(self.hits):,} contain “{self.search.needle}”"
        if self.grouped is not None:
            n = len(self.grouped.groups)
            title += f" · {n} process{'' if n == 1 else 'es'}"
        self.border_title = title

    def filter(self, text: str) -> None:
        """Show only the hits whose breakpoint or frames contain ``text`` (any case); "" shows all."""
        needle = text.lower()
        if needle == self.search.needle:
            return
        selected = self.selected_hit
        self.search.needle = needle
        self.matching = self.search.matching(self.hits, 0) if needle else range(len(self.hits))
        if self.grouped is not None:
            self._group()
        else:
            self.shown = self.matching
        self._retitle()
        self._selected = None
        self._fill(0, 0)
        if selected is not None:
            index = self._index_of_seq(selected.seq)
            position = self._position_of_index(index) if index is not None else None
            if position is not None:  # still shown: the cursor stays on it; hidden: the search stays as typed
                self._show(position)

    @property
    def selected_hit(self) -> Hit | None:
        if self.row_count and 0 <= self.position < len(self.shown):
            return self._hit_at(self.position)
        return None

    def _index_of_seq(self, seq: int) -> int | None:
        hits = self.hits
        i = bisect_left(hits.seqs, seq)  # a table is in seq order
        return i if i < len(hits) and hits.seqs[i] == seq else None

    def select_seq(self, seq: int) -> None:
        """Put the cursor on the hit numbered ``seq`` (clearing a filter that hides it)."""
        index = self._index_of_seq(seq)
        if index is None:
            return
        position = self._position_of_index(index)
        if position is None:
            self.app.query_one("#search", SearchBar).action_clear()
            self.filter("")
            position = self._position_of_index(index)
        if position is not None:
            self._show(position)

    def select_same(self, hit: Hit) -> None:
        """Put the cursor on ``hit`` in a table that replaced the one it came from: the same number, or
        (a live run whose hits were numbered as they came) the same time in the same process."""
        index = self._index_of_seq(hit.seq)
        hits = self.hits
        if index is not None and hits[index].time == hit.time and hits[index].thread.pid == hit.thread.pid:
            self.select_seq(hit.seq)
            return
        if isinstance(hits, HitTable):
            at = 0
            while True:
                try:
                    at = hits.times.index(hit.time, at)
                except ValueError:
                    return
                if hits.sites[hits.rows[at]].thread.pid == hit.thread.pid:
                    self.select_seq(hits.seqs[at])
                    return
                at += 1

    def _position_of_index(self, index: int) -> int | None:
        """The row of the hit at ``index`` of the table; None if a search hides it."""
        if self.grouped is not None:
            return self.grouped.position_of(index)
        position = bisect_left(self.shown, index)
        return position if position < len(self.shown) and self.shown[position] == index else None

    def select_newest(self) -> None:
        newest = self.newest_position()
        if newest is not None:
            self._show(newest)

    def action_first_row(self) -> None:
        if self.shown:
            self._show(0)

    def action_last_row(self) -> None:
        """The last row, as End means in any table (grouped by process, the newest hit may be higher up:
        G selects that one)."""
        if self.shown:
            self._show(len(self.shown) - 1)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.cursor_row != self.cursor_row:
            return  # the news of a row the cursor has left since (the window moved under it)
        auto, self._auto_row = event.cursor_row == self._auto_row, None
        position = self.start + event.cursor_row
        if not 0 <= position < len(self.shown):
            return
        if position != self._selected:
            self._selected = position
            hit = self._hit_at(position)
            if hit is not None:  # a process's heading: the call path keeps the last hit shown
                self.post_message(HitSelected(hit, auto=auto))
        if self._near_edge():
            self.call_after_refresh(self._recentre)

    def _near_edge(self) -> bool:
        """The cursor close to the window's top or end, with hits beyond it. A window not yet full gets
        the new hits of a live run as rows of its own (``add_hits``): moving it would cost a refill a batch."""
        row = self.cursor_row
        return ((row < self.MARGIN and self.start > 0)
                or (self.row_count >= self.WINDOW and row >= self.row_count - self.MARGIN
                    and self.start + self.row_count < len(self.shown)))

    def _recentre(self) -> None:
        if self._near_edge():
            position = self.position
            self._fill(min(position - self.WINDOW // 2, len(self.shown) - self.WINDOW), position)
