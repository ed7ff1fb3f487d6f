"""Modal screens: yes/no questions (quitting kills a launched target), add a breakpoint, the help,
the distinct call paths, the session's warnings."""
from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from rich.text import Text
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.content import Content
from textual.widgets import Button, DataTable, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from tracer.export import paths as P
from tracer.text.escape import visible
from tracer.tui.messages import CompletionsFound
from tracer.tui.widgets.table import Table

COMPLETION_DELAY = 0.3  # seconds of no typing before the symbol index is asked


class Confirm(ModalScreen[bool]):
    """A yes/no question: y or the first button says yes, n, esc or the second no (the default)."""

    BINDINGS = [Binding("y", "answer(True)", "yes"), Binding("n,escape", "answer(False)", "no")]

    def __init__(self, question: str, yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.question = question
        self.labels = (yes, no)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Content(self.question), id="question")
            with Horizontal(id="buttons"):
                # Content, not a str: a str label is markup, and "[y]" would vanish as a tag.
                yield Button(Content(f"{self.labels[0]} [y]"), variant="error", id="yes")
                yield Button(Content(f"{self.labels[1]} [n]"), variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class ConfirmQuit(Confirm):
    """Quitting kills a launched target: asked first."""

    def __init__(self, question: str) -> None:
        super().__init__(question, "Quit", "Stay")


class HelpScreen(ModalScreen[None]):
    """Every key with what it does, grouped; the footer only has room for a word each."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "close")]
    GROUPS = (("run", "the target (live runs)"), ("breakpoints", "breakpoints"), ("view", "looking around"),
              ("panes", "panes"))

    def __init__(self, keys, live: bool) -> None:
        super().__init__()
        self.keys = keys
        self.live = live

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Label(Content("Keys (? or esc closes)"), id="question")
            yield Static(self._table(), id="help")

    def _table(self) -> Text:
        t = Text()
        for group, title in self.GROUPS:
            keys = [k for k in self.keys if k.group == group]
            if not keys:
                continue
            if t:
                t.append("\n")
            t.append(title + (" — a recorded session has no target" if group == "run" and not self.live
                              else "") + "\n", style="bold underline")
            for k in keys:
                t.append(f"  {k.shown:>8}  ", style="bold cyan")
                t.append(k.help + "\n")
        return t

    def action_close(self) -> None:
        self.dismiss(None)


class WarningsScreen(ModalScreen[None]):
    """Every warning of the session, whole: the warnings line has room for the newest one only."""

    BINDINGS = [Binding("escape,w,q", "close", "close")]

    def __init__(self, warnings: list[str]) -> None:
        super().__init__()
        self.warnings = list(warnings)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            n = len(self.warnings)
            yield Label(Content(f"{n} warning{'s' if n != 1 else ''} (w or esc closes)"), id="question")
            yield Static(self._text(), id="warnings-list")

    def _text(self) -> Text:
        t = Text()
        for i, w in enumerate(self.warnings):
            if i:
                t.append("\n")
            t.append("⚠ ", style="bold yellow")
            t.append(visible(w) + "\n")
        return t

    def action_close(self) -> None:
        self.dismiss(None)


class PathsScreen(ModalScreen[int | None]):
    """The distinct call paths of the hits (as ``pttrace show`` groups them), the most taken first;
    enter selects the first hit of one."""

    BINDINGS = [Binding("escape,p,q", "close", "close")]

    def __init__(self, hits, cwd: str | None) -> None:
        super().__init__()
        self.paths = sorted(P.group(hits), key=lambda p: -p.count)
        self.cwd = cwd

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            n = sum(p.count for p in self.paths)
            yield Label(Content(f"{len(self.paths)} distinct call paths of {n:,} hits "
                                "(enter shows the first hit of one, esc closes)"), id="question")
            yield Table(id="paths", cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(Table)
        table.add_columns("hits", "breakpoint", "innermost frame", "called from", "layers")
        for i, path in enumerate(self.paths):
            origin = P.innermost_python(path.frames)
            table.add_row(Text(f"{path.count:,}", justify="right"), Text(", ".join(path.breakpoints), style="cyan"),
                          Text(path.title), Text(P.frame_location(origin, self.cwd) or "" if origin else "",
                                                 style="green"),
                          Text(" › ".join(path.layers), style="grey62"), key=str(i))
        table.focus()

    @on(DataTable.RowSelected)
    def _picked(self, event: DataTable.RowSelected) -> None:
        self.dismiss(self.paths[event.cursor_row].first.seq)

    def action_close(self) -> None:
        self.dismiss(None)


class AddBreakpoint(ModalScreen[str | None]):
    """An Input for the spec; close names appear below it as the user types. ↑↓ choose one and
    enter takes it (tab puts it in the field); a name nothing loaded defines is refused, with the
    closest names, unless ctrl+o adds it as pending on purpose."""

    BINDINGS = [
        Binding("escape", "cancel", "cancel"),
        Binding("tab", "take_suggestion", "complete", priority=True),
        Binding("down", "move(1)", show=False, priority=True),
        Binding("up", "move(-1)", show=False, priority=True),
        Binding("ctrl+o", "add_pending", "add as pending", show=False, priority=True),
    ]
    HINT = "enter adds · ↑↓ choose a name · tab completes · esc cancels"

    def __init__(self, complete, check=lambda spec: None) -> None:
        """``complete(text) -> list[str]`` and ``check(spec) -> Refusal | None`` run in worker
        threads (they read symbol indexes)."""
        super().__init__()
        self._complete = complete
        self._check = check
        self._timer: Timer | None = None
        self._chosen = False  # the user moved onto a suggestion: enter takes it
        self._refused: str | None = None  # the spec just refused: ctrl+o adds it anyway

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Break on a function (C++ name, at::_ops::X::call, FILE:LINE):")
            yield Input(placeholder="e.g. wrapper_CPU_sigmoid", id="spec")
            yield OptionList(id="suggestions")
            yield Label(self.HINT, id="hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).display = False
        self.query_one(Input).focus()

    def _hint(self, text: str = "", style: str = "") -> None:
        self.query_one("#hint", Label).update(Text(text or self.HINT, style=style))

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        if self._timer is not None:
            self._timer.stop()
        if self._refused is not None and event.value.strip() != self._refused:
            self._refused = None
            self._hint()
        text = event.value.strip()
        if len(text) < 3:
            self._show([])
            return
        self._timer = self.set_timer(COMPLETION_DELAY, lambda: self._lookup(text))

    @work(thread=True, exclusive=True, group="complete")
    def _lookup(self, text: str) -> None:
        try:
            names, note = self._complete(text), ""
        except Exception as exc:
            names, note = [], f"no completion: {getattr(exc, 'message', None) or exc}"
        self.post_message(CompletionsFound(text, names, note))

    def on_completions_found(self, message: CompletionsFound) -> None:
        if message.query == self.query_one(Input).value.strip() and self._refused is None:
            self._show(message.names)
            if message.note:
                self._hint(message.note, "yellow")

    def _show(self, names: list[str]) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([Option(name) for name in names])
        options.display = bool(names)
        options.highlighted = None  # nothing is taken until the user chooses it
        self._chosen = False

    def action_move(self, delta: int) -> None:
        options = self.query_one(OptionList)
        if options.display and options.option_count:
            current = options.highlighted if options.highlighted is not None else -1
            options.highlighted = max(0, min(options.option_count - 1, current + delta))
            self._chosen = True

    def action_take_suggestion(self) -> None:
        options = self.query_one(OptionList)
        if options.display and options.option_count:
            spec = str(options.get_option_at_index(options.highlighted or 0).prompt)
            field = self.query_one(Input)
            field.value = spec
            field.cursor_position = len(spec)

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self._submit(str(event.option.prompt))

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        options = self.query_one(OptionList)
        if self._chosen and options.display and options.highlighted is not None:
            self._submit(str(options.get_option_at_index(options.highlighted).prompt))
        elif event.value.strip():
            self._submit(event.value.strip())

    def _submit(self, spec: str) -> None:
        self._hint(f"looking for {spec} in the target's libraries…", "grey62")
        self._verify(spec)

    @work(thread=True, exclusive=True, group="check")
    def _verify(self, spec: str) -> None:
        try:
            refusal = self._check(spec)
        except Exception:
            refusal = None  # cannot tell: gdb decides
        self.app.call_from_thread(self._verified, spec, refusal)

    def _verified(self, spec: str, refusal) -> None:
        if refusal is None:
            self.dismiss(spec)
            return
        self._refused = spec
        field = self.query_one(Input)
        if field.value.strip() != spec:
            field.value = spec
        self._show(list(refusal.suggestions))
        close = " · the closest names are below (↑↓, enter)" if refusal.suggestions else ""
        self._hint(f"{refusal.message}{close} · ctrl+o adds it anyway, pending until a library "
                   "defines it", "bold yellow")

    def action_add_pending(self) -> None:
        if self._refused is not None:
            self.dismiss(self._refused)

    def action_cancel(self) -> None:
        self.dismiss(None)
