"""The input bar (``>``): a line typed here goes to the launched target's standard input."""
from __future__ import annotations

from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class InputBar(Input):
    """Hidden until ``>``; enter sends the line (and a newline) and keeps the bar open for the next one,
    esc closes it. The target's terminal does not echo: the output pane shows what was sent."""

    BINDINGS = [Binding("escape", "close", "close the input bar", show=False)]

    class Sent(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs) -> None:
        super().__init__(placeholder="a line for the target's standard input (enter sends it, esc closes)",
                         **kwargs)
        self.display = False

    def open(self) -> None:
        self.display = True
        self.focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Sent(self.value))
        self.value = ""

    def action_close(self) -> None:
        self.value = ""
        self.display = False
        self.app.query_one("#hits").focus()
