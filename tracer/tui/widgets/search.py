"""The search bar (``/``): its text filters the hits and marks the frames of the call path."""
from __future__ import annotations

from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class SearchBar(Input):
    """Hidden until ``/``; enter keeps the filter and goes back to the hits, esc clears it."""

    BINDINGS = [Binding("escape", "clear", "clear the search", show=False)]

    class Searched(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs) -> None:
        super().__init__(placeholder="search hits and frames: a function, a file, a breakpoint "
                                     "(enter keeps it, esc clears)", **kwargs)
        self.display = False

    def open(self) -> None:
        self.display = True
        self.focus()

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Searched(event.value.strip()))

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not self.value.strip():
            self.display = False
        self.app.query_one("#hits").focus()

    def action_clear(self) -> None:
        self.value = ""  # posts Searched("")
        self.display = False
        self.app.query_one("#hits").focus()
