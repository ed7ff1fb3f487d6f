"""What every part of the app shares: its event source, what it knows of the run (``TraceState``), and the
panes the parts write to. ``PttraceApp`` is put together from parts that each do one job (the gdb prompt,
control of the target, the target's input, export, quitting); each is a subclass of this base, so that
their handlers are Textual's own (``@on``, ``@work``) and the type checker sees what they use."""
from __future__ import annotations

from textual.app import App

from tracer.tui.sources import EventSource
from tracer.tui.state import TraceState
from tracer.tui.widgets.callpath import CallPathTable
from tracer.tui.widgets.hits import HitsTable
from tracer.tui.widgets.output import OutputLog
from tracer.tui.widgets.status import StatusLine


class AppBase(App[int]):
    def __init__(self, source: EventSource) -> None:
        super().__init__()
        self.source = source
        self.state = TraceState(live=source.live, gdb="starting" if source.live else "none",
                                target="starting" if source.live else "recorded",
                                mode=getattr(getattr(source, "config", None), "mode", "record"))
        self.cwd: str | None = None
        """The recording's working directory: relative paths of its frames are shown from it."""
        self._pinned = False
        """The call path shows where a step, finish, prompt line or thread pick stopped: hits recorded
        just before must not replace it."""
        self._quitting = False

    @property
    def hits_table(self) -> HitsTable:
        return self.query_one(HitsTable)

    @property
    def call_path(self) -> CallPathTable:
        return self.query_one(CallPathTable)

    @property
    def output(self) -> OutputLog:
        return self.query_one(OutputLog)

    def _drain(self) -> None:
        """Take in the source's events waiting in the inbox now (``PttraceApp`` has one)."""

    def _redraw_status(self) -> None:
        path = self.source.session_path
        self.query_one(StatusLine).render_state(self.state, path.name if path else self.source.label)

    def show_stop(self, hit, what: str, title: str | None = None) -> None:
        """The call path of a stop that is not a recorded hit (a step, a prompt line), kept on screen."""
        self.state.target = "stopped"
        self._pinned = True
        self.call_path.show(hit, title or f"where {what} stopped · thread {hit.thread.id} (not a recorded hit)",
                            self.cwd, stopped=True)
