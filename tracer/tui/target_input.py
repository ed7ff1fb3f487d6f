"""The launched target's standard input: whether it waits for a line (checked while it runs, said in the
status line and once in the output pane, so that a run never hangs silently on an ``input()``), and ``>``
to type one."""
from __future__ import annotations

from textual import on

from tracer.errors import PttraceError
from tracer.tui.app_base import AppBase
from tracer.tui.widgets.input_bar import InputBar

INPUT_CHECK_EVERY = 0.5  # seconds between looks at whether the running target waits for input


class InputActions(AppBase):
    def start_input_watch(self) -> None:
        """Start looking, for a launched target (an attached one reads its own terminal)."""
        if self.source.live and not self.source.attached:
            self.set_interval(INPUT_CHECK_EVERY, self._check_input)

    def _check_input(self) -> None:
        waiting = self.state.target == "running" and not self.state.finished and self.source.waiting_for_input()
        if waiting == self.state.waiting_input:
            return
        self.state.waiting_input = waiting
        self._redraw_status()
        if waiting:
            self.output.note("the target is waiting for input: press > and type a line", style="bold yellow")

    def action_type_input(self) -> None:
        if not self.source.live or self.source.attached or self.state.finished:
            why = ("a recorded session" if not self.source.live else
                   "attached: the target reads its own terminal" if self.source.attached else "the run has ended")
            self.notify(f"no target to type to ({why})", severity="warning", timeout=4)
            return
        self.query_one(InputBar).open()

    @on(InputBar.Sent)
    def _input_sent(self, message: InputBar.Sent) -> None:
        try:
            self.source.send_input(message.text + "\n")
        except PttraceError as exc:
            self.notify(exc.message, severity="warning", timeout=5)
            return
        self.output.note(f"> {message.text}", style="green")  # the terminal does not echo
        self.state.waiting_input = False
        self._redraw_status()
