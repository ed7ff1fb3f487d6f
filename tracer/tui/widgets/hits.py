"""The hits pane: one row per recorded hit, appended in batches while a run records; ``/`` filters."""
from __future__ import annotations

import os
from array import array
from bisect import bisect_left
from typing import Sequence

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from tracer.export import paths as P
from tracer.hit_table import HitTable
from tracer.model import Hit
from tracer.tui.messages import HitSelected
from tracer.tui.widgets._style import ROW_BINDINGS, RowJumps, frame_name


def haystack(hit: Hit) -> str:
    """The text a search looks in: the breakpoint, the thread, and each frame's names and place."""
    parts = [hit.breakpoint or "", hit.signal or "", hit.thread.names]
    if hit.thread.pid is not None:
        parts.append(f"pid {hit.thread.pid}")
    for f in hit.frames:
        parts += [f.function or "", f.short or "", f.file or "",
                  os.path.basename(f.library) if f.library else ""]
    return "\n".join(parts).lower()


class HitsTable(RowJumps, DataTable):
    """A window of rows onto the session's hits: ``hits`` is the app's table of every hit (a few numbers
    each, ``tracer.hit_table``), ``shown`` the indexes of those a search lets through (all of them
    unless one filters), and the rows are ``shown[start:start + WINDOW]``. The window follows the
    cursor, so a million hits cost a few hundred rows."""

    BINDINGS = [Binding(k, a, d, show=False) for k, a, d in ROW_BINDINGS]
    WINDOW = 400  # rows: Textual measures each row it is given (~1 ms a row on a busy machine)
    MARGIN = 40  # the cursor this close to the window's edge, with hits beyond it: the window moves

    def __init__(self, follow: bool = False, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.follow = follow
        """Live runs: while the cursor sits on the newest hit, new hits move it along."""
        self.hits: Sequence[Hit] = HitTable()
        self.shown: Sequence[int] = range(0)
        self.start = 0
        self.cwd: str | None = None
        self.needle = ""
        self._haystacks: dict[tuple, str] = {}  # by frames (hits of a hot path share them), thread, ...
        self._auto_row: int | None = None
        self._selected: int | None = None  # the index in ``shown`` last told as selected
        self.pids: set[int] = set()  # the processes hits came from: shown with each hit once there are several
        self.roles: dict[int, str] = {}  # pid -> its role (DataLoader worker 0, rank 1), when the session says
        self._pid_sites = 0  # sites of self.hits whose pid is in self.pids
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
        return self.follow and (not self.shown or self.position >= len(self.shown) - 1)

    def matches(self, hit: Hit) -> bool:
        if not self.needle:
            return True
        key = (id(hit.frames), hit.breakpoint, hit.signal, hit.thread.names)
        text = self._haystacks.get(key)
        if text is None:
            text = self._haystacks[key] = haystack(hit)
        return self.needle in text or self.needle in (hit.breakpoint or "").lower()

    def _matching(self, first: int) -> list[int] | array:
        """The indexes from ``first`` on of the hits a search lets through (a table's: once a site)."""
        hits = self.hits
        if isinstance(hits, HitTable):
            sites = {i for i, site in enumerate(hits.sites) if self.matches(site.hit(0, 0.0))}
            rows = hits.rows
            return array("i", (i for i in range(first, len(rows)) if rows[i] in sites))
        return [i for i in range(first, len(hits)) if self.matches(hits[i])]

    def _row(self, hit: Hit) -> tuple:
        inner = hit.innermost
        origin = P.innermost_python(hit.frames)
        thread = f"{hit.thread.id}" + (f" {hit.thread.names}" if hit.thread.names else "")
        pid = hit.thread.pid
        if pid is not None and len(self.pids) > 1:
            role = self.roles.get(pid)
            thread = f"pid {pid}" + (f" ({role})" if role else "") + f" · {thread}"
        return (
            Text(str(hit.seq), justify="right"),
            Text(hit.breakpoint or (hit.signal or "?"), style="cyan" if hit.breakpoint else "bold red"),
            frame_name(inner) if inner else Text("(no frames)", style="grey50"),
            Text(P.frame_location(origin, self.cwd) or "", style="green", no_wrap=True) if origin else "",
            Text(thread, no_wrap=True),
        )

    def _rows(self, first: int, stop: int) -> list[tuple]:
        hits, shown = self.hits, self.shown
        return [self._row(hits[shown[i]]) for i in range(first, stop)]

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
        first = not self.shown
        if isinstance(hits, HitTable):
            seen = len(self.hits) if hits is self.hits else 0
            self.hits = hits
        else:
            seen = len(self.hits)
            if not isinstance(self.hits, HitTable):
                self.hits = HitTable(self.hits)
            self.hits.extend(hits)
        if seen == 0 and self.row_count:
            self.clear()
            self.start = 0
        if seen == 0:
            self._pid_sites = 0
        sites = self.hits.sites  # only the sites new since the last call: a live run adds hits often
        self.pids.update(site.thread.pid for site in sites[self._pid_sites:] if site.thread.pid is not None)
        self._pid_sites = len(sites)
        if self.needle:
            self.shown = (self.shown if seen else array("i")) + self._matching(seen)
        else:
            self.shown = range(len(self.hits))
        end = self.start + self.row_count
        if follow and len(self.shown) > self.start + self.WINDOW:
            # Keep the newest quarter: the next hits are added to it, row by row, until it is full again.
            self._fill(len(self.shown) - self.WINDOW // 4)
        elif end < len(self.shown) and self.row_count < self.WINDOW:
            self.add_rows(self._rows(end, min(len(self.shown), self.start + self.WINDOW)))
        self._retitle()
        if follow and self.shown:
            self._auto_row = len(self.shown) - 1 - self.start
            self.move_cursor(row=self._auto_row)
        if first and self.shown and self.cursor_row == 0:
            # the cursor did not move: say so anyway
            self._selected = self.start
            self.post_message(HitSelected(self.hits[self.shown[self.start]], auto=follow))

    def _retitle(self) -> None:
        title = f"hits ({len(self.hits):,})"
        if self.needle:
            title = f"hits · {len(self.shown):,} of {len(self.hits):,} contain “{self.needle}”"
        self.border_title = title

    def filter(self, text: str) -> None:
        """Show only the hits whose breakpoint or frames contain ``text`` (any case); "" shows all."""
        needle = text.lower()
        if needle == self.needle:
            return
        selected = self.selected_hit
        self.needle = needle
        self.shown = self._matching(0) if needle else range(len(self.hits))
        self._retitle()
        self._selected = None
        self._fill(0, 0)
        if selected is not None:
            self.select_seq(selected.seq)

    @property
    def selected_hit(self) -> Hit | None:
        if self.row_count and 0 <= self.position < len(self.shown):
            return self.hits[self.shown[self.position]]
        return None

    def _index_of_seq(self, seq: int) -> int | None:
        hits = self.hits
        if isinstance(hits, HitTable):
            i = bisect_left(hits.seqs, seq)  # a table is in seq order
            return i if i < len(hits) and hits.seqs[i] == seq else None
        return next((i for i, h in enumerate(hits) if h.seq == seq), None)

    def select_seq(self, seq: int) -> None:
        """Put the cursor on the hit numbered ``seq`` (clearing a filter that hides it)."""
        index = self._index_of_seq(seq)
        if index is None:
            return
        position = bisect_left(self.shown, index)
        if position >= len(self.shown) or self.shown[position] != index:
            self.app.query_one("#search").action_clear()
            self.filter("")
            position = index
        self._show(position)

    def select_newest(self) -> None:
        if self.shown:
            self._show(len(self.shown) - 1)

    def action_first_row(self) -> None:
        if self.shown:
            self._show(0)

    def action_last_row(self) -> None:
        self.select_newest()

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
            self.post_message(HitSelected(self.hits[self.shown[position]], auto=auto))
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
