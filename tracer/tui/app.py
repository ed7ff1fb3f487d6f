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
from typing import Callable

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.timer import Timer

from tracer.errors import PttraceError
from tracer.session.model import Hit
from tracer.tui.control import ControlActions
from tracer.tui.ending import QuitActions
from tracer.tui.export_notes import ExportActions
from tracer.tui.keys import KEYS
from tracer.tui.messages import FrameSelected, HitSelected, SourceEventsArrived
from tracer.tui.prompt import PromptActions
from tracer.tui.screens import HelpScreen, PathsScreen, WarningsScreen
from tracer.tui.sources import EventSource, LiveSource, SessionSource, SourceEvent
from tracer.tui.state import describe_stop
from tracer.tui.stylesheet import APP_CSS
from tracer.tui.target_input import InputActions
from tracer.tui.widgets.breakpoints import BreakpointsTable
from tracer.tui.widgets.callpath import CallPathTable
from tracer.tui.widgets.hits import HitsTable
from tracer.tui.widgets.input_bar import InputBar
from tracer.tui.widgets.keybar import KeyBar
from tracer.tui.widgets.output import OutputLog
from tracer.tui.widgets.prompt_bar import PromptBar
from tracer.tui.widgets.search import SearchBar
from tracer.tui.widgets.source import SourcePane
from tracer.tui.widgets.status import StatusLine
from tracer.tui.widgets.warnings import WarningsLine

MAX_BATCHES_PER_SECOND = 5
JUMP_WINDOW = 1.0


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


class PttraceApp(PromptActions, ControlActions, InputActions, ExportActions, QuitActions):
    CSS = APP_CSS
    TITLE = "pttrace"
    BINDINGS = [Binding(k.keys, k.action, k.label, show=False) for k in KEYS if k.bind]

    def __init__(self, source: EventSource):
        super().__init__(source)
        self.inbox = Inbox(lambda: self.post_message(SourceEventsArrived()))
        self.source_crash: Exception | None = None
        """What a source raised that is not a PttraceError (a bug): the run ends on it."""
        self.title = f"pttrace · {source.label}" if source.label else "pttrace"
        self._last_drain = 0.0
        self._drain_timer: Timer | None = None
        self._jump_until = 0.0  # a stop at a breakpoint: its hit (before or after the stop's news) is shown
        self._held: Hit | None = None
        """The hit the hits pane followed while the call path was pinned to a stop: shown once the target runs
        on. After c the next stop's hit can come before gdb's news that the target runs (the session file
        and gdb are read by two threads): dropped, it left the step's stop on screen (41 s at load 7.5)."""
        self._left_width: int | None = None

    # --- layout ---------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield BreakpointsTable(self.state, id="breakpoints", classes="pane")
                yield HitsTable(id="hits", classes="pane", follow=self.source.live)
                yield OutputLog(id="output", classes="pane")
            with Vertical(id="right"):
                yield CallPathTable(id="callpath", classes="pane")
                yield SourcePane(id="source", classes="pane")
        yield SearchBar(id="search")
        yield InputBar(id="input")
        yield PromptBar(id="prompt")
        yield WarningsLine(id="warnings")
        yield StatusLine(id="status")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        if not self.source.live:
            self.query_one(OutputLog).note("a recorded session: the target's output is not kept in the file",
                                           style="grey62")
        elif self.source.attached:
            self.query_one(OutputLog).note("attached to a running process: its output goes where it always "
                                           "went (its own terminal or file), not here", style="grey62")
        self.query_one(WarningsLine).show_warnings(self.state.warnings)
        self._redraw_status()
        self.hits_table.focus()
        self._run_source()
        self.start_input_watch()

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
            self.source_crash = exc  # and, once the terminal is back, before the user (run_live raises it)
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
        if not events or not self.is_running:
            # Not running: leaving (q, or the run's end), the panes are being taken down and a batch that comes
            # now would look them up and fail (seen once in CI as NoMatches). What it held is in the session file.
            return
        new_hits = ran_on = False
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
                stop = ev.data if isinstance(ev.data, dict) else {}
                log = self.output
                log.write_output(output)
                output = []
                if self.held_stop_notes is not None:
                    self.held_stop_notes.append(describe_stop(stop))
                else:
                    log.note(describe_stop(stop), style="cyan")
                if self.state.mode == "stop" and stop.get("reason") == "breakpoint-hit":
                    # The hit is read from the session file by another thread: it may come a little
                    # before or after the stop itself.
                    self._jump_until = time.monotonic() + JUMP_WINDOW
                    self.call_after_refresh(self._select_frame_zero)
            elif ev.kind == "state" and ev.data == "running":
                self._pinned, ran_on = False, True
                self.call_path.stop_over("the target runs on")
            elif ev.kind in ("gdb", "note"):
                self.notify(str(ev.data), title=ev.kind if ev.kind == "gdb" else "pttrace", timeout=8)
                log = self.query_one(OutputLog)
                log.write_output(output)
                output = []
                log.note(str(ev.data), style="cyan")
            elif ev.kind in ("warning", "warnings"):
                before = len(self.state.warnings)
                changed |= self.state.apply(ev.kind, ev.data)
                if len(self.state.warnings) == before:
                    continue  # another helper process of a program already told (tracer/session/helpers.py)
                if self.source.live and ev.kind == "warning":  # a saved session's: on the warnings line only
                    self.notify(str(ev.data), title="warning", severity="warning", timeout=8)
                # On their own line, not in the target's output: a long warning scrolled the target's own
                # lines out of that pane.
                self.query_one(WarningsLine).show_warnings(self.state.warnings)
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
        if ran_on:
            self._release_held()
        self._follow_stop()
        if "evals" in changed:
            self._show_evals()
        if "graphs" in changed:  # TorchScript's graphs came after the interpreter frame was shown
            self.query_one(SourcePane).show_graphs(self.state.graphs)
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

    def _release_held(self) -> None:
        """The target ran on from the stop the call path was pinned to: the hit the hits pane followed
        meanwhile (still where its cursor is) is shown, as following would have shown it."""
        held, self._held = self._held, None
        selected = self.hits_table.selected_hit
        if held is not None and not self._pinned and selected is not None and selected.seq == held.seq:
            self._show_hit(selected)

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

    # --- selection ------------------------------------------------------------------------------
    def on_hit_selected(self, message: HitSelected) -> None:
        if message.auto and self._pinned:
            self._held = message.hit  # hits recorded just before the stop must not replace where it stopped
            return
        self._show_hit(message.hit)

    def _show_hit(self, hit: Hit) -> None:
        self._pinned = False
        self._held = None
        thread = f"thread {hit.thread.id}" + (f" {hit.thread.names}" if hit.thread.names else "")
        caption = f"hit #{hit.seq} · {hit.breakpoint or hit.signal or '?'} · {thread}"
        # The hit the target is stopped at: frame #0 selected, as gdb selects it (the prompt runs there).
        here = (self.state.mode == "stop" and self.state.target == "stopped" and len(self.state.hits) > 0
                and self.state.hits[-1].seq == hit.seq)
        self.call_path.show(hit, caption, self.cwd, stopped=here)
        self._show_evals()

    def on_frame_selected(self, message: FrameSelected) -> None:
        found = self.query(SourcePane)
        if not found:  # the screen is being taken down (the app exits): a late selection has nowhere to go
            return
        pane = found.first()
        pane.graphs = self.state.graphs
        pane.show(message.frame, message.cwd, message.hit)

    def action_unfold(self) -> None:
        self.call_path.toggle_unfold()

    def action_full_names(self) -> None:
        self.call_path.toggle_full_names()

    def action_warnings(self) -> None:
        if not self.state.warnings:
            self.notify("no warnings", timeout=3)
            return
        self.push_screen(WarningsScreen(self.state.warnings))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(KEYS, live=self.source.live))

    def action_zoom(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()
        elif self.focused is not None:
            self.screen.maximize(self.focused, container=False)

    def action_search(self) -> None:
        self.query_one(SearchBar).open()

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

    def action_newest_hit(self) -> None:
        self.hits_table.select_newest()

def make_app(source: EventSource) -> PttraceApp:
    """The one way to build the app: the CLI and the tests hand it their source."""
    return PttraceApp(source)


def run_live(config, early=None) -> int:
    """``pttrace run``/``attach`` on a terminal: record with the TUI on screen. ``early``: the gdb the command
    started first (tracer/gdb/spawn.py), which the recorder takes, or None."""
    # Hits as events; the target's output goes to its pane, not over the screen.
    live = dataclasses.replace(config, live=True, forward_output=False, forward_input=False)
    if early is None:
        source = LiveSource(live)
    else:
        from tracer.recorder import Recorder

        source = LiveSource(live, engine_factory=lambda cfg, listener: Recorder(cfg, listener, early=early))
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
    threading.Thread(target=_watch_hangup, args=(app_ended, lambda: os.kill(os.getpid(), signal.SIGHUP)),
                     name="hangup-watch", daemon=True).start()
    try:
        app.run()
    finally:
        app_ended.set()
        for signum, handler in old.items():
            signal.signal(signum, handler)
        source.stop("quit", timeout=10.0)  # never leave gdb or a launched target behind
        if early is not None and source.engine is None:  # quit before the recording took the gdb started first
            early.close()
    if source.error is not None:
        raise source.error
    if app.source_crash is not None:  # a bug, not bad input: its traceback, as headless runs show it
        raise app.source_crash
    path = source.session_path
    if path is not None and "sighup" not in signalled:  # after a hang-up there is no terminal
        n = len(app.state.hits)
        from tracer.session import storage

        default = storage.default_dir().resolve() == path.parent.resolve()
        try:
            print(f"pttrace: session saved to {path} ({source.status or 'interrupted'}, "
                  f"{n:,} hit{'' if n == 1 else 's'})", file=sys.stderr)
            print(f"  view it again with: pttrace view {path.stem if default else path}", file=sys.stderr)
        except OSError:  # a terminal gone all the same (EIO): the exit code still says how the run ended
            pass
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


def _watch_hangup(app_ended: threading.Event, hung_up: Callable[[], None]) -> None:
    """A terminal that hangs up ends pttrace as SIGHUP does, even when no SIGHUP comes: the kernel sends it
    to the session's leader, which passes it on only by dying. A leader that ignores it (a wrapper with
    `trap '' HUP`) left pttrace at a stop for ever, its target stopped, under a terminal that was gone
    (3 runs in 3). The terminal says so itself: poll reports POLLHUP on it from the hang-up on."""
    import select

    fds = [fd for fd in (0, 1, 2) if os.isatty(fd)]
    if not fds:
        return
    poller = select.poll()
    poller.register(fds[0], 0)  # POLLHUP and POLLERR are reported whatever the mask asks for
    while not app_ended.is_set():
        if any(ev & (select.POLLHUP | select.POLLERR) for _, ev in poller.poll(500)):
            hung_up()
            return


def view_session(path) -> int:
    """``pttrace view SESSION``: browse a recorded session; no gdb."""
    source = SessionSource.open(path)
    ended = threading.Event()
    # nothing to save or restore once the terminal is gone: a view left behind spun on its input (30% CPU)
    threading.Thread(target=_watch_hangup, args=(ended, lambda: os._exit(129)), name="hangup-watch",
                     daemon=True).start()
    try:
        make_app(source).run()
    finally:
        ended.set()
    return 0
