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
import tempfile
import threading
import time
from pathlib import Path

from tracer.session import storage
from tracer.errors import GdbDied, PermissionDenied, PttraceError, TargetError, UsageError
from tracer.gdb.mi import GdbCommandError, MiConnection
from tracer.session.model import Session, SessionInfo
from tracer.recorder import ending, launch, shutdown, startup
from tracer.recorder.agent_link import AgentError, AgentLink
from tracer.recorder.children import ExecChildren
from tracer.recorder.config import TraceConfig
from tracer.recorder.control import Controller
from tracer.recorder.events import Listener, RecorderEvent, TargetStateChanged, WarningRaised
from tracer.recorder.follow import Follower
from tracer.recorder.inferiors import Inferior
from tracer.recorder.processes import ProcessTable
from tracer.recorder.later_libraries import LaterLibraries
from tracer.recorder.libraries import LibraryPolicy
from tracer.recorder.reactions import Reactions
from tracer.recorder.tailer import SessionTailer

log = logging.getLogger("pttrace.recorder")


class Recorder:
    """One traced run or attach. Use ``start()``, then ``run()``; ``request_stop()`` from any thread;
    ``control`` steers the target while it is stopped."""

    def __init__(self, config: TraceConfig, listener: Listener | None = None):
        self.config = config
        self.settings = config.settings
        self.listener = listener or (lambda ev: None)
        self.mode = config.mode
        self.python = config.python
        self.mi: MiConnection | None = None
        self.agent: AgentLink | None = None
        self.policy: LibraryPolicy | None = None
        self.later = LaterLibraries([], [], self.warn)  # replaced once the breakpoints are resolved
        self.follower: Follower | None = None  # --follow: the operators met inside followed ones
        self.tailer: SessionTailer | None = None
        self.writer: storage.SessionWriter | None = None
        self.session_path: Path | None = None
        self.info: SessionInfo | None = None
        self.main = Inferior("i1", pid=config.pid, attached=config.pid is not None)
        self.processes = ProcessTable(self.main, lambda: self.writer, self.warn)
        self.children = ExecChildren(self)
        self.inferiors = self.processes.inferiors
        self.status = "running"
        self.end_reason: str | None = None
        self.write_error: str | None = None
        self.warnings: list[str] = []
        self.started = False  # start() is done: breakpoints added from now on come from a UI
        self.interrupting = False  # the controller's interrupt(): its SIGINT stop is ours
        self.control = Controller(self)
        self.reactions = Reactions(self)
        self.stop_requested: str | None = None
        self.gdb_lost = False  # gdb died, was killed or stopped answering: the target was not ended by it
        self.terminal: launch.TargetTerminal | None = None
        self.keys: shutdown.KeyTable | None = None
        self.torch_libs: list[str] = []
        self._finished = threading.Event()
        self._tmp = tempfile.TemporaryDirectory(prefix="pttrace-")

    # --- what the TUI and the batch command read -------------------------------------------------
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

    def mark_finished(self) -> None:
        self._finished.set()

    def request_stop(self, reason: str = "interrupted") -> None:
        """Thread-safe: ask the run loop to end (Ctrl-C, the TUI's quit)."""
        self.stop_requested = reason

    def load_session(self) -> Session:
        assert self.session_path is not None
        return storage.load(self.session_path)

    def emit(self, event: RecorderEvent) -> None:
        try:
            self.listener(event)
        except Exception:  # the outer edge of a listener: a UI's bug must not end the recording
            log.exception("the listener failed on %r", event)

    def warn(self, message: str) -> None:
        if message in self.warnings:
            return
        self.warnings.append(message)
        log.info("warning: %s", message)
        if self.writer:
            try:
                self.writer.warning(message)
            except PttraceError as exc:
                self.write_error = self.write_error or exc.message
        self.emit(WarningRaised(message))

    def set_state(self, inferior: Inferior, state: str) -> None:
        inferior.state = state
        self.emit(TargetStateChanged(state))

    # --- start-up -------------------------------------------------------------------------------
    def start(self) -> Path:
        cfg = self.config
        self.python = launch.validate(cfg)
        gdb = launch.gdb_path(self.settings)
        gversion = launch.gdb_version(gdb)
        helper = launch.python_gdb_helper(self.python)
        program = [self.python, *cfg.program()] if cfg.pid is None else None
        # gdb loads (~0.1 s) while the interpreter tells its versions and where torch is (two more
        # interpreters, ~0.1 s each): all at once.
        self.mi = launch.spawn_gdb(launch.gdb_argv(gdb, helper, program), cfg.cwd)
        libraries = threading.Thread(target=startup.torch_libraries, args=(self.python,), name="torch-libraries",
                                     daemon=True)
        libraries.start()
        try:
            facts = launch.describe_python(self.python)
        except UsageError:
            startup.abort(self)
            raise
        finally:
            libraries.join()  # its answer is kept (symbols.torch_libraries is cached) for set_up_gdb
        startup.open_session(self, facts, gversion)
        if not helper:
            self.warn(f"no python-gdb helper beside {self.python}; Python frames are read by pttrace's own reader")
        for note in cfg.notes:
            self.warn(note)
        try:
            launch.set_up_gdb(self.mi, self.settings)
            startup.set_up_gdb(self, Path(self._tmp.name))
        except (PermissionDenied, UsageError):
            startup.abort(self)
            raise
        except (GdbCommandError, AgentError) as exc:
            startup.abort(self)
            raise TargetError(exc.message) from None
        except GdbDied:
            tail = " ".join(self.mi.stderr_tail[-3:]) if self.mi else ""
            startup.abort(self)
            raise GdbDied("gdb exited during start-up: " + tail) from None
        self.started = True
        self.tailer.start(emit=cfg.live)  # batch: fills only, while the target runs on
        return self.session_path

    # --- running --------------------------------------------------------------------------------
    def run(self) -> str:
        """Run the target to its end (or max-hits / timeout / request_stop()); returns the final status."""
        assert self.mi is not None
        mi = self.mi
        deadline = time.monotonic() + self.config.timeout if self.config.timeout else None
        try:
            if self.stop_requested:
                self.end_reason = self.stop_requested
                ending.finish_target(self, interrupt=False)
                return self._close()
            mi.command("-exec-run" if self.config.pid is None else "-exec-continue")
            self.set_state(self.main, "running")
            quiet_since = checked = time.monotonic()
            while True:
                if self.stop_requested:
                    self.end_reason = self.stop_requested
                    ending.finish_target(self, interrupt=True)
                    break
                if deadline and time.monotonic() > deadline:
                    self.end_reason = "timeout"
                    ending.finish_target(self, interrupt=True)
                    break
                ev = mi.next_event(timeout=0.1)
                if ev is None and self.reactions.handed_over_all():
                    break
                if ev is None:
                    # Quiet for a while: is anything left to wait for? (gdb may have lost a process's end)
                    now = time.monotonic()
                    if now - quiet_since > 2.0 and now - checked > 1.0:
                        checked = now
                        if self.reactions.vanished():
                            ending.finish_target(self, interrupt=False)
                            break
                    continue
                quiet_since = time.monotonic()
                if ev.kind == "gdb-exited":
                    self.reactions.gdb_gone(ev.payload)
                    break
                if ev.kind == "console":
                    self.reactions.console(ev.payload)
                if ev.kind == "log":
                    self.reactions.log(ev.payload)
                if ev.kind == "notify" and self.reactions.notify(ev.message, ev.payload or {}):
                    break
        except GdbDied:
            self.reactions.gdb_gone(mi.exit_code(wait=2.0))
        except (GdbCommandError, AgentError) as exc:
            self.warn(f"gdb stopped answering ({exc.message}); the run was ended")
            self.gdb_lost = True
            self.end_reason = "gdb-unresponsive"
        except BaseException as exc:  # the outer edge: the session still gets its end, the target its detach
            self.end_reason = f"pttrace failed: {type(exc).__name__}: {exc}"
            ending.finish_target(self, interrupt=False)
            self._close()
            raise
        return self._close()

    def _close(self) -> str:
        status = ending.close(self)
        self._tmp.cleanup()
        return status
