"""The target's own stdout and stderr, kept apart from the screen (gdb gives the target a pty)."""
from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.timer import Timer
from textual.widgets import RichLog

from tracer.text.escape import visible

PARTIAL_LINE_WAIT = 0.3  # seconds a line without its end waits for the rest before it is shown
MAX_LINES = 5000


STDERR_STYLE = "red"  # the target's stderr, under its own colours: told apart from its stdout


def shown(line: str, stream: str = "stdout") -> Text:
    """A line of the target's output as the pane shows it: its colours kept (SGR sequences), any other
    control sequence (a window title, a clipboard write, cursor moves) spelled out, never obeyed; a
    line of its stderr in red where it sets no colour of its own."""
    style = STDERR_STYLE if stream == "stderr" else ""
    text = Text.from_ansi(line, style=style)
    safe = visible(text.plain)
    return text if safe == text.plain else Text(safe, style=style)


class OutputLog(RichLog):
    """Lines are written whole; a partial line (a prompt, a progress bar) is shown after a short wait.

    RichLog wraps a line once, at the width it had when written: the lines are kept, and wrapped
    again when the width changes (a line wrapped at 160 columns lost its middle at 80)."""

    def __init__(self, **kwargs) -> None:
        # min_width: RichLog renders at least 78 columns wide by default, wider than this pane, so
        # long lines would run off its edge instead of wrapping.
        super().__init__(max_lines=MAX_LINES, min_width=8, wrap=True, markup=False, highlight=False, **kwargs)
        self._lines: deque[Text] = deque(maxlen=MAX_LINES)
        self._wrapped_at = 0
        self._partial: dict[str, str] = {}  # each stream's line without its end yet
        self._timer: Timer | None = None
        self.border_title = "target output"

    def write_output(self, chunks: list) -> None:
        """``chunks``: text the target wrote to its stdout, or (stream, text) pairs: each stream's lines are
        whole on their own (a partial stdout line is not cut by a stderr one)."""
        for chunk in chunks:
            stream, text = chunk if isinstance(chunk, tuple) else ("stdout", chunk)
            data = self._partial.get(stream, "") + text.replace("\r\n", "\n").replace("\r", "\n")
            lines = data.split("\n")
            self._partial[stream] = lines.pop()
            for line in lines:
                self._add(shown(line, stream))
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if any(self._partial.values()):
            self._timer = self.set_timer(PARTIAL_LINE_WAIT, self._flush_partial)

    def _flush_partial(self) -> None:
        self._timer = None
        for stream, rest in self._partial.items():
            if rest:
                self._add(shown(rest, stream))
        self._partial.clear()

    def note(self, message: str, style: str = "yellow") -> None:
        """pttrace's own remarks (what a stop or gdb says), told apart from the target's output by their colour."""
        self._flush_partial()
        self._add(Text(f"pttrace: {visible(message)}", style=style))

    def gdb_said(self, text: str, style: str = "") -> None:
        """gdb's own answer at the prompt, line by line, apart from the target's output by its colour (a
        partial line of the target's, a call's output being written, is left to be completed)."""
        for line in text.splitlines() or [""]:
            self._add(Text(visible(line.expandtabs()), style=style))

    def _add(self, line: Text) -> None:
        self._lines.append(line)
        self.write(line)

    def on_resize(self, event) -> None:
        super().on_resize(event)
        width = self.scrollable_content_region.width
        if width and width != self._wrapped_at:
            first = not self._wrapped_at
            self._wrapped_at = width
            if not first:
                self.clear()
                for line in self._lines:
                    self.write(line)
