"""The hits pane: one row per recorded hit, appended in batches while a run records."""
from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from tracer.export import paths as P
from tracer.model import Hit
from tracer.tui.messages import HitSelected
from tracer.tui.widgets._style import ROW_BINDINGS, RowJumps, frame_name


class HitsTable(RowJumps, DataTable):
    """Rows are only ever appended, so a row's index is the hit's index in the session."""

    BINDINGS = [Binding(k, a, d, show=False) for k, a, d in ROW_BINDINGS]

    def __init__(self, follow: bool = False, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.follow = follow
        """Live runs: while the cursor sits on the newest hit, new hits move it along."""
        self.hits: list[Hit] = []
        self.cwd: str | None = None
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
        return self.follow and (not self.hits or self.cursor_row >= len(self.hits) - 1)

    def add_hits(self, hits: list[Hit]) -> None:
        follow = self.following
        start = len(self.hits)
        self.hits.extend(hits)
        rows = []
        for hit in hits:
            inner = hit.innermost
            origin = P.innermost_python(hit.frames)
            thread = f"{hit.thread.id}" + (f" {hit.thread.name}" if hit.thread.name else "")
            rows.append((
                Text(str(hit.seq), justify="right"),
                Text(hit.breakpoint or (hit.signal or "?"), style="cyan" if hit.breakpoint else "bold red"),
                frame_name(inner) if inner else Text("(no frames)", style="grey50"),
                Text(P.frame_location(origin, self.cwd) or "", style="green", no_wrap=True) if origin else "",
                Text(thread, no_wrap=True),
            ))
        self.add_rows(rows)
        self.border_title = f"hits ({len(self.hits):,})"
        if follow:
            self._auto_row = len(self.hits) - 1
            self.move_cursor(row=self._auto_row)
        if start == 0 and self.cursor_row == 0:
            self.post_message(HitSelected(self.hits[0], auto=follow))  # the cursor did not move: say so anyway

    def select_newest(self) -> None:
        if self.hits:
            self.move_cursor(row=len(self.hits) - 1)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        auto, self._auto_row = event.cursor_row == self._auto_row, None
        if 0 <= event.cursor_row < len(self.hits):
            self.post_message(HitSelected(self.hits[event.cursor_row], auto=auto))
