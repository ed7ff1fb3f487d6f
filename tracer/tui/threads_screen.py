"""The thread list (``t``): every thread of the stopped target, as gdb lists them; enter picks the one to
look at and step (gdb's selected thread: s/n/f and the prompt act on it)."""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label

from tracer.tui.widgets.table import Table


class ThreadsScreen(ModalScreen[str | None]):
    """Rows: gdb's thread id, its LWP, name, state, innermost frame; the thread that stopped is marked."""

    BINDINGS = [Binding("escape,t,q", "close", "close")]

    def __init__(self, rows: list, stopped: str | None) -> None:
        super().__init__()
        self.rows = rows
        self.stopped = stopped

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(Content(f"{len(self.rows)} threads (enter looks at one: s, n, f and the prompt act on "
                                "it; esc closes)"), id="question")
            yield Table(id="paths", cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(Table)
        table.add_columns("", "thread", "LWP", "name", "state", "innermost frame")
        at = 0
        for i, row in enumerate(self.rows):
            mark = "*" if row.current else ("stopped here" if row.id == self.stopped else "")
            if row.current:
                at = i
            table.add_row(Text(mark, style="bold yellow"), Text(row.id, style="bold"), str(row.lwp or ""),
                          Text(row.name, style="cyan"), row.state, Text(row.frame, no_wrap=True), key=row.id)
        table.move_cursor(row=at)
        table.focus()

    @on(DataTable.RowSelected)
    def _picked(self, event: DataTable.RowSelected) -> None:
        self.dismiss(self.rows[event.cursor_row].id)

    def action_close(self) -> None:
        self.dismiss(None)
