"""The gdb prompt (``:``): a line typed here runs in gdb, in the thread and frame selected in the TUI."""
from __future__ import annotations

import os

from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

HISTORY = 500  # lines kept, as gdb's own history keeps 256 by default


def common_prefix(lines: list[str]) -> str:
    return os.path.commonprefix(lines) if lines else ""


class PromptBar(Input):
    """Hidden until ``:``; enter runs the line and keeps the bar open for the next one (an empty line
    runs the last one again, as gdb does), ↑↓ walk the history, tab completes, esc closes."""

    BINDINGS = [
        Binding("escape", "close", "close the gdb prompt", show=False),
        Binding("up", "history(-1)", "the line before", show=False),
        Binding("down", "history(1)", "the line after", show=False),
        Binding("tab", "complete", "complete the line (gdb's completion)", show=False, priority=True),
    ]

    class Sent(Message):
        def __init__(self, line: str) -> None:
            super().__init__()
            self.line = line

    class CompletionWanted(Message):
        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs) -> None:
        super().__init__(placeholder="(gdb) a command, run in the selected thread and frame (tab completes, "
                                     "↑↓ history, esc closes)", **kwargs)
        self.display = False
        self.history: list[str] = []
        self._at: int | None = None  # where ↑↓ are in the history; None: the line being typed
        self._typed = ""

    def open(self) -> None:
        self.display = True
        self.focus()

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        line = self.value.strip()
        if not line and self.history:
            line = self.history[-1]  # gdb: an empty line repeats the last command
        if not line:
            return
        if not self.history or self.history[-1] != line:
            self.history.append(line)
            del self.history[:-HISTORY]
        self._at = None
        self.value = ""
        self.post_message(self.Sent(line))

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        if self._at is None:
            if step > 0:
                return
            self._typed = self.value
            at = len(self.history) - 1
        else:
            at = self._at + step
        if at >= len(self.history):
            self._at = None
            self.value = self._typed
        else:
            self._at = max(0, at)
            self.value = self.history[self._at]
        self.cursor_position = len(self.value)

    def action_complete(self) -> None:
        self.post_message(self.CompletionWanted(self.value))

    def completed(self, text: str, matches: list[str]) -> list[str]:
        """gdb's matches for ``text`` arrived: the line grows by what they share; returns the matches
        to list when they still differ (as gdb lists them on a second tab)."""
        if self.value != text or not matches:
            return []  # typed on meanwhile, or nothing fits
        shared = common_prefix(matches)
        if len(matches) == 1:
            shared = matches[0] + " "
        if len(shared) > len(text):
            self.value = shared
            self.cursor_position = len(shared)
        return matches if len(matches) > 1 else []

    def action_close(self) -> None:
        self.value = ""
        self._at = None
        self.display = False
        self.app.query_one("#callpath").focus()
