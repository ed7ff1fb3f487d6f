"""The session's warnings on a line of their own, above the status line: the newest, how many there are,
and the key that lists them all. Never in the target's output pane, whose own lines a long warning would
scroll out of view."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tracer.text.escape import visible


class WarningsLine(Static):
    """Hidden while the session has no warning."""

    def show_warnings(self, warnings: list[str]) -> None:
        self.display = bool(warnings)
        if not warnings:
            return
        t = Text(no_wrap=True, overflow="ellipsis")
        n = len(warnings)
        t.append(f"⚠ {n} warning{'s' if n > 1 else ''}", style="bold black on yellow")
        t.append(" (w lists them)  ", style="grey62")
        t.append(visible(warnings[-1]).replace("\n", " "), style="yellow")
        self.update(t)
