"""The app's side of the gdb prompt (``:``): what the selected row means to gdb, the line run in a
worker, gdb's answer in the output pane; ``t``, the thread list; ``y``, copying a frame. A part of
``PttraceApp`` (tracer/tui/app_base.py)."""
from __future__ import annotations

from rich.text import Text
from textual import work

from tracer.errors import PttraceError
from tracer.recorder.prompt import Place, row_of_level
from tracer.tui.app_base import AppBase
from tracer.tui.messages import PromptAnswered, PromptCompleted
from tracer.tui.widgets.output import OutputLog
from tracer.tui.widgets.prompt_bar import PromptBar

COMPLETIONS_LISTED = 40  # matches listed in the output pane on a tab; more are counted


def copied_text(frame, cwd: str | None) -> str:
    """``name  file:line`` of a frame (a native one without file:line: its library)."""
    from tracer.export import paths as P

    name = frame.function or frame.short or "??"
    where = P.frame_location(frame, cwd)
    if where is None and frame.library:
        where = frame.library + (f"+0x{frame.offset:x}" if frame.offset is not None else "")
    return f"{name}  {where}" if where else name


class PromptActions(AppBase):
    held_stop_notes: list[str] | None = None
    """While a line typed at the prompt runs (None otherwise): the stops gdb reported meanwhile, told after
    gdb's answer to the line (``next``'s "Single stepping until exit...", which gdb says before it stops)."""

    def _show_evals(self) -> None:
        """``--eval``: the shown hit's values under the call path (``expr = value · ...``)."""
        path = self.call_path
        values = self.state.evals.get(path.hit.seq) if path.hit is not None and path.hit.seq else None
        path.border_subtitle = Text(" · ".join(v.line() for v in values)) if values else ""  # not markup

    def action_copy_frame(self) -> None:
        """``y``: the selected frame's full name and file:line (else its library) to the terminal's clipboard,
        by OSC 52, as text for notes or a ``b FILE:LINE``."""
        path = self.call_path
        index = path.selected_frame_index()
        if index is None:
            self.notify("no frame selected in the call path", severity="warning", timeout=3)
            return
        text = copied_text(path.frames[index], self.cwd)
        self.copy_to_clipboard(text)
        self.notify(f"copied: {text}", timeout=4)

    def action_threads(self) -> None:
        """``t``: the thread list; the thread picked is shown and stepped from then on."""
        why = self._prompt_closed()
        if why:
            self.notify(why.replace("gdb answers", "threads are listed"), severity="warning", timeout=4)
            return
        self._threads_worker()

    @work(thread=True, group="control", exit_on_error=False)
    def _threads_worker(self) -> None:
        try:
            rows = self.source.threads()
        except PttraceError as exc:
            self.call_from_thread(self.notify, exc.message, severity="warning", timeout=5)
            return
        self.call_from_thread(self._show_threads, rows)

    def _show_threads(self, rows) -> None:
        from tracer.tui.threads_screen import ThreadsScreen

        def picked(thread_id: str | None) -> None:
            if thread_id is not None:
                self._thread_picked_worker(thread_id)

        self.push_screen(ThreadsScreen(rows, str((self.state.last_stop or {}).get("thread-id") or "")), picked)

    @work(thread=True, group="control", exit_on_error=False)
    def _thread_picked_worker(self, thread_id: str) -> None:
        try:
            hit = self.source.select_thread(thread_id)
        except PttraceError as exc:
            self.call_from_thread(self.notify, exc.message, severity="warning", timeout=5)
            return
        self.call_from_thread(self._show_thread, thread_id, hit)

    def _show_thread(self, thread_id: str, hit) -> None:
        self.state.selected_thread = thread_id
        self._redraw_status()
        if hit is None:
            self.notify(f"thread {thread_id}: its call path could not be read", severity="warning", timeout=5)
            return
        self._pinned = True
        names = f" {hit.thread.names}" if hit.thread.names else ""
        self.call_path.show(hit, f"thread {thread_id}{names} (picked: s, n, f and the prompt act on it)", self.cwd,
                            stopped=True)

    def action_gdb_prompt(self) -> None:
        why = self._prompt_closed()
        if why:
            self.notify(why, severity="warning", timeout=4)
            return
        self.query_one(PromptBar).open()

    def _prompt_closed(self) -> str | None:
        if not self.source.live:
            return "a recorded session: there is no gdb to ask"
        if self.state.finished:
            return "the run has ended: gdb is gone"
        if not self.state.can_control:
            return "gdb is still starting"
        if self.state.target != "stopped":
            return "gdb answers while the target is stopped: interrupt it first (i)"
        return None

    def _place(self) -> Place:
        """The selected hit's thread and the call path's selected frame."""
        table = self.call_path
        hit = table.hit
        if hit is None:
            return Place(lwp=None)
        return Place(lwp=hit.thread.lwp, frames=tuple(hit.frames), index=table.selected_frame_index())

    def on_prompt_bar_sent(self, message: PromptBar.Sent) -> None:
        log = self.query_one(OutputLog)
        log.gdb_said(f"(gdb) {message.line}", style="bold green")
        why = self._prompt_closed()
        if why:
            log.gdb_said(why, style="yellow")
            return
        self.state.gdb = f"busy: {message.line.split()[0]}"
        self._redraw_status()
        self.held_stop_notes = []
        self._prompt_worker(message.line, self._place())

    @work(thread=True, group="control", exit_on_error=False)
    def _prompt_worker(self, line: str, place: Place) -> None:
        try:
            result = self.source.gdb_line(line, place, say=self._say_now)
        except PttraceError as exc:
            self.post_message(PromptAnswered(line, error=exc.message))
        except Exception as exc:  # a bug must reach the screen, not kill the app
            self.post_message(PromptAnswered(line, error=f"{type(exc).__name__}: {exc}"))
        else:
            self.post_message(PromptAnswered(line, result))

    def _say_now(self, text: str) -> None:
        """A note from the worker shown before gdb's answer (and before what the target prints meanwhile)."""
        self.call_from_thread(lambda: self.query_one(OutputLog).note(text, style="yellow"))

    def on_prompt_answered(self, message: PromptAnswered) -> None:
        if not self.state.finished and self.state.gdb.startswith("busy"):
            self.state.gdb = "ready"
        log = self.query_one(OutputLog)
        result = message.result
        if result is None:
            log.gdb_said(message.error or "gdb did not answer", style="red")
        else:
            if result.note:
                log.note(result.note, style="yellow")
            if result.text:
                log.gdb_said(result.text)
            if result.error:
                log.gdb_said(result.error, style="red")
        for note in self.held_stop_notes or ():
            log.note(note, style="cyan")
        self.held_stop_notes = None
        if result is not None:
            if result.moved_to is not None and self.call_path.hit is not None:
                index = row_of_level(self.call_path.frames, result.moved_to)
                if index is not None:
                    self.call_path.select_frame(index)  # the next line runs there, as after gdb's own up
            if result.hit is not None:
                self.show_stop(result.hit, f"`{message.line}`")
        self._redraw_status()
        self.refresh_bindings()

    def on_prompt_bar_completion_wanted(self, message: PromptBar.CompletionWanted) -> None:
        if self._prompt_closed() is None:
            self._complete_worker(message.text)

    @work(thread=True, group="complete", exclusive=True, exit_on_error=False)
    def _complete_worker(self, text: str) -> None:
        try:
            matches = self.source.gdb_complete(text)
        except PttraceError:
            matches = []
        self.post_message(PromptCompleted(text, matches))

    def on_prompt_completed(self, message: PromptCompleted) -> None:
        listed = self.query_one(PromptBar).completed(message.text, message.matches)
        if listed:
            log = self.query_one(OutputLog)
            shown = listed[:COMPLETIONS_LISTED]
            more = len(listed) - len(shown)
            log.gdb_said("  ".join(m.rsplit(" ", 1)[-1] for m in shown) + (f"  … {more} more" if more else ""),
                         style="grey70")
