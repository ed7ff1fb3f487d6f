"""One recording: gdb and its inferiors from start-up to the session's end record.

``Recorder`` holds a recording's state and wires the parts: startup.py opens the session and sets gdb up
(launch.py starts gdb and the target's terminal, resolve.py and libraries.py decide breakpoints and
symbols, agent_link.py talks to the agent that records hits inside gdb), reactions.py acts on gdb's
events (stops.py reads each stop), tailer.py follows the session file, control.py steers a stopped
target, ending.py and shutdown.py end it. Its events (events.py) go to one listener, from the
recorder's own threads.
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from tracer.errors import GdbDied, PttraceError, TargetError, UsageError
from tracer.gdb.mi import GdbCommandError, MiConnection
from tracer.recorder import launch, startup
from tracer.recorder.agent_link import AgentError, AgentLoading
from tracer.recorder.children import ExecChildren
from tracer.recorder.config import TraceConfig
from tracer.recorder.control import Controller
from tracer.recorder.ending import Ending, SessionFiles
from tracer.recorder.events import Listener, TargetStateChanged
from tracer.recorder.inferiors import Inferior
from tracer.recorder.libraries import LibraryPolicy
from tracer.recorder.notices import Notices
from tracer.recorder.outcome import Outcome
from tracer.recorder.processes import ProcessTable
from tracer.gdb.spawn import EarlyGdb
from tracer.recorder.reactions import Reactions
from tracer.recorder.watchdog import QUIET, Watchdog
from tracer.session import storage
from tracer.session.model import Session, SessionInfo

log = logging.getLogger("pttrace.recorder")


class Recorder:
    """One traced run or attach. Use ``start()``, then ``run()``; ``request_stop()`` from any thread;
    ``control`` steers the target while it is stopped (None until gdb is set up).

    It makes the parts and hands each what it uses, never itself: the notices (``emit``, ``warn``), the
    outcome, the process table; once gdb is up, the session files and ``startup.GdbParts``, from which
    the controller, the reactions, the ending and the exec'd children's recorders are built."""

    def __init__(self, config: TraceConfig, listener: Listener | None = None,
                 started: launch.StartedGdb | None = None, early: EarlyGdb | None = None):
        self.config = config
        self._started = started  # gdb started before this module was imported (run_batch), or None
        self._early = early  # or the gdb `run`/`attach` started first, not checked yet (the TUI's)
        self.python = config.python
        self.outcome = Outcome()
        self._files: SessionFiles | None = None
        self.notices = Notices(listener or (lambda ev: None), self._writer, self.outcome)
        self.main = Inferior("i1", pid=config.pid, attached=config.pid is not None)
        self.processes = ProcessTable(self.main, self._writer, self.notices.warn)
        self.mi: MiConnection | None = None
        self.info: SessionInfo | None = None
        self.parts: startup.GdbParts | None = None
        self.control: Controller | None = None
        self._reactions: Reactions | None = None
        self._ending: Ending | None = None
        self._children: ExecChildren | None = None
        self._watchdog: Watchdog | None = None
        self.stop_requested: str | None = None
        self._finished = threading.Event()
        self._tmp = launch.AgentDir()

    def _writer(self) -> storage.SessionWriter | None:
        return self._files.writer if self._files is not None else None

    # --- what the TUI and the batch command read -------------------------------------------------
    @property
    def session_path(self) -> Path | None:
        return self._files.path if self._files is not None else None

    @property
    def policy(self) -> LibraryPolicy | None:
        return self.parts.policy if self.parts is not None else None

    @property
    def terminal(self) -> launch.TargetTerminal | None:
        return self.parts.terminal if self.parts is not None else None

    @property
    def status(self) -> str:
        return self.outcome.status

    @property
    def end_reason(self) -> str | None:
        return self.outcome.end_reason

    @property
    def gdb_lost(self) -> bool:
        return self.outcome.gdb_lost

    @property
    def write_error(self) -> str | None:
        return self.outcome.write_error

    @property
    def warnings(self) -> list[str]:
        return self.notices.warnings

    @property
    def target_pid(self) -> int | None:
        return self.main.pid

    @property
    def target_state(self) -> str:
        return self.main.state

    @property
    def exit_code(self) -> int | None:
        return self.main.exit_code

    @property
    def finished(self) -> bool:
        """The run is over: session closed, launched target killed or attached one detached."""
        return self._finished.is_set()

    def child_controls(self) -> dict[int, Controller]:
        """The controllers of the recorders of children that executed Python, by pid: each steers its child
        in its own gdb (stop mode stops there too)."""
        return self._children.controls() if self._children is not None else {}

    def request_stop(self, reason: str = "interrupted") -> None:
        """Thread-safe: ask the run loop to end (Ctrl-C, the TUI's quit)."""
        self.stop_requested = reason

    def load_session(self) -> Session:
        assert self.session_path is not None
        return storage.load(self.session_path)

    def warn(self, message: str) -> None:
        self.notices.warn(message)

    # --- start-up -------------------------------------------------------------------------------
    def start(self) -> Path:
        cfg = self.config
        # gdb loads and imports the agent (~0.1 s and ~0.1-0.2 s of its CPU) while the interpreter tells its
        # versions and where torch is (two more interpreters, ~0.1 s each): all at once.
        started = self._started or launch.StartedGdb.start(cfg, early=self._early)
        cfg.start_background()
        self.python, gversion, helper, self.mi = started.python, started.gdb_version, started.helper, started.mi
        try:
            facts = self._describe_python()
            self.info, self._files = startup.open_session(cfg, self.python, facts, gversion, self.notices.emit,
                                                          self.notices.warn)
        except BaseException:  # a bad --python, a --session-dir that is a file, a full disk: nothing recorded
            self._abort()  # yet, and gdb, up already, is not left behind
            raise
        try:
            self._set_up(helper, started.agent)
        except BaseException as exc:
            failure = self._start_failed(exc)
            if failure is exc:
                raise
            raise failure from None
        return self._files.path

    def _describe_python(self) -> dict:
        libraries = threading.Thread(target=startup.torch_libraries, args=(self.python,), name="torch-libraries",
                                     daemon=True)
        libraries.start()
        try:
            return launch.describe_python(self.python)
        finally:
            libraries.join()  # its answer is kept (symbols.torch_libraries is cached) for set_up_gdb

    def _set_up(self, helper: str | None, agent: AgentLoading) -> None:
        """gdb set up, the breakpoints armed and the session file followed, once the file is open."""
        cfg, notices, files, mi = self.config, self.notices, self._files, self.mi
        assert files is not None and mi is not None
        if not helper:
            self.warn(f"no python-gdb helper beside {self.python}; Python frames are read by pttrace's own reader")
        for note in cfg.notes:
            self.warn(note)
        launch.set_up_gdb(mi, cfg.settings)
        self.parts = startup.prepare_gdb(mi, cfg, self.python, files.path, self._tmp.path, notices.emit,
                                         notices.warn, agent)
        self._wire(mi, self.parts, files)
        assert self.control is not None and self._reactions is not None
        startup.arm(mi, self.parts, cfg, self.control, self._reactions, self.processes)
        files.tailer.start(emit=cfg.live)  # batch: fills only, while the target runs on

    def _start_failed(self, exc: BaseException) -> BaseException:
        """What start-up raises once the session file is open. A refusal (bad input, a target gdb may not
        attach to) leaves nothing, as before the file was opened. Any other failure (gdb dying, an answer
        it could not give, a fault of pttrace's own) keeps the file and ends it with an end record that
        says why: faults lose nothing, and the session tells what happened."""
        if isinstance(exc, (TargetError, UsageError)):  # PermissionDenied is a TargetError
            self._abort()
            return exc
        failure: BaseException = exc
        if isinstance(exc, (GdbCommandError, AgentError)):
            failure = TargetError(exc.message)
        elif isinstance(exc, GdbDied):
            failure = GdbDied(startup.gdb_died_at_start(self.mi))
        if isinstance(failure, PttraceError):
            reason = failure.message
        else:
            reason = f"pttrace failed during start-up: {type(exc).__name__}" + (f": {exc}" if str(exc) else "")
        cfg = self.config
        asked = [*cfg.breakpoints, *(str(b.get("label")) for b in cfg.address_breakpoints if b.get("label"))]
        startup.give_up(self.mi, self.terminal, self._files, reason, asked)
        self._files = None
        return failure

    def _wire(self, mi: MiConnection, parts: startup.GdbParts, files: SessionFiles) -> None:
        """The parts that act while the target runs, each handed what it uses."""
        cfg, notices = self.config, self.notices
        files.tailer.on_interpreter = parts.interpreter_seen
        self._children = ExecChildren(cfg, self.python, files.path, files.writer, type(self), notices.emit,
                                      notices.warn)
        self.control = Controller(mi, parts.agent, parts.policy, self.main, cfg.mode, cfg.follow_children,
                                  files.tailer.fill, notices.warn, self._children.set_mode,
                                  self._children.breakpoint_changed)
        self._ending = Ending(mi, parts.agent, self.processes, self.outcome, attached=cfg.pid is not None,
                              warn=notices.warn)
        self._reactions = Reactions(mi, parts.agent, parts.policy, parts.later, parts.follower, self.processes,
                                    self._children, self.control, self._ending, self.outcome, cfg,
                                    lambda: self.stop_requested is not None, notices.emit, notices.warn)
        self._watchdog = Watchdog(mi, parts.agent, self.processes, self._children, self.outcome, notices.warn)

    def _abort(self) -> None:
        startup.abort(self.mi, self.terminal, self._files)
        self._files = None  # no more warnings into the file removed

    # --- running --------------------------------------------------------------------------------
    def run(self) -> str:
        """Run the target to its end (or max-hits / timeout / request_stop()); returns the final status."""
        mi, reactions, ending, outcome = self.mi, self._reactions, self._ending, self.outcome
        assert mi is not None and reactions is not None and ending is not None, "run() before start()"
        deadline = time.monotonic() + self.config.timeout if self.config.timeout else None
        try:
            if self.stop_requested:
                outcome.end_reason = self.stop_requested
                ending.finish_target()
                return self._close()
            mi.command("-exec-run" if self.config.pid is None else "-exec-continue")
            if self.parts is not None:
                self.parts.agent.warm()  # while the target starts, not at its first hit
            self.main.state = "running"
            self.notices.emit(TargetStateChanged("running"))
            quiet_since = checked = time.monotonic()
            while True:
                if self.stop_requested:
                    outcome.end_reason = self.stop_requested
                    ending.finish_target(reactions.wait_stopped)
                    break
                if deadline and time.monotonic() > deadline:
                    outcome.end_reason = "timeout"
                    ending.finish_target(reactions.wait_stopped)
                    break
                ev = mi.next_event(timeout=0.1)
                if ev is None and reactions.handed_over_all():
                    break
                if ev is None and reactions.user_stops.poll():  # a SIGCONT for a process kept stopped
                    continue
                if ev is None:
                    # Quiet for a while: is anything left to wait for? (gdb may have lost a process's end)
                    now = time.monotonic()
                    if now - quiet_since > 2.0 and now - checked > 1.0:
                        checked = now
                        if reactions.vanished():
                            ending.finish_target()
                            break
                    # Nothing from gdb: has it lost an event? (a fork storm; watchdog.py)
                    if now - quiet_since > QUIET and self._watchdog is not None \
                            and self._watchdog.check(quiet_since):
                        ending.finish_target()
                        break
                    continue
                quiet_since = time.monotonic()
                if ev.kind == "gdb-exited":
                    reactions.gdb_gone(ev.payload)
                    break
                if ev.kind == "console":
                    reactions.console(ev.payload)
                if ev.kind == "log":
                    reactions.log(ev.payload)
                if ev.kind == "notify" and reactions.notify(ev.message, ev.payload or {}):
                    break
        except GdbDied:
            reactions.gdb_gone(mi.exit_code(wait=2.0))
        except (GdbCommandError, AgentError) as exc:
            self.warn(f"gdb stopped answering ({exc.message}); the run was ended")
            outcome.gdb_lost = True
            outcome.end_reason = "gdb-unresponsive"
        except BaseException as exc:  # the outer edge: the session still gets its end, the target its detach
            outcome.end_reason = f"pttrace failed: {type(exc).__name__}: {exc}"
            ending.finish_target()
            self._close()
            raise
        return self._close()

    def _close(self) -> str:
        assert self._ending is not None and self._files is not None and self.parts is not None
        assert self._children is not None
        parts = self.parts
        status = self._ending.close(self._files, parts.later, self._children, parts.terminal, parts.torch_libs,
                                    self.config.dispatch_tables_later, self.config.live, self._finished,
                                    self.notices.emit)
        self._tmp.cleanup()
        return status
