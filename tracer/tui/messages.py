"""Messages between the workers, the widgets and the app. Past tense: each says what happened."""
from __future__ import annotations

from pathlib import Path

from textual.message import Message

from tracer.session.model import Frame, Hit


class SourceEventsArrived(Message):
    """The event source put events in the inbox; the app drains them in one batch."""


class HitSelected(Message):
    """``auto``: the cursor moved to follow new hits, not because the user moved it."""

    def __init__(self, hit: Hit, auto: bool = False) -> None:
        super().__init__()
        self.hit = hit
        self.auto = auto


class FrameSelected(Message):
    def __init__(self, frame: Frame | None, cwd: str | None, hit=None) -> None:
        super().__init__()
        self.frame = frame
        self.cwd = cwd
        self.hit = hit  # the hit whose call path it was selected in (what the frame carried there)


class BreakpointRemovalRequested(Message):
    def __init__(self, spec: str) -> None:
        super().__init__()
        self.spec = spec


class BreakpointToggleRequested(Message):
    """``on``: what the user wants the breakpoint to become."""

    def __init__(self, spec: str, on: bool) -> None:
        super().__init__()
        self.spec = spec
        self.on = on


class ControlFinished(Message):
    """A control command ran in a worker. ``hit``: where the target stopped afterwards, if known."""

    def __init__(self, action: str, ok: bool, message: str = "", hit: Hit | None = None) -> None:
        super().__init__()
        self.action = action
        self.ok = ok
        self.message = message
        self.hit = hit


class CompletionsFound(Message):
    """``note``: why there are no names (the target's environment has no torch, ...), or ""."""

    def __init__(self, query: str, names: list[str], note: str = "") -> None:
        super().__init__()
        self.query = query
        self.names = names
        self.note = note


class ExportWritten(Message):
    def __init__(self, path: Path | None, hits: int = 0, error: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.hits = hits
        self.error = error


class PromptAnswered(Message):
    """A line typed at the gdb prompt ran (``result``: tracer.tui.sources.PromptResult) or could not
    (``error``: why, in one sentence)."""

    def __init__(self, line: str, result=None, error: str | None = None) -> None:
        super().__init__()
        self.line = line
        self.result = result
        self.error = error


class PromptCompleted(Message):
    """gdb's completions of the prompt line ``text`` (each a whole line)."""

    def __init__(self, text: str, matches: list[str]) -> None:
        super().__init__()
        self.text = text
        self.matches = matches
