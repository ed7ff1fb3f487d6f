"""The pttrace TUI: breakpoints, hits, the call path of a hit, its source, the target's output.

The app is handed an ``EventSource`` (a live recorder or a saved session) and never touches gdb or
the disk itself: the source runs in a worker thread and its events land in an inbox that the app
drains in batches (at most ``MAX_BATCHES_PER_SECOND``), so 500 hits a second cost a few table
updates a second, not 500. Every control command (step, continue, add a breakpoint, ...) runs in a
worker too, and comes back as a message; failures become toasts.

``make_app`` is the one factory the CLI and the tests share.
"""
from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical

from tracer.errors import PttraceError
from tracer.session.model import Hit
from tracer.tui.messages import (
    BreakpointRemovalRequested,
    BreakpointToggleRequested,
    ControlFinished,
    ExportWritten,
    FrameSelected,
    HitSelected,
    SourceEventsArrived,
)
from tracer.tui.keys import KEYS
from tracer.tui.prompt import PromptActions
from tracer.tui.screens import AddBreakpoint, Confirm, ConfirmQuit, HelpScreen, PathsScreen
from tracer.tui.sources import CONTROL_ACTIONS, EventSource, LiveSource, SessionSource, SourceEvent
from tracer.tui.state import TraceState, describe_stop
from tracer.tui.stylesheet import APP_CSS
from tracer.tui.widgets.breakpoints import BreakpointsTable
from tracer.tui.widgets.callpath import CallPathTable
from tracer.tui.widgets.hits import HitsTable
from tracer.tui.widgets.keybar import KeyBar
from tracer.tui.widgets.input_bar import InputBar
from tracer.tui.widgets.prompt_bar import PromptBar
from tracer.tui.widgets.search import SearchBar
from tracer.tui.widgets.output import OutputLog
from tracer.tui.widgets.source import SourcePane
from tracer.tui.widgets.status import StatusLine

MAX_BATCHES_PER_SECOND = 5
JUMP_WINDOW = 1.0
INPUT_CHECK_EVERY = 0.5  # seconds between looks at whether the running target waits for input
_LIVE_ACTIONS = {"toggle_mode", "resume", "control", "interrupt", "add_breakpoint"}


class Inbox:
    """Thread-safe queue of source events; ``notify`` is called once per batch, not per event."""

    def __init__(self, notify: Callable[[], object]):
        self._events: deque[SourceEvent] = deque()
        self._lock = threading.Lock()
        self._pending = False
        self._notify = notify

    def push(self, event: SourceEvent) -> None:
        with self._lock:
            self._events.append(event)
            if self._pending:
                return
            self._pending = True
        self._notify()

    def take(self) -> list[SourceEvent]:
        with self._lock:
            events = list(self._events)
            self._events.clear()
            self._pending = False
        return events


def export_path(session_path: Path | None, session_id: str | None) -> Path:
    """Where the markdown notes go: beside the session file, else in the current directory."""
    if session_path is not None and os.access(session_path.parent, os.W_OK):
        return session_path.with_suffix(".md")
    return Path.cwd() / f"{session_id or 'pttrace-session'}.md"


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


class PttraceApp(PromptActions, App[int]):
    CSS = APP_CSS
    TITLE = "pttrace"
    BINDINGS = [Binding(k.keys, k.action, k.label, show=False) for k in KEYS if k.bind]

    def __init__(self, source: EventSource):
        super().__init__()
        self.source = source
        self.state = TraceState(live=source.live, gdb="starting" if source.live else "none",
                                target="starting" if source.live else "recorded",
                                mode=getattr(getattr(source, "config", None), "mode", "record"))
        self.inbox = Inbox(lambda: self.post_message(SourceEventsArrived()))
        self.title = f"pttrace · {source.label}" if source.label else "pttrace"
        self._last_drain = 0.0
        self._drain_timer = None
        self._jump_until = 0.0  # a stop at a breakpoint: its hit (before or after the stop's news) is shown
        self._pinned = False  # the call path shows where a step/finish/interrupt stopped
        self._quitting = False
        self.cwd: str | None = None
        self._left_width: int | None = None

    # --- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield BreakpointsTable(id="breakpoints", classes="pane")
                yield HitsTable(id="hits", classes="pane", follow=self.source.live)
                yield OutputLog(id="output", classes="pane")
            with Vertical(id="right"):
                yield CallPathTable(id="callpath", classes="pane")
                yield SourcePane(id="source", classes="pane")
        yield SearchBar(id="search")
        yield InputBar(id="input")
        yield PromptBar(id="prompt")
        yield StatusLine(id="status")
        yield KeyBar(id="keys")

    @property
    def hits_table(self) -> HitsTable:
        return self.query_one(HitsTable)

    @property
    def call_path(self) -> CallPathTable:
        return self.query_one(CallPathTable)

    def on_mount(self) -> None:
        if not self.source.live:
            self.query_one(OutputLog).note("a recorded session: the target's output is not kept in the file",
                                           style="grey62")
        elif self.source.attached:
            self.query_one(OutputLog).note("attached to a running process: its output goes where it always "
                                           "went (its own terminal or file), not here", style="grey62")
        self._redraw_status()
        self.hits_table.focus()
        self._run_source()
        if self.source.live and not self.source.attached:
            self.set_interval(INPUT_CHECK_EVERY, self._check_input)

    NARROW = 140
    """Under this many columns the call path and source take the full width (see the stylesheet)."""
    SHORT = 36
    """Under this many rows the panes keep only their top border."""

    def on_resize(self, event) -> None:
        self.set_class(event.size.width < self.NARROW, "-narrow")
        self.set_class(event.size.height < self.SHORT, "-short")
        self.call_after_refresh(self._fit_left)

    def _fit_left(self) -> None:
        """Wide terminals: the left column takes 40% of the width; from 200 columns on, as much as
        its tables' rows want (breakpoint locations, where hits came from) up to half of it."""
        left = self.query_one("#left")
        if self.has_class("-narrow"):
            width = None
        else:
            total = self.size.width
            wanted = max(t.virtual_size.width for t in (self.query_one(BreakpointsTable), self.hits_table)) + 4
            least = int(total * 0.4)
            width = max(least, min(wanted, total // 2 if total >= 200 else least))
        if width != self._left_width:  # a new width lays the whole screen out again: only when it changes
            self._left_width = width
            left.styles.width = width

    # --- the event source -------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="source", exit_on_error=False)
    def _run_source(self) -> None:
        try:
            self.source.run(self.inbox.push)
        except Exception as exc:  # a bug in a source must end up on the screen, not kill the app
            self.inbox.push(SourceEvent("failed", exc if isinstance(exc, PttraceError)
                                        else PttraceError(f"{type(exc).__name__}: {exc}")))

    def on_source_events_arrived(self, _message: SourceEventsArrived) -> None:
        wait = self._last_drain + 1.0 / MAX_BATCHES_PER_SECOND - time.monotonic()
        if wait > 0:
            if self._drain_timer is None:
                self._drain_timer = self.set_timer(wait, self._drain)
            return
        self._drain()

    def _drain(self) -> None:
        self._drain_timer = None
        self._last_drain = time.monotonic()
        events = self.inbox.take()
        if not events:
            return
        new_hits = False
        output: list = []  # the target's stdout text, or (stream, text)
        changed: set[str] = set()
        for ev in events:
            if ev.kind == "output":
                output.append(ev.data if isinstance(ev.data, tuple) else str(ev.data))
                continue
            if ev.kind in ("hit", "hits", "all-hits"):
                new_hits = True
            elif ev.kind == "session":
                self._session_opened(ev.data)
            elif ev.kind == "stopped":
                log = self.query_one(OutputLog)
                log.write_output(output)
                output = []
                log.note(describe_stop(ev.data or {}), style="cyan")
                if self.state.mode == "stop" and (ev.data or {}).get("reason") == "breakpoint-hit":
                    # The hit is read from the session file by another thread: it may come a little
                    # before or after the stop itself.
                    self._jump_until = time.monotonic() + JUMP_WINDOW
                    self.call_after_refresh(self._select_frame_zero)
            elif ev.kind == "state" and ev.data == "running":
                self._pinned = False
                self.call_path.stop_over("the target runs on")
            elif ev.kind == "gdb":
                self.notify(str(ev.data), title="gdb", timeout=8)
                log = self.query_one(OutputLog)
                log.write_output(output)
                output = []
                log.note(str(ev.data), style="cyan")
            elif ev.kind == "warning":
                before = len(self.state.warnings)
                changed |= self.state.apply(ev.kind, ev.data)
                if len(self.state.warnings) == before:
                    continue  # another helper process of a program already told (tracer/session/helpers.py)
                if self.source.live:  # a saved session's are known: noted in the log, no toast each
                    self.notify(str(ev.data), title="warning", severity="warning", timeout=8)
                log = self.query_one(OutputLog)
                log.write_output(output)  # what the target printed before the warning comes first
                output = []
                log.note(f"warning: {ev.data}")
                continue
            changed |= self.state.apply(ev.kind, ev.data)
        if "processes" in changed:
            self.hits_table.set_processes(list(self.state.processes.values()))
        if new_hits:
            table = self.hits_table
            replaced = table.hits is not self.state.hits and len(table.hits) > 0  # a session read to its end
            selected = table.selected_hit if replaced else None
            table.add_hits(self.state.hits)
            if selected is not None:
                table.select_same(selected)  # where the cursor was, with the whole file's names
            self.call_after_refresh(self.source.screen_shown)
        self._follow_stop()
        if "evals" in changed:
            self._show_evals()
        if "breakpoints" in changed:
            self.query_one(BreakpointsTable).update_from(self.state)
            self.call_after_refresh(self._fit_left)
        log = self.query_one(OutputLog)
        if output:
            log.write_output(output)
        if "failed" in changed:
            self._failed()
        if "finished" in changed:
            self._finished()
        if changed & {"status", "hits", "title", "stop"}:
            self._redraw_status()
        if "bindings" in changed:
            self.refresh_bindings()

    def _follow_stop(self) -> None:
        if time.monotonic() < self._jump_until:
            table = self.hits_table
            newest = table.newest_position()
            if newest is not None and table.position != newest:
                self._pinned = False
                table.select_newest()

    def _select_frame_zero(self) -> None:
        """A stop at a breakpoint whose hit came before the stop's news: its frame #0 selected now."""
        path = self.call_path
        hits = self.state.hits
        if (path.hit is not None and len(hits) and hits[-1].seq == path.hit.seq and self.state.target == "stopped"
                and path.selected_frame_index() != len(path.frames) - 1):
            path.show(path.hit, path.caption, self.cwd, stopped=True)

    def _session_opened(self, info) -> None:
        self.cwd = getattr(info, "cwd", None)
        self.hits_table.cwd = self.cwd
        self.call_path.cwd = self.cwd
        self.query_one(SourcePane).session_info = info

    def _failed(self) -> None:
        message = self.state.error or "the run could not start"
        self.notify(message, title="pttrace", severity="error", timeout=15)
        self.query_one(OutputLog).note(message, style="bold red")
        if self.source.live and not self.state.hits:
            # Nothing to look at: leave, and let the CLI print the error with its hint.
            self.exit(return_code=2)

    def _finished(self) -> None:
        self.call_path.stop_over("the run has ended")
        if self.source.live:
            status = self.state.status
            text = f"the run ended: {status}"
            self.query_one(OutputLog).note(text, style="bold cyan")
            self.notify(f"{text}; the session is saved. Press q to leave.", timeout=6)

    def _redraw_status(self) -> None:
        path = self.source.session_path
        self.query_one(StatusLine).render_state(self.state, path.name if path else self.source.label)

    # --- selection ------------------------------------------------------------------------------
    def on_hit_selected(self, message: HitSelected) -> None:
        if message.auto and self._pinned:
            return  # hits recorded just before the stop must not replace where it stopped
        self._pinned = False
        hit = message.hit
        thread = f"thread {hit.thread.id}" + (f" {hit.thread.names}" if hit.thread.names else "")
        caption = f"hit #{hit.seq} · {hit.breakpoint or hit.signal or '?'} · {thread}"
        # The hit the target is stopped at: frame #0 selected, as gdb selects it (the prompt runs there).
        here = (self.state.mode == "stop" and self.state.target == "stopped" and len(self.state.hits) > 0
                and self.state.hits[-1].seq == hit.seq)
        self.call_path.show(hit, caption, self.cwd, stopped=here)
        self._show_evals()

    def on_frame_selected(self, message: FrameSelected) -> None:
        pane = self.query_one(SourcePane)
        pane.graphs = self.state.graphs
        pane.show(message.frame, message.cwd, message.hit)

    def action_unfold(self) -> None:
        self.call_path.toggle_unfold()

    def action_full_names(self) -> None:
        self.call_path.toggle_full_names()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(KEYS, live=self.source.live))

    def action_zoom(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()
        elif self.focused is not None:
            self.screen.maximize(self.focused, container=False)

    def action_search(self) -> None:
        self.query_one(SearchBar).open()

    # --- the target's standard input ------------------------------------------------------------
    def _check_input(self) -> None:
        """Whether the running target waits for a line on its stdin: said in the status line (and once
        in the output pane), so that a run never hangs silently on an input()."""
        waiting = self.state.target == "running" and not self.state.finished and self.source.waiting_for_input()
        if waiting == self.state.waiting_input:
            return
        self.state.waiting_input = waiting
        self._redraw_status()
        if waiting:
            self.query_one(OutputLog).note("the target is waiting for input: press > and type a line",
                                           style="bold yellow")

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
        self.query_one(OutputLog).note(f"> {message.text}", style="green")  # the terminal does not echo
        self.state.waiting_input = False
        self._redraw_status()

    @on(SearchBar.Searched)
    def _search_changed(self, message: SearchBar.Searched) -> None:
        self.hits_table.filter(message.text)
        self.call_path.mark(message.text)

    def action_paths(self) -> None:
        if not self.state.hits:
            self.notify("no hits yet", timeout=3)
            return

        def picked(seq: int | None) -> None:
            if seq is not None:
                self.hits_table.select_seq(seq)
                self.hits_table.focus()

        self.push_screen(PathsScreen(self.state.hits, self.cwd), picked)

    def action_help_quit(self) -> None:
        """Ctrl-C: what gdb users expect of it, interrupting the running target; quitting is q."""
        if self.check_action("interrupt", ()) is True:
            self.action_interrupt()
        elif self.source.live and not self.state.finished and self.state.target == "running":
            self.notify("gdb is busy; try again in a moment (q quits)", timeout=3)
        else:
            self.notify("the target is not running: nothing to interrupt (q quits)", timeout=3)

    def action_newest_hit(self) -> None:
        self.hits_table.select_newest()

    # --- control: every gdb call in a worker, every answer a message ------------------------------
    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "type_input":  # a launched target's stdin: hidden for a recorded session or an attach
            return bool(self.source.live and not self.source.attached and not self.state.finished)
        if action not in _LIVE_ACTIONS:
            return True
        if not self.source.live or self.state.finished:
            return False
        if action == "toggle_mode" and not self._quitting and not self.state.error:
            return True  # even while gdb starts: the run then begins in the chosen mode
        if not self.state.can_control or self._quitting:
            return None
        if action in ("resume", "control"):
            # One at a time: a second f while gdb still finishes would run a second finish after it.
            busy = self.state.gdb.startswith("busy")
            return True if self.state.target == "stopped" and not busy else None
        if action == "interrupt":
            return True if self.state.target == "running" else None
        return True

    def _control(self, label: str, call: Callable[[], object]) -> None:
        if self.state.gdb != "starting":  # a mode chosen while gdb starts is only noted, gdb is not asked
            self.state.gdb = f"busy: {label}"
        self._redraw_status()
        self._control_worker(label, call)

    @work(thread=True, group="control", exit_on_error=False)
    def _control_worker(self, label: str, call: Callable[[], object]) -> None:
        try:
            result = call()
        except PttraceError as exc:
            self.post_message(ControlFinished(label, False, exc.message))
            return
        except Exception as exc:
            self.post_message(ControlFinished(label, False, f"{label} failed: {type(exc).__name__}: {exc}"))
            return
        self.post_message(ControlFinished(label, True, hit=result if isinstance(result, Hit) else None))

    def on_control_finished(self, message: ControlFinished) -> None:
        if not self.state.finished and not self._quitting and self.state.gdb.startswith("busy"):
            self.state.gdb = "ready"
        if not message.ok:
            self.notify(message.message, title=message.action, severity="error", timeout=8)
        else:
            self._after_control(message)
        self._redraw_status()
        self.refresh_bindings()

    def _after_control(self, message: ControlFinished) -> None:
        action = message.action
        if action.startswith("mode "):
            self.state.mode = action.split()[1]
            note = ("stop mode: the target stops at the next hit" if self.state.mode == "stop"
                    else "record mode: hits are recorded and the target goes on")
            if self.state.mode == "record" and self.state.target == "stopped":
                note += " (it is stopped now: c continues)"
            self.notify(note, timeout=4)
        elif action.startswith("add "):
            self.query_one(BreakpointsTable).reveal(action[4:])
            self.notify(f"breakpoint {action[4:]} added", timeout=4)
        elif action.startswith(("on ", "off ")):
            word, _, spec = action.partition(" ")
            self.notify(f"breakpoint {spec} is {word}" + (": the target no longer stops there" if word == "off"
                                                          else ""), timeout=4)
        elif action.startswith("remove "):
            self.state.forget_breakpoint(action[7:])
            self.query_one(BreakpointsTable).update_from(self.state)
            self.notify(f"breakpoint {action[7:]} removed", timeout=4)
        if message.hit is not None:
            self.show_stop(message.hit, action)
        elif action in CONTROL_ACTIONS or action == "interrupt":
            self.notify(f"{action}: the target did not stop again", severity="warning", timeout=5)

    def action_toggle_mode(self) -> None:
        mode = "record" if self.state.mode == "stop" else "stop"
        self._control(f"mode {mode}", lambda: self.source.set_mode(mode))

    def action_resume(self) -> None:
        self._control("continue", self.source.resume)

    def action_control(self, action: str) -> None:
        self._control(action, lambda: self.source.step(action))

    def action_interrupt(self) -> None:
        self._control("interrupt", self.source.interrupt)

    def action_add_breakpoint(self) -> None:
        def added(spec: str | None) -> None:
            if spec:
                self._control(f"add {spec}", lambda: self.source.add_breakpoint(spec))

        self.push_screen(AddBreakpoint(self.source.complete, self.source.check_breakpoint), added)

    @on(BreakpointRemovalRequested)
    def _remove_breakpoint(self, message: BreakpointRemovalRequested) -> None:
        if not self.source.live:
            self.notify("a recorded session: breakpoints cannot change", severity="warning", timeout=4)
            return
        if not self.state.can_control:
            self.notify("the run has ended", severity="warning", timeout=4)
            return
        spec = message.spec
        self._control(f"remove {spec}", lambda: self.source.delete_breakpoint(spec))

    @on(BreakpointToggleRequested)
    def _toggle_breakpoint(self, message: BreakpointToggleRequested) -> None:
        spec, on = message.spec, message.on
        self._control(f"{'on' if on else 'off'} {spec}", lambda: self.source.enable_breakpoint(spec, on))

    # --- export ---------------------------------------------------------------------------------
    def action_export(self) -> None:
        if self.source.session_path is None:
            self.notify("there is no session to export yet", severity="warning", timeout=4)
            return
        path = export_path(self.source.session_path, getattr(self.state.info, "id", None))
        if not path.exists():
            self._start_export(path)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._start_export(path)
            else:
                self.notify(f"{path.name} kept as it was", title="export", timeout=4)

        self.push_screen(Confirm(f"{path} exists. Overwrite it with notes of this session?",
                                 "Overwrite", "Keep it"), answered)

    def _start_export(self, path: Path) -> None:
        self.notify("writing markdown notes…", timeout=2)
        # The source pane's finder: the notes find the same files the pane shows.
        self._export_worker(path, self.query_one(SourcePane).finder())

    @work(thread=True, group="export", exit_on_error=False)
    def _export_worker(self, path: Path, finder) -> None:
        from tracer.export import render

        try:
            session = self.source.load_session()
            write_atomically(path, render(session, "markdown", finder=finder))
        except PttraceError as exc:
            self.post_message(ExportWritten(None, error=exc.message))
        except OSError as exc:
            self.post_message(ExportWritten(None, error=f"cannot write the notes: {exc.strerror or exc}"))
        except Exception as exc:
            self.post_message(ExportWritten(None, error=f"export failed: {type(exc).__name__}: {exc}"))
        else:
            self.post_message(ExportWritten(path, len(session.hits)))

    def on_export_written(self, message: ExportWritten) -> None:
        if message.error:
            self.notify(message.error, title="export", severity="error", timeout=8)
        else:
            self.notify(f"{message.hits:,} hits written to {message.path}", title="export", timeout=8)

    # --- quitting -------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        """Textual's own quit (ctrl+q, the palette) goes the same way as q: it must ask too."""
        self.action_quit_app()

    def action_quit_app(self) -> None:
        if self._quitting:
            return
        if not self.source.live or self.state.finished:
            self.exit(0)
            return
        if self.source.attached:
            self._begin_quit(f"detaching from pid {self.state.pid}")
            return
        pid = f" (pid {self.state.pid})" if self.state.pid else ""

        def answered(yes: bool | None) -> None:
            if yes:
                self._begin_quit("killing the target")

        self.push_screen(ConfirmQuit(f"Quit and kill the target{pid}? The session file keeps what was "
                                     "recorded."), answered)

    def _begin_quit(self, doing: str) -> None:
        self._quitting = True
        self.state.gdb = f"busy: {doing}"
        self.notify(f"{doing}…", timeout=10)
        self._redraw_status()
        self.refresh_bindings()
        self._stop_worker()

    @work(thread=True, group="quit", exit_on_error=False)
    def _stop_worker(self) -> None:
        try:
            self.source.stop("quit")
        finally:
            self.call_from_thread(self.exit, 0)

    def on_unmount(self) -> None:
        # However the app ends (even by a crash), the run must end too: the worker running it is
        # waited for when the event loop closes.
        self.source.request_stop("quit")

    def request_shutdown(self) -> None:
        """SIGTERM and friends: end the run without asking, keep what was recorded."""
        if self.source.live and not self.state.finished:
            if not self._quitting:
                self._begin_quit("stopping")
        else:
            self.exit(0)


def make_app(source: EventSource) -> PttraceApp:
    """The one way to build the app: the CLI and the tests hand it their source."""
    return PttraceApp(source)


def run_live(config) -> int:
    """``pttrace run``/``attach`` on a terminal: record with the TUI on screen."""
    # Hits as events; the target's output goes to its pane, not over the screen.
    source = LiveSource(dataclasses.replace(config, live=True, forward_output=False, forward_input=False))
    app = make_app(source)

    signalled: list[str] = []
    app_ended = threading.Event()

    def on_term(signum, frame):
        reason = "sighup" if signum == signal.SIGHUP else "sigterm"
        first = not signalled
        signalled.append(reason)
        source.request_stop(reason)
        app.call_later(app.request_shutdown)
        if first:
            threading.Thread(target=_end_regardless, args=(source, reason, app_ended), name="signal-end",
                             daemon=True).start()

    old = {signum: signal.signal(signum, on_term) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        app.run()
    finally:
        app_ended.set()
        for signum, handler in old.items():
            signal.signal(signum, handler)
        source.stop("quit", timeout=10.0)  # never leave gdb or a launched target behind
    if source.error is not None:
        raise source.error
    path = source.session_path
    if path is not None and "sighup" not in signalled:  # after a hang-up there is no terminal
        n = len(app.state.hits)
        print(f"pttrace: session saved to {path} ({source.status or 'interrupted'}, "
              f"{n:,} hit{'' if n == 1 else 's'})", file=sys.stderr)
        from tracer.session import storage

        default = storage.default_dir().resolve() == path.parent.resolve()
        print(f"  view it again with: pttrace view {path.stem if default else path}", file=sys.stderr)
    from tracer.recorder.shutdown import exit_code

    return exit_code(signalled[0] if signalled else None, bool(getattr(source.engine, "gdb_lost", False)))


# Seconds the UI has to end on its own once the recording is over, after SIGTERM (the terminal is still
# there: it is restored) and after SIGHUP (it is gone: nothing to restore, nothing to print).
SIGNAL_GRACE = {"sigterm": 10.0, "sighup": 2.0}


def _end_regardless(source, reason: str, app_ended: threading.Event) -> None:
    """SIGHUP/SIGTERM always end pttrace. Closing the terminal under the TUI left pttrace running under PID 1
    for ever (3 runs in 3): Textual's shutdown blocked writing to the terminal that was gone. So once the
    recording has ended (session closed, gdb and a launched target gone), a UI that has not ended within
    its grace is left behind and the process exits with the signal's code."""
    from tracer.recorder.shutdown import exit_code

    source.stop(reason, timeout=30.0)
    if app_ended.wait(SIGNAL_GRACE[reason]):
        return
    os._exit(exit_code(reason, bool(getattr(source.engine, "gdb_lost", False))))


def view_session(path) -> int:
    """``pttrace view SESSION``: browse a recorded session; no gdb."""
    source = SessionSource.open(path)
    make_app(source).run()
    return 0
