"""Modal dialogs: confirm quitting (which kills a launched target) and add a breakpoint."""
from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.content import Content
from textual.widgets import Button, Input, Label, OptionList
from textual.widgets.option_list import Option

from tracer.tui.messages import CompletionsFound

COMPLETION_DELAY = 0.3  # seconds of no typing before the symbol index is asked


class ConfirmQuit(ModalScreen[bool]):
    BINDINGS = [Binding("y", "answer(True)", "yes"), Binding("n,escape", "answer(False)", "no")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Content(self.question), id="question")
            with Horizontal(id="buttons"):
                # Content, not a str: a str label is markup, and "[y]" would vanish as a tag.
                yield Button(Content("Quit [y]"), variant="error", id="yes")
                yield Button(Content("Stay [n]"), variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class AddBreakpoint(ModalScreen[str | None]):
    """An Input for the spec; close names appear below it as the user types (tab takes one)."""

    BINDINGS = [
        Binding("escape", "cancel", "cancel"),
        Binding("tab", "take_suggestion", "complete", priority=True),
        Binding("down", "move(1)", show=False, priority=True),
        Binding("up", "move(-1)", show=False, priority=True),
    ]

    def __init__(self, complete) -> None:
        """``complete(text) -> list[str]`` runs in a worker thread (it may read a symbol index)."""
        super().__init__()
        self._complete = complete
        self._timer = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Break on a function (C++ name, at::_ops::X::call, FILE:LINE):")
            yield Input(placeholder="e.g. wrapper_CPU_sigmoid", id="spec")
            yield OptionList(id="suggestions")
            yield Label("enter adds · tab completes · ↑↓ choose · esc cancels", id="hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).display = False
        self.query_one(Input).focus()

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        if self._timer is not None:
            self._timer.stop()
        text = event.value.strip()
        if len(text) < 3:
            self._show([])
            return
        self._timer = self.set_timer(COMPLETION_DELAY, lambda: self._lookup(text))

    @work(thread=True, exclusive=True, group="complete")
    def _lookup(self, text: str) -> None:
        try:
            names = self._complete(text)
        except Exception:
            names = []
        self.post_message(CompletionsFound(text, names))

    def on_completions_found(self, message: CompletionsFound) -> None:
        if message.query == self.query_one(Input).value.strip():
            self._show(message.names)

    def _show(self, names: list[str]) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([Option(name) for name in names])
        options.display = bool(names)
        if names:
            options.highlighted = 0

    def action_move(self, delta: int) -> None:
        options = self.query_one(OptionList)
        if options.option_count:
            current = options.highlighted if options.highlighted is not None else -1
            options.highlighted = max(0, min(options.option_count - 1, current + delta))

    def action_take_suggestion(self) -> None:
        options = self.query_one(OptionList)
        if options.display and options.highlighted is not None:
            spec = str(options.get_option_at_index(options.highlighted).prompt)
            field = self.query_one(Input)
            field.value = spec
            field.cursor_position = len(spec)

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(str(event.option.prompt))

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
