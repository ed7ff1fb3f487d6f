"""The hits pane: one row per recorded hit, appended in batches while a run records; ``/`` filters."""
from __future__ import annotations

import os

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from tracer.export import paths as P
from tracer.model import Hit
from tracer.tui.messages import HitSelected
from tracer.tui.widgets._style import ROW_BINDINGS, RowJumps, frame_name


def haystack(hit: Hit) -> str:
    """The text a search looks in: the breakpoint, the thread, and each frame's names and place."""
    parts = [hit.breakpoint or "", hit.signal or "", hit.thread.names]
    for f in hit.frames:
        parts += [f.function or "", f.short or "", f.file or "",
                  os.path.basename(f.library) if f.library else ""]
    return "\n".join(parts).lower()


class HitsTable(RowJumps, DataTable):
    """``hits`` holds every hit in session order; ``shown`` the indexes of those in the rows (all of
    them unless a search filters)."""

    BINDINGS = [Binding(k, a, d, show=False) for k, a, d in ROW_BINDINGS]

    def __init__(self, follow: bool = False, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.follow = follow
        """Live runs: while the cursor sits on the newest hit, new hits move it along."""
        self.hits: list[Hit] = []
        self.shown: list[int] = []
        self.cwd: str | None = None
        self.needle = ""
        self._haystacks: dict[int, str] = {}  # id(frames) -> haystack: hits of a hot path share frames
        self._auto_row: int | None = None
        self.border_title = "hits"

    def on_mount(self) -> None:
        self.add_column("#", key="seq")
        self.add_column("breakpoint", key="bp")
        # The thread last: it is nearly always the main one, and the pane is narrow.
        self.add_column("innermost frame", key="inner")
        self.add_column("called from", key="from")
        self.add_column("thread", key="thread")

    @property
    def following(self) -> bool:
        return self.follow and (not self.shown or self.cursor_row >= len(self.shown) - 1)

    def matches(self, hit: Hit) -> bool:
        if not self.needle:
            return True
        text = self._haystacks.get(id(hit.frames))
        if text is None:
            text = self._haystacks[id(hit.frames)] = haystack(hit)
        return self.needle in text or self.needle in (hit.breakpoint or "").lower()

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

    def add_hits(self, hits: list[Hit]) -> None:
        follow = self.following
        first = not self.shown
        start = len(self.hits)
        self.hits.extend(hits)
        new = [start + i for i, hit in enumerate(hits) if self.matches(hit)]
        self.shown.extend(new)
        self.add_rows([self._row(self.hits[i]) for i in new])
        self._retitle()
        if follow and self.shown:
            self._auto_row = len(self.shown) - 1
            self.move_cursor(row=self._auto_row)
        if first and self.shown and self.cursor_row == 0:
            # the cursor did not move: say so anyway
            self.post_message(HitSelected(self.hits[self.shown[0]], auto=follow))

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
        self.shown = [i for i, hit in enumerate(self.hits) if self.matches(hit)]
        self.clear()
        self.add_rows([self._row(self.hits[i]) for i in self.shown])
        self._retitle()
        if selected is not None:
            self.select_seq(selected.seq)

    @property
    def selected_hit(self) -> Hit | None:
        if 0 <= self.cursor_row < len(self.shown):
            return self.hits[self.shown[self.cursor_row]]
        return None

    def select_seq(self, seq: int) -> None:
        """Put the cursor on the hit numbered ``seq`` (clearing a filter that hides it)."""
        index = next((i for i, h in enumerate(self.hits) if h.seq == seq), None)
        if index is None:
            return
        if index not in self.shown:
            self.app.query_one("#search").action_clear()
            self.filter("")
        self.move_cursor(row=self.shown.index(index))

    def select_newest(self) -> None:
        if self.shown:
            self.move_cursor(row=len(self.shown) - 1)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        auto, self._auto_row = event.cursor_row == self._auto_row, None
        if 0 <= event.cursor_row < len(self.shown):
            self.post_message(HitSelected(self.hits[self.shown[event.cursor_row]], auto=auto))
