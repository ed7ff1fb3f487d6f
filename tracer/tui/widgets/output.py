"""The target's own stdout and stderr, kept apart from the screen (gdb gives the target a pty)."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

PARTIAL_LINE_WAIT = 0.3  # seconds a line without its end waits for the rest before it is shown


class OutputLog(RichLog):
    """Lines are written whole; a partial line (a prompt, a progress bar) is shown after a short wait."""

    def __init__(self, **kwargs) -> None:
        # min_width: RichLog renders at least 78 columns wide by default, wider than this pane, so
        # long lines would run off its edge instead of wrapping.
        super().__init__(max_lines=5000, min_width=20, wrap=True, markup=False, highlight=False, **kwargs)
        self._partial = ""
        self._timer = None
        self.border_title = "target output"

    def write_output(self, chunks: list[str]) -> None:
        data = self._partial + "".join(chunks).replace("\r\n", "\n").replace("\r", "\n")
        lines = data.split("\n")
        self._partial = lines.pop()
        for line in lines:
            self.write(Text(line))
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self._partial:
            self._timer = self.set_timer(PARTIAL_LINE_WAIT, self._flush_partial)

    def _flush_partial(self) -> None:
        self._timer = None
        if self._partial:
            self.write(Text(self._partial))
            self._partial = ""

    def note(self, message: str, style: str = "yellow") -> None:
        """pttrace's own remarks (warnings), told apart from the target's output by their colour."""
        self._flush_partial()
        self.write(Text(f"pttrace: {message}", style=style))
