"""Where the TUI's events come from: a live recorder driving gdb, or a saved session file.

The app is handed one of these, as memray's TUI is handed its reader, and never touches gdb or
the disk itself. ``run(emit)`` blocks (the app calls it from a worker thread) and reports what
happens as ``SourceEvent``s; the control methods block too and are only ever called from workers.

Event kinds (``data`` in brackets):
  session [SessionInfo]      what is being traced; sent first
  breakpoint [Breakpoint]    a breakpoint as the recorder knows it (sent again whenever it changes)
  breakpoint-gdb [Breakpoint] gdb's own news of a breakpoint (it resolved when a library loaded):
                             locations without libraries, used until the recorder says more
  hit [Hit] / hits [list]    recorded hits
  process [Process | dict]   what is known of one process of the run (a dict: a live record's facts,
                             merged into what came before for that pid)
  all-hits [HitTable]        a saved session's every hit, replacing those sent before
  output [str]               the target's own stdout/stderr
  state [str]                the target's state: "running", "stopped", "exited", "detached"
  stopped [dict]             the target stopped (gdb's MI payload: reason, frame, ...)
  pid [int]                  the target's process id, once known
  evals [dict]               --eval: hit seq -> the values evaluated at that hit (session.evals.Evaluated)
  graphs [dict]              TorchScript: graph id -> its graph (session.torchscript.TsGraph)
  warning [str]              something the user should know, the run goes on
  warnings [list[str]]       a saved session's warnings, all at once
  gdb [str]                  what gdb said of a step, next or finish (as its console prints it)
  note [str]                 what pttrace says of a stop (the thread an interrupt shows, and why)
  failed [PttraceError]      the source could not start; nothing else follows
  finished [str]             the final status of the session; nothing else follows
"""
from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, NoReturn, Sequence

from tracer.session import storage
from tracer.errors import PttraceError
from tracer.text.escape import visible
from tracer.session.hit_table import HitTable
from tracer.session.model import Breakpoint, Hit, Location, Session
from tracer.tui.steering import Steering, python_thread

CONTROL_ACTIONS = ("step", "next", "finish")
SHOWN_WAIT = 2.0  # seconds a saved session's reader waits for its first screen to be drawn


@dataclass
class SourceEvent:
    kind: str
    data: object = None


Emit = Callable[[SourceEvent], None]


class NotLive(PttraceError):
    """A control key was pressed on a source that has no target to control."""


class NotStopped(PttraceError):
    """Stepping needs a stopped target."""


class EventSource:
    """The interface the app relies on; the defaults describe a source with nothing to control."""

    live = False
    attached = False  # True: quitting detaches and leaves the target running
    label = ""  # a short name for the title bar

    def run(self, emit: Emit) -> None:
        raise NotImplementedError

    @property
    def session_path(self) -> Path | None:
        return None

    def load_session(self) -> Session:
        raise NotLive("there is no session to read yet.")

    def stop(self, reason: str = "quit", timeout: float = 20.0) -> None:
        """End the run and wait for it (kills a launched target, detaches from an attached one)."""

    def request_stop(self, reason: str = "quit") -> None:
        """Like ``stop`` but without waiting; safe from any thread."""

    def screen_shown(self) -> None:
        """The app has drawn its first hits; safe from any thread."""

    def complete(self, text: str, limit: int = 12) -> list[str]:
        """Breakpoint names that fit ``text``, best first; ``PttraceError`` if none can be looked up."""
        return []

    def check_breakpoint(self, spec: str) -> "Refusal | None":
        """Why ``spec`` should not be added as it is, or None."""
        return None

    # --- control: only live sources implement these -------------------------------------------
    def _not_live(self, what: str) -> NoReturn:
        raise NotLive(f"cannot {what}: this is a recorded session, there is no target.")

    def set_mode(self, mode: str) -> None:
        self._not_live("change the mode")

    def resume(self) -> Hit | None:
        self._not_live("continue")

    def interrupt(self) -> Hit | None:
        self._not_live("interrupt")

    def step(self, action: str) -> Hit | None:
        """``action`` is step, next or finish; returns the call path where the target stopped."""
        self._not_live(action)

    def add_breakpoint(self, spec: str) -> None:
        self._not_live("add a breakpoint")

    def delete_breakpoint(self, spec: str) -> None:
        self._not_live("remove a breakpoint")

    def enable_breakpoint(self, spec: str, on: bool) -> None:
        self._not_live("turn a breakpoint on or off")

    def send_input(self, text: str) -> None:
        """Write ``text`` to the launched target's standard input."""
        self._not_live("type to the target")

    def gdb_line(self, line: str, place, say=None) -> "PromptResult":
        """Run a line typed at the prompt in gdb, at ``place`` (tracer/recorder/prompt.py); ``say`` shows a
        note at once, while gdb still works on the line."""
        self._not_live("run a gdb command")

    def gdb_complete(self, text: str) -> list[str]:
        """gdb's completions of a prompt line, each a whole line."""
        return []

    def threads(self) -> list:
        """The stopped target's threads (tracer.recorder.prompt.ThreadRow)."""
        self._not_live("list threads")

    def select_thread(self, thread_id: str) -> Hit | None:
        """Look at (and step) this thread from now on; its call path."""
        self._not_live("select a thread")

    def waiting_for_input(self) -> bool:
        """Whether the launched target is blocked reading its standard input."""
        return False


def _hex(text) -> int | None:
    try:
        return int(str(text), 16)
    except (TypeError, ValueError):
        return None


def _visible(text):
    return visible(text) if isinstance(text, str) else None


def breakpoint_from_mi(payload) -> Breakpoint | None:
    """gdb's ``=breakpoint-created/modified`` payload as a Breakpoint; None if it is not one of ours."""
    bkpt = payload.get("bkpt") if isinstance(payload, dict) else None
    if not isinstance(bkpt, dict) or not bkpt.get("original-location"):
        return None
    rows = bkpt.get("locations") if bkpt.get("addr") == "<MULTIPLE>" else [bkpt]
    locations = []
    for row in rows if isinstance(rows, list) else []:
        address = _hex(row.get("addr"))
        if address is None:
            continue  # <PENDING>
        function = row.get("func")
        if not function and row.get("at"):
            function = row["at"].strip("<>")
            head, _, offset = function.rpartition("+")
            if head and offset.isdigit():
                function = head
        if function and function.endswith("@plt"):
            continue  # the recorder drops stubs too
        line = str(row.get("line") or "")
        file = row.get("fullname") or row.get("file")
        locations.append(Location(function=_visible(function), address=address, file=_visible(file),
                                  line=int(line) if line.isdigit() else None,
                                  enabled=row.get("enabled", "y") == "y"))
    number = str(bkpt.get("number") or "")
    return Breakpoint(spec=_visible(bkpt["original-location"]), number=int(number) if number.isdigit() else None,
                      locations=locations, pending=not locations, enabled=bkpt.get("enabled", "y") == "y")


def breakpoint_names(session_hits: Sequence[Hit], text: str, limit: int) -> list[str]:
    """Names from recorded call paths that contain ``text``: free completions, no symbol table needed."""
    from tracer.dispatch.classify import _strip_args

    needle = text.lower()
    seen: dict[str, None] = {}
    stacks = session_hits.frame_lists() if isinstance(session_hits, HitTable) else (h.frames for h in session_hits)
    for frames in stacks:  # a big session's: each stack once, not once a hit
        for frame in frames:
            if frame.kind != "native" or not frame.function or frame.layer == "interpreter":
                continue
            name = _strip_args(frame.function)
            if needle in name.lower() and name not in seen:
                seen[name] = None
                if len(seen) >= limit:
                    return list(seen)
    return list(seen)


def symbol_suggestions(text: str, libraries: list[str], limit: int) -> list[str]:
    """Names from the symbol index of ``libraries`` close to ``text``; a broken index raises
    ``PttraceError`` (the dialog says so instead of offering nothing without a word)."""
    if len(text.strip()) < 3 or not libraries:
        return []
    from tracer.symbols import suggest

    try:
        return list(suggest(text.strip(), libraries, limit=limit))
    except PttraceError:
        raise
    except Exception as exc:
        raise PttraceError(f"the symbol index failed: {type(exc).__name__}: {exc}") from None


def mapped_libraries(pid: int | None) -> list[str]:
    """The executable and shared libraries mapped in process ``pid`` now: what its code can call."""
    if not pid:
        return []
    out: dict[str, None] = {}
    try:
        exe = os.path.realpath(f"/proc/{pid}/exe")
        with open(f"/proc/{pid}/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) < 6 or not parts[5].startswith("/"):
                    continue
                path = parts[5].rstrip("\n")
                if path.endswith(" (deleted)"):
                    continue
                if ".so" in os.path.basename(path) or path == exe:
                    out[path] = None
    except OSError:
        return []
    return list(out)


def is_function_name(spec: str) -> bool:
    """A plain function name, which the symbol index can answer for (not FILE:LINE, ``*ADDR``, an
    option or a condition: gdb alone knows those)."""
    spec = spec.strip()
    head = spec.split("(", 1)[0]
    return bool(spec) and not spec.startswith(("*", "-")) and ":" not in spec.replace("::", "") \
        and not any(ch.isspace() for ch in head) and " if " not in spec


@dataclass
class PromptResult:
    """A prompt line's answer: gdb's text, its error, where it ran; ``hit``: where a line that let the
    target run (``until``, ``stepi``) stopped; ``note``: pttrace's word on it (a call into an attached
    process, said once)."""

    text: str
    error: str | None
    where: str
    kind: str = "plain"
    hit: Hit | None = None
    note: str | None = None
    moved_to: int | None = None  # the gdb frame level an up/down/frame selected


@dataclass
class Refusal:
    """Why a breakpoint name was not added: nothing loaded defines it; close names, if any."""

    message: str
    suggestions: list[str]


class SessionSource(EventSource):
    """A session file read with ``storage.load``, nothing to control. Its first 256 KB are read before the
    screen changes (a bad file is told at once, and the first screen shows their hits whatever the file's
    size); the whole file is then read by ``run``, which sends its hits as "all-hits", before "finished"."""

    def __init__(self, session: Session):
        self.session = session
        self.label = Path(session.path).name if session.path else session.info.id
        self._loaded = threading.Event()
        if session.info.status != "loading":
            self._loaded.set()
        self.error: PttraceError | None = None
        self._shown = threading.Event()  # the head's hits are on screen: reading the rest may compete

    @classmethod
    def open(cls, path: str | os.PathLike) -> "SessionSource":
        """Read the file's head now, so that a bad path is told before the screen changes."""
        return cls(storage.load(path, head=True))

    @property
    def session_path(self) -> Path | None:
        return Path(self.session.path) if self.session.path else None

    def load_session(self) -> Session:
        self._loaded.wait()  # from a worker: the whole session, not its head
        if self.error is not None:
            raise self.error
        return self.session

    def _announce(self, emit: Emit, s: Session) -> None:
        emit(SourceEvent("session", s.info))
        if s.info.pid:
            emit(SourceEvent("pid", s.info.pid))
        for p in s.processes:
            emit(SourceEvent("process", p))
        for bp in s.breakpoints:
            emit(SourceEvent("breakpoint", bp))

    def run(self, emit: Emit) -> None:
        s = self.session
        self._announce(emit, s)
        emit(SourceEvent("hits", s.hits))  # the session's table, not a list of a million Hits
        if s.evals:
            emit(SourceEvent("evals", s.evals))
        if s.graphs:
            emit(SourceEvent("graphs", s.graphs))
        if not self._loaded.is_set():
            self._shown.wait(SHOWN_WAIT)  # the first screen first: the read would slow its drawing down
            try:
                if s.path is None:  # a head is only ever read from a file: there is no rest to read
                    raise PttraceError("the session's file is unknown: only its first hits could be read.")
                s = self.session = storage.load(s.path)
            except PttraceError as exc:  # the file changed since its head was read
                self.error = exc
                emit(SourceEvent("failed", exc))
                return
            finally:
                self._loaded.set()
            self._announce(emit, s)  # its end record: status, warnings, the breakpoints' counts
            emit(SourceEvent("all-hits", s.hits))  # replaces the head's
            if s.evals:
                emit(SourceEvent("evals", s.evals))
            if s.graphs:
                emit(SourceEvent("graphs", s.graphs))
        if s.info.warnings:  # all at once (a damaged file can have thousands); w lists them
            emit(SourceEvent("warnings", list(s.info.warnings)))
        emit(SourceEvent("finished", s.info.status))

    def screen_shown(self) -> None:
        self._shown.set()

    def complete(self, text: str, limit: int = 12) -> list[str]:
        return breakpoint_names(self.session.hits, text, limit)


def _engine_class():
    from tracer.recorder import Recorder  # imported when a live run starts: `pttrace view` needs no gdb layer

    return Recorder


def _source_event(ev) -> SourceEvent | None:
    """The recorder's typed event as the app's (kind, data); None for gdb's breakpoint news."""
    from tracer.recorder import events as rec

    if isinstance(ev, rec.TargetOutput):
        return SourceEvent("output", ev.text if ev.stream == "stdout" else (ev.stream, ev.text))
    if isinstance(ev, rec.HitRecorded):
        return SourceEvent("hit", ev.hit)
    if isinstance(ev, rec.BreakpointRecorded):
        return SourceEvent("breakpoint", ev.breakpoint)
    if isinstance(ev, rec.ProcessRecorded):
        return SourceEvent("process", dict(ev.facts))
    if isinstance(ev, rec.TargetStateChanged):
        return SourceEvent("state", ev.state)
    if isinstance(ev, rec.TargetStopped):
        data = {"reason": ev.reason, "thread-id": ev.thread_id, "signal-name": ev.signal,
                "bkptno": ev.breakpoint, "frame": dict(ev.frame), "pid": ev.process}
        if ev.returned is not None:
            data["gdb-result-var"], data["return-value"] = ev.returned
        return SourceEvent("stopped", data)
    if isinstance(ev, rec.WarningRaised):
        return SourceEvent("warning", ev.message)
    if isinstance(ev, rec.EvalsRecorded):
        return SourceEvent("evals", {ev.seq: list(ev.values)})
    if isinstance(ev, rec.GraphRecorded):
        return SourceEvent("graphs", {ev.graph.id: ev.graph})
    if isinstance(ev, rec.RecorderFinished):
        return SourceEvent("finished", ev.status)
    return None


class LiveSource(EventSource):
    """A run or attach recorded by ``tracer.recorder.Recorder``, controlled from the TUI."""

    live = True

    def __init__(self, config, engine_factory=None):
        self.config = config
        self.attached = config.pid is not None
        self.label = f"pid {config.pid}" if self.attached else os.path.basename(config.target_label)
        self._engine_factory = engine_factory or _engine_class()
        self.engine = None
        self.error: PttraceError | None = None
        self.status: str | None = None
        self._emit: Emit = lambda ev: None
        self._stops = 0
        self._stop_reason: str | None = None
        self._pid: int | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()  # one control command at a time
        self._started = False  # gdb is up: control commands go to it (set under the lock)
        self._early_mode: str | None = None  # a mode chosen while gdb was starting
        self._last_seq = 0  # the number of the last hit sent
        self._renumbered = False  # hits of a child's own recorder came: hits are numbered as they come
        self._said_calls = False  # an attached target: that a call runs code in it is said once
        self._mode: str = getattr(config, "mode", "record")
        self._steering = Steering()  # the main gdb, or a child's that executed Python: the one stopped

    # --- the run -----------------------------------------------------------------------------
    def _on_engine_event(self, ev) -> None:
        from tracer.recorder.events import GdbBreakpointChanged

        pid = getattr(self.engine, "target_pid", None)
        if pid and pid != self._pid:
            self._pid = pid
            self._emit(SourceEvent("pid", pid))
        if isinstance(ev, GdbBreakpointChanged):
            # gdb's own news (a pending breakpoint resolved as its library loaded); the agent's
            # "breakpoint" records say more but come only when it dumps them.
            bp = breakpoint_from_mi(dict(ev.payload))
            if bp is not None:
                self._emit(SourceEvent("breakpoint-gdb", bp))
            return
        event = _source_event(ev)
        if event is None:
            return
        child = getattr(ev, "child", None)  # a child that executed Python: its own recorder's news
        if event.kind == "state" and not self._steering.state(child, str(event.data)):
            return  # another gdb's target than the one the TUI shows (steering.py)
        if event.kind == "stopped" and isinstance(event.data, dict):
            self._steering.stopped(child, event.data)
            self._stops += 1
            from tracer.recorder.unknowns import name_frame

            event.data["frame"] = name_frame(event.data["frame"], event.data.get("pid") or pid)
        if event.kind == "hit" and isinstance(event.data, Hit):
            event = SourceEvent("hit", self._numbered(event.data, child))
        if event.kind == "evals" and self._renumbered:
            return  # numbered by the agent, not as the hits shown now: the run's end sends them as saved
        if event.kind == "finished":
            self.status = str(event.data)
            if self._renumbered:
                self._send_as_saved()
        self._emit(event)

    def _numbered(self, hit: Hit, child: int | None) -> Hit:
        """A hit of a child's own recorder is numbered by that recorder: while the run goes on, such hits
        and every hit after the first of them are numbered in the order they come, so that numbers stay
        distinct and ascending; the run's end sends the session as ``view`` reads it (``_send_as_saved``)."""
        if child is None and not self._renumbered:
            self._last_seq = max(self._last_seq, hit.seq)
            return hit
        self._renumbered = True
        self._last_seq += 1
        return dataclasses.replace(hit, seq=self._last_seq)

    def _send_as_saved(self) -> None:
        """Every hit as the saved session numbers it (the main session's, then each child's)."""
        path = self.session_path
        if path is None:  # the recorder never opened its file: there are only the hits already shown
            return
        try:
            session = storage.load(path)
        except PttraceError as exc:
            self._emit(SourceEvent("warning", f"the session could not be read again at its end: {exc.message}"))
            return
        self._emit(SourceEvent("all-hits", session.hits))
        if session.evals:
            self._emit(SourceEvent("evals", session.evals))
        if session.graphs:  # TorchScript's graphs as the saved session numbers them
            self._emit(SourceEvent("graphs", session.graphs))

    def run(self, emit: Emit) -> None:
        self._emit = emit
        try:
            self.engine = self._engine_factory(self.config, self._on_engine_event)
            try:
                self.engine.start()
            except PttraceError as exc:
                self.error = exc
                emit(SourceEvent("failed", exc))
                return
            try:
                self._started_up(emit)
            except BaseException as exc:
                # The recorder is set up, its run not begun: run() ends it at once, and the session
                # gets its end record with the reason (the target killed or detached from).
                self.engine.request_stop(f"pttrace failed: {type(exc).__name__}: {exc}")
                self.engine.run()
                raise
            self.engine.run()
        except PttraceError as exc:
            self.error = exc
            emit(SourceEvent("failed", exc))
        finally:
            self._done.set()

    def _started_up(self, emit: Emit) -> None:
        """Between the recorder's start and its run: what the user chose meanwhile, and the first events."""
        assert self.engine is not None
        if self._stop_reason:  # the user quit while gdb was starting: run() ends it at once
            self.engine.request_stop(self._stop_reason)
        with self._lock:
            self._started = True
            if self._early_mode is not None:
                # Chosen while gdb started; the agent may have been set up before: tell it now,
                # before the target runs, so that even the first hit stops.
                self.engine.control.set_mode(self._early_mode)
        if self.engine.info is not None:
            emit(SourceEvent("session", self.engine.info))
        if self.engine.target_pid:
            self._pid = self.engine.target_pid
            emit(SourceEvent("pid", self._pid))
        emit(SourceEvent("state", self.engine.target_state))

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    @property
    def session_path(self) -> Path | None:
        return getattr(self.engine, "session_path", None)

    def load_session(self) -> Session:
        if self.session_path is None:
            raise NotLive("the session has not started yet.")
        session = storage.load(self.session_path)
        if not self.finished:
            session.info.status = "running"  # no end record yet because the run goes on
        return session

    def request_stop(self, reason: str = "quit") -> None:
        self._stop_reason = self._stop_reason or reason
        if self.engine is not None and not self.finished:
            self.engine.request_stop(self._stop_reason)  # the first reason stands (a hang-up, then the UI's quit)

    def stop(self, reason: str = "quit", timeout: float = 20.0) -> None:
        self.request_stop(reason)
        engine = self.engine
        if engine is None or self._done.wait(timeout):
            return
        mi = getattr(engine, "mi", None)  # the run loop is stuck: take gdb away from under it
        if mi is not None:
            mi.close(grace=1.0)
        self._done.wait(5.0)

    def _libraries(self) -> list[str]:
        """Where names come from: what the target has loaded, and torch's libraries in its
        environment (a launched script may not have imported torch yet)."""
        libs = mapped_libraries(getattr(self.engine, "target_pid", None) or self.config.pid)
        try:
            from tracer.symbols import torch_libraries

            libs += [lib for lib in torch_libraries(self.config.python) if lib not in libs]
        except PttraceError:
            if not libs:
                raise
        return libs

    def complete(self, text: str, limit: int = 12) -> list[str]:
        local: list[str] = []
        if self.session_path is not None:
            try:
                local = breakpoint_names(storage.load(self.session_path).hits, text, limit)
            except PttraceError:
                local = []
        try:
            found = symbol_suggestions(text, self._libraries(), limit)
        except PttraceError:
            if not local:
                raise
            found = []
        return list(dict.fromkeys(local + found))[:limit]

    def check_breakpoint(self, spec: str) -> Refusal | None:
        """None if a library loaded in the target defines ``spec`` (or only gdb can tell); else
        why not, with the closest names. A library loaded later may still define it: the user can
        then add it as pending, knowingly."""
        pid = getattr(self.engine, "target_pid", None) or self.config.pid
        loaded = mapped_libraries(pid)
        if not is_function_name(spec) or not loaded:
            return None
        from tracer.symbols import libraries_defining, suggest

        name = spec.strip()
        try:
            if libraries_defining(name, loaded):
                return None
            later = [lib for lib in libraries_defining(name, self._libraries()) if lib not in loaded]
            close = suggest(name, loaded, limit=5)
        except Exception:
            return None  # the index cannot tell: gdb decides
        if later:
            return Refusal(f"{name} is defined in {os.path.basename(later[0])}, which the target has not "
                           "loaded yet", close)
        return Refusal(f"no library loaded in the target defines {name}", close)

    # --- the target's standard input: its terminal, which gdb gave it ---------------------------
    def send_input(self, text: str) -> None:
        terminal = getattr(self.engine, "terminal", None)
        if self.attached or terminal is None or self.finished:
            raise NotLive("there is no launched target to type to" if not self.attached else
                          "attached: the target reads its own terminal, not pttrace's")
        data = text.encode("utf-8", "surrogateescape")
        try:
            while data:
                data = data[os.write(terminal.master, data):]
        except OSError as exc:
            raise NotLive(f"the target's terminal is gone ({exc.strerror or exc})") from None

    def waiting_for_input(self) -> bool:
        from tracer.recorder.target_input import reading_stdin

        if self.attached or self.finished:
            return False
        return reading_stdin(getattr(self.engine, "target_pid", None))

    # --- control ------------------------------------------------------------------------------
    def _engine(self, steered: bool = True):
        """The controller the keys steer, once gdb is up and while the run lasts: the main recorder's, or
        (``steered``) that of the child that executed Python whose stop the TUI shows (steering.py)."""
        if self.engine is None or getattr(self.engine, "control", None) is None:
            raise NotStopped("gdb is still starting.")
        if self.finished:
            raise NotLive("the run has ended: there is no target any more.")
        child = self._steering.child
        if steered and child is not None:
            control = self._child_controls().get(child)
            if control is not None:
                return control
        return self.engine.control

    def _child_controls(self) -> dict:
        children = getattr(self.engine, "child_controls", None)
        return children() if children is not None else {}

    @property
    def _steered_pid(self) -> int | None:
        """The process whose names gdb's words are given in (unknowns.name_unknowns)."""
        return self._steering.child or self._pid

    def set_mode(self, mode: str) -> None:
        """Also while gdb is starting: the run then begins in that mode (a hit during
        ``import torch`` comes too early for a key pressed once the target runs)."""
        with self._lock:
            if not self._started and not self.finished:
                self.config = dataclasses.replace(self.config, mode=mode)
                self._early_mode = self._mode = mode
                return
            self._engine(steered=False).set_mode(mode)  # the children's recorders follow it
            self._mode = mode

    def resume(self) -> Hit | None:
        """Continue the steered gdb's processes. Another gdb still stopped is steered then: its call path
        is returned (None when every gdb runs)."""
        with self._lock:
            engine = self._engine()
            if engine.target_state != "stopped":
                raise NotStopped("the target is not stopped.")
            engine.resume()
            other = self._steering.ran_on()
            if other is None:
                return None
            child, stop = other
            self._stops += 1
            self._emit(SourceEvent("stopped", stop))
            return self._engine().snapshot()

    # The lock covers sending a command, not waiting for its stop: a `finish` out of a long
    # function may run for minutes, and an interrupt must be able to cut it short meanwhile.
    def interrupt(self) -> Hit | None:
        with self._lock:
            engine = self._engine()
            if engine.target_state != "running":
                engine = self._running()
            before = self._stops
            engine.interrupt()
        hit = self._wait_for_stop(before, timeout=10.0, engine=engine)
        with self._lock:
            hit, note = python_thread(engine, hit)
        if note:
            self._emit(SourceEvent("note", note))
        return hit

    def _running(self):
        """The steered gdb's target is not running: the main one's, else a child's that runs (the target
        executed another Python: its own recorder has it)."""
        for child, control in [(None, self._engine(steered=False)), *self._child_controls().items()]:
            if control.target_state == "running":
                self._steering.child = child
                return control
        raise NotStopped("the target is not running.")

    def step(self, action: str) -> Hit | None:
        if action not in CONTROL_ACTIONS:
            raise ValueError(action)
        with self._lock:
            engine = self._engine()
            if engine.target_state != "stopped":
                raise NotStopped(f"cannot {action}: the target is running (interrupt it first).")
            before = self._stops
            said = getattr(engine, action)()
        if said:  # gdb's own words: "Single stepping until exit from function X, which has no line ..."
            from tracer.recorder.unknowns import demangled, name_unknowns

            self._emit(SourceEvent("gdb", demangled(name_unknowns(" ".join(str(said).split()), self._steered_pid))))
        return self._wait_for_stop(before, timeout=60.0, engine=engine)

    def _wait_for_stop(self, stops_before: int, timeout: float, engine) -> Hit | None:
        """Wait for the target to stop again, then read where it is.

        A stop is known from a "stopped" event, or from a snapshot that succeeds: gdb refuses to
        read the frames of a running thread, so a snapshot that answers means the target stopped.
        """
        deadline = time.monotonic() + timeout
        delay = 0.02
        while time.monotonic() < deadline and not self.finished:
            if self._stops != stops_before or engine.target_state != "running":
                hit = engine.snapshot()
                if hit is not None and hit.frames:
                    return hit
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)
        return None

    def gdb_line(self, line: str, place, say=None) -> PromptResult:
        """A prompt line: run by gdb in the thread and frame ``place`` names; a line that lets the target
        run (``until``, ``stepi 3``) is waited for as a step is, a ``continue`` is not."""
        from tracer.recorder.prompt import runs_code

        note = None
        with self._lock:
            engine = self._engine()
            if engine.target_state != "stopped":
                raise NotStopped("gdb answers while the target is stopped: interrupt it first (i).")
            if self.attached and runs_code(line) and not self._said_calls:
                self._said_calls = True
                note = ("a call runs code in the attached process (its own threads stay stopped meanwhile); "
                        "what it changes stays changed after pttrace detaches")
            before = self._stops
            answer, kind = engine.gdb_line(line, place, say)
        hit = (self._wait_for_stop(before, timeout=60.0, engine=engine) if kind == "resuming" and not answer.error
               else None)
        from tracer.recorder.unknowns import name_unknowns

        return PromptResult(name_unknowns(answer.text, self._steered_pid), answer.error, answer.where, kind, hit,
                            note, answer.moved_to)

    def gdb_complete(self, text: str) -> list[str]:
        with self._lock:
            return self._engine().gdb_complete(text)

    def threads(self) -> list:
        with self._lock:
            engine = self._engine()
            if engine.target_state != "stopped":
                raise NotStopped("the target is running: interrupt it first (i).")
            rows = engine.threads()
        from tracer.recorder.unknowns import name_unknowns

        # gdb names no function of the libraries it has as unwind tables only: pttrace's index does
        return [dataclasses.replace(row, frame=name_unknowns(row.frame, self._steered_pid)) for row in rows]

    def select_thread(self, thread_id: str) -> Hit | None:
        with self._lock:
            engine = self._engine()
            if engine.target_state != "stopped":
                raise NotStopped("the target is running: interrupt it first (i).")
            return engine.select_thread(thread_id)

    def add_breakpoint(self, spec: str) -> None:
        with self._lock:
            self._engine(steered=False).add_breakpoint(spec)

    def delete_breakpoint(self, spec: str) -> None:
        with self._lock:
            self._engine(steered=False).delete_breakpoint(spec)

    def enable_breakpoint(self, spec: str, on: bool) -> None:
        with self._lock:
            self._engine(steered=False).enable_breakpoint(spec, on)
