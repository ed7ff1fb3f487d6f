"""The target's own stdout and stderr, kept apart from the screen (gdb gives the target a pty)."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog


class OutputLog(RichLog):
    """Lines are written whole; a partial line waits one batch for its end, then is shown anyway."""

    def __init__(self, **kwargs) -> None:
        super().__init__(max_lines=5000, wrap=False, markup=False, highlight=False, **kwargs)
        self._partial = ""
        self._partial_age = 0
        self.border_title = "target output"

    def write_output(self, chunks: list[str]) -> None:
        data = self._partial + "".join(chunks).replace("\r\n", "\n").replace("\r", "\n")
        lines = data.split("\n")
        self._partial = lines.pop()
        for line in lines:
            self.write(Text(line))
        self._partial_age = 0

    def tick(self) -> None:
        """Called once per batch: a partial line that has waited a whole batch is shown as is."""
        if self._partial:
            self._partial_age += 1
            if self._partial_age > 1:
                self.write(Text(self._partial))
                self._partial = ""

    def note(self, message: str, style: str = "yellow") -> None:
        """pttrace's own remarks (warnings), told apart from the target's output by their colour."""
        self.write(Text(f"pttrace: {message}", style=style))
