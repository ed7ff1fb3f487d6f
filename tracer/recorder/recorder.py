"""One recording: gdb and its inferiors from start-up to the session's end record.

``Recorder`` wires the parts: launch.py starts gdb (and the target's terminal), resolve.py and
libraries.py decide breakpoints and symbols, agent_link.py talks to the agent that records hits inside
gdb, stops.py reads each stop, tailer.py follows the session file, control.py steers a stopped target,
shutdown.py ends it. Its events (events.py) go to one listener, from the recorder's own threads.
"""
from __future__ import annotations

import json
import logging
import os
import re
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tracer import storage
from tracer.errors import GdbDied, PermissionDenied, PttraceError, TargetError, UsageError
from tracer.gdb.mi import GdbCommandError, MiConnection, mi_quote
from tracer.model import Session, SessionInfo
from tracer.recorder import guard, launch, resolve, shutdown
from tracer.recorder.agent_link import AgentError, AgentLink
from tracer.recorder.config import TraceConfig
from tracer.recorder.control import Controller
from tracer.recorder.events import (GdbBreakpointChanged, Listener, RecorderEvent, RecorderFinished,
                                    TargetOutput, TargetStateChanged, TargetStopped, WarningRaised)
from tracer.recorder.later_libraries import LaterLibraries
from tracer.recorder.libraries import LibraryPolicy
from tracer.recorder.stops import Stop, StopKind, read_stop
from tracer.recorder.tailer import SessionTailer

log = logging.getLogger("pttrace.recorder")
# gdb 13 with the default detach-on-fork: "[Detaching after fork from child process 1234]".
_DETACHED_CHILD = re.compile(r"Detaching after (v?fork) from child process (\d+)")


@dataclass
class Inferior:
    """One process gdb debugs for this recording (gdb's thread group ``i1``, ``i2``...)."""

    group: str
    pid: int | None = None
    state: str = "starting"  # "running", "stopped", "exited", "detached"
    attached: bool = False
    exit_code: int | None = None


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
        self.tailer: SessionTailer | None = None
        self.writer: storage.SessionWriter | None = None
        self.session_path: Path | None = None
        self.info: SessionInfo | None = None
        self.main = Inferior("i1", pid=config.pid, attached=config.pid is not None)
        self.inferiors = {"i1": self.main}
        self.status = "running"
        self.end_reason: str | None = None
        self.write_error: str | None = None
        self.warnings: list[str] = []
        self.started = False  # start() is done: breakpoints added from now on come from a UI
        self.interrupting = False  # the controller's interrupt(): its SIGINT stop is ours
        self.control = Controller(self)
        self._stop_requested: str | None = None
        self.gdb_lost = False  # gdb died, was killed or stopped answering: the target was not ended by it
        self._finished = threading.Event()
        self._tmp = tempfile.TemporaryDirectory(prefix="pttrace-")
        self._terminal: launch.TargetTerminal | None = None
        self._keys: shutdown.KeyTable | None = None
        self._torch_libs: list[str] = []

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

    def request_stop(self, reason: str = "interrupted") -> None:
        """Thread-safe: ask the run loop to end (Ctrl-C, the TUI's quit)."""
        self._stop_requested = reason

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

    def _set_state(self, inferior: Inferior, state: str) -> None:
        inferior.state = state
        self.emit(TargetStateChanged(state))

    # --- start-up -------------------------------------------------------------------------------
    def _open_session(self, facts: dict, gdb_version: str) -> None:
        cfg = self.config
        sid = storage.new_session_id()
        self.session_path = Path(cfg.session_dir) / (sid + storage.SUFFIX)
        self.writer = storage.SessionWriter(self.session_path)
        argv = [self.python, *cfg.program()] if cfg.pid is None else launch.cmdline(cfg.pid)
        self.info = SessionInfo(
            id=sid, mode="run" if cfg.pid is None else "attach", argv=argv, pid=cfg.pid,
            python=facts.get("python"), torch_version=facts.get("torch_version"),
            torch_git_version=facts.get("torch_git_version"), gdb_version=gdb_version,
            started=storage.now_iso(), cwd=cfg.cwd or os.getcwd(),
        )
        self.writer.header(self.info)
        self._keys = shutdown.KeyTable(self.writer, cfg.dispatch_keys, cfg.dispatch_keys_later)
        self.tailer = SessionTailer(self.session_path, self.writer, self.emit, self.warn)

    def _torch_libraries(self) -> list[str]:
        from tracer.symbols import torch_libraries

        try:
            return torch_libraries(self.python)
        except resolve.IndexFailure as exc:  # no torch: gdb reads every library, as plain gdb does
            log.debug("no torch libraries for %s: %s", self.python, exc)
            return []

    def start(self) -> Path:
        cfg = self.config
        self.python, facts = launch.validate(cfg)
        gdb = launch.gdb_path(self.settings)
        gversion = launch.gdb_version(gdb)
        helper = launch.python_gdb_helper(self.python)
        self._open_session(facts, gversion)
        if not helper:
            self.warn(f"no python-gdb helper beside {self.python}; Python frames are read by pttrace's own reader")
        for note in cfg.notes:
            self.warn(note)
        program = [self.python, *cfg.program()] if cfg.pid is None else None
        try:
            self.mi = launch.start_gdb(launch.gdb_argv(gdb, helper, program), cfg.cwd, self.settings)
            self._set_up_gdb()
        except (PermissionDenied, UsageError):
            self._abort_startup()
            raise
        except (GdbCommandError, AgentError) as exc:
            self._abort_startup()
            raise TargetError(exc.message) from None
        except GdbDied:
            tail = " ".join(self.mi.stderr_tail[-3:]) if self.mi else ""
            self._abort_startup()
            raise GdbDied("gdb exited during start-up: " + tail) from None
        self.started = True
        if cfg.live:
            self.tailer.start()
        return self.session_path

    def _set_up_gdb(self) -> None:
        cfg, mi = self.config, self.mi
        self.agent = AgentLink(mi)
        self._torch_libs = self._torch_libraries()
        specs = list(cfg.breakpoints)
        if self.settings.all_symbols or self.settings.break_by_name:
            resolution = resolve.Resolution(by_gdb=specs)
        else:
            resolution = resolve.resolve_by_index(specs, self._torch_libs)
        for message in resolution.warnings:
            self.warn(message)
        address_breakpoints = list(cfg.address_breakpoints) + resolution.by_address
        self.policy = LibraryPolicy(mi, self.agent, self.settings, self._torch_libs, self.warn)
        self.policy.plan(resolution.by_gdb, address_breakpoints)
        self.later = LaterLibraries([b["label"] for b in resolution.by_address], self._torch_libs, self.warn)
        if self.later.active and not self.policy.deferring:
            # A name set by address is looked for again in every library loaded later: at a stop.
            mi.command("-gdb-set stop-on-solib-events 1")
        if cfg.pid is None:
            if not launch.needs_shell([self.python, *cfg.program()]):
                mi.command("-gdb-set startup-with-shell off")  # no shell between gdb and the target
            self._terminal = launch.TargetTerminal(cfg.forward_output, lambda text: self.emit(TargetOutput(text)),
                                                   launch.our_stdin() if cfg.forward_input else None)
            mi.command(f"-inferior-tty-set {mi_quote(self._terminal.name)}")
        self.agent.load()
        agent_config = Path(self._tmp.name) / "agent.json"
        agent_config.write_text(json.dumps({
            "session": str(self.session_path.resolve()),
            "mode": self.mode,
            "max_hits": cfg.max_hits,
            "max_depth": cfg.max_depth,
            "breakpoints": [],
            "layers": list(cfg.layers),
            "address_breakpoints": address_breakpoints,
            "stack_reuse": self.settings.stack_reuse,
            "stack_reuse_stats": self.settings.stack_reuse_stats,
            "log": str(self.settings.log_file.resolve()) if self.settings.log_file else None,
        }))
        if cfg.pid is not None:
            self._attach(cfg.pid)
        self.agent.setup(agent_config)
        for spec in resolution.by_gdb:
            self.control.add_breakpoint(spec, fatal=True)
        if resolution.by_address:
            self.agent.dump_breakpoints()

    def _attach(self, pid: int) -> None:
        launch.attach(self.mi, pid)
        self.main.pid = pid
        self.main.state = "stopped"
        self._wait_stopped(30.0)
        # The libraries were loaded before we came: read the symbols we want now.
        self._drain_events()
        self.policy.decide_new()
        self._break_in_later_libraries()

    def _break_in_later_libraries(self) -> None:
        """The names set by address, found again in the libraries loaded since the last stop."""
        items = self.later.breakpoints()
        if items:
            try:
                self.agent.break_address(items)
            except AgentError as exc:
                self.warn(f"{exc.message}; --break {items[0]['label']} is not broken on in "
                          f"{os.path.basename(items[0]['library'])}")

    def _abort_startup(self) -> None:
        """Start-up failed before anything was recorded: no gdb and no empty session left behind."""
        if self.mi:
            self.mi.close()  # gdb detaches from an attached target as it exits
        if self._terminal:
            self._terminal.close()
        if self.writer:
            self.writer.close()
            try:
                self.session_path.unlink()
            except OSError as exc:
                log.debug("cannot remove %s: %s", self.session_path, exc)
            self.writer = None

    # --- running --------------------------------------------------------------------------------
    def run(self) -> str:
        """Run the target to its end (or max-hits / timeout / request_stop()); returns the final status."""
        assert self.mi is not None
        mi = self.mi
        deadline = time.monotonic() + self.config.timeout if self.config.timeout else None
        try:
            if self._stop_requested:
                self.end_reason = self._stop_requested
                self._finish_target(interrupt=False)
                return self._close()
            mi.command("-exec-run" if self.config.pid is None else "-exec-continue")
            self._set_state(self.main, "running")
            while True:
                if self._stop_requested:
                    self.end_reason = self._stop_requested
                    self._finish_target(interrupt=True)
                    break
                if deadline and time.monotonic() > deadline:
                    self.end_reason = "timeout"
                    self._finish_target(interrupt=True)
                    break
                ev = mi.next_event(timeout=0.1)
                if ev is None:
                    continue
                if ev.kind == "gdb-exited":
                    self._gdb_gone(ev.payload)
                    break
                if ev.kind == "console":
                    self._on_console(ev.payload)
                if ev.kind == "notify" and self._on_notify(ev.message, ev.payload or {}):
                    break
        except GdbDied:
            self._gdb_gone(mi.exit_code(wait=2.0))
        except (GdbCommandError, AgentError) as exc:
            self.warn(f"gdb stopped answering ({exc.message}); the run was ended")
            self.gdb_lost = True
            self.end_reason = "gdb-unresponsive"
        except BaseException as exc:  # the outer edge: the session still gets its end, the target its detach
            self.end_reason = f"pttrace failed: {type(exc).__name__}: {exc}"
            self._finish_target(interrupt=False)
            self._close()
            raise
        return self._close()

    def _on_console(self, text: object) -> None:
        """gdb's own messages while the target runs: a child process it let go is a warning."""
        m = _DETACHED_CHILD.search(text) if isinstance(text, str) else None
        if m:
            self.warn(f"child process {m.group(2)} (a {m.group(1)} of the target) was not followed: its hits are "
                      "not recorded (pttrace follows one process; DataLoader workers, multiprocessing and "
                      "subprocesses run untraced)")

    def _gdb_gone(self, rc: int | None) -> None:
        """gdb ended under us: killed by a signal (somebody cut the run short) or died on its own."""
        self.gdb_lost = True
        if isinstance(rc, int) and rc < 0:
            self.status = "interrupted"
            self.end_reason = f"gdb was killed by signal {-rc}"
            self.warn(f"gdb was killed by signal {-rc}; hits recorded before that are kept")
        else:
            self.status = "gdb-died"
            self.end_reason = "gdb-died"

    def _on_notify(self, message: str | None, payload: dict) -> bool:
        """React to one MI notification; True when the recording is over."""
        if message == "thread-group-started":
            inferior = self.inferiors.setdefault(payload.get("id") or "i1", Inferior(payload.get("id") or "i1"))
            try:
                inferior.pid = int(payload.get("pid"))
            except (TypeError, ValueError):
                log.debug("thread-group-started without a pid: %r", payload)
            return False
        if message == "stopped":
            for inferior in self.inferiors.values():
                if inferior.state not in ("exited", "detached"):
                    inferior.state = "stopped"  # all-stop mode: every inferior stops
            stop = read_stop(payload, ending=bool(self._stop_requested), interrupting=self.interrupting)
            log.debug("stop: %s", stop)
            return self._on_stop(stop)
        if message == "running":
            self._set_state(self.main, "running")  # after a continue, step or finish from the controller
            return False
        if message == "library-loaded":
            path = payload.get("target-name") or payload.get("id")
            if path and payload.get("symbols-loaded") != "1":
                self.policy.library_loaded(path)
            if path:
                self.later.loaded(path)
            return False
        if message in ("breakpoint-modified", "breakpoint-created"):
            self.emit(GdbBreakpointChanged(payload))
        return False

    def _stopped(self, stop: Stop) -> None:
        self.emit(TargetStopped(stop.reason, stop.thread_id, stop.signal, stop.breakpoint, stop.frame))

    def _on_stop(self, stop: Stop) -> bool:
        kind = stop.kind
        inferior = self.inferiors.get(stop.group or "i1", self.main)
        if kind is StopKind.EXITED:
            inferior.exit_code, inferior.state = stop.exit_code, "exited"
            self.status, self.end_reason = "completed", "exited"
            return True
        if kind is StopKind.KILLED:
            inferior.state = "exited"
            self.status, self.end_reason = "target-crashed", f"killed by {stop.signal}"
            return True
        if kind is StopKind.INTERRUPTED:
            self.interrupting = False
            self._stopped(stop)
        elif kind is StopKind.CRASHED:
            if stop.thread_id:
                self.mi.command(f"-thread-select {stop.thread_id}", check=False)
            self.agent.record_stop(stop.signal)
            self.status, self.end_reason = "target-crashed", f"crashed with {stop.signal}"
            self._stopped(stop)
            self._finish_target(interrupt=False)
            return True
        elif kind is StopKind.SIGNAL:
            self.mi.command("-exec-continue", check=False)  # the target's own signal: pass it on
        elif kind is StopKind.LIBRARIES:
            self.policy.decide_new()
            self._break_in_later_libraries()
            self.mi.command("-exec-continue", check=False)
        elif kind is StopKind.BREAKPOINT:
            return self._on_breakpoint(stop)
        elif kind is StopKind.STEPPED:
            self._stopped(stop)
        return False

    def _on_breakpoint(self, stop: Stop) -> bool:
        """gdb stopped at a hit the agent did not let go on: symbols it needs, the end of the
        run (max-hits, an unwritable session), or stop mode."""
        try:
            status = self.agent.status()
            if (status.need_libs or status.need_launcher) and not status.write_error:
                # The stack passed through libraries whose symbols we skipped: load them, record again.
                # Or it is a parallel worker's: the agent reads the launching thread, then records it.
                if status.need_libs:
                    self.policy.load_symbols(status.need_libs)
                self.agent.rerecord()
                status = self.agent.status()
                if not status.stop:
                    self.mi.command("-exec-continue", check=False)
                    return False
        except AgentError as exc:
            self.warn(f"the agent inside gdb did not answer ({exc.message}); the run was ended so that no "
                      "limit is missed")
            self.end_reason = "agent-failed"
            self._finish_target(interrupt=False)
            return True
        if status.write_error:
            self.write_error = status.write_error
            self.end_reason = "session file unwritable"
            self._finish_target(interrupt=False)
            return True
        self._stopped(stop)
        if self.config.max_hits and status.hits >= self.config.max_hits:
            self.end_reason = "max-hits"
            self._finish_target(interrupt=False)
            return True
        if self.mode == "stop":
            return False  # the controller (TUI) decides what happens next
        self.mi.command("-exec-continue", check=False)
        return False

    def _finish_target(self, interrupt: bool) -> None:
        """End the target's part: kill a launched target, detach from an attached one."""
        mi = self.mi
        if mi is None or not mi.alive:
            return
        if guard.process_state(mi.proc.pid) == "T":
            # Stopped (SIGSTOP, a debugger): it could neither detach nor kill the target. Let it go on.
            self.warn("gdb was stopped by a signal; pttrace continued it to end the run cleanly")
            os.kill(mi.proc.pid, signal.SIGCONT)
        try:
            if interrupt and self.main.state == "running":
                mi.command("-exec-interrupt", timeout=10, check=False)
                self._wait_stopped(5.0)
            self.agent.dump_breakpoints(timeout=20)
            if self.config.pid is None:
                mi.console("kill", timeout=20, check=False)
            else:
                res = mi.command("-target-detach", timeout=20, check=False)
                if res.error:
                    raise GdbCommandError(res.error)
                self.status = "detached"
        except (GdbDied, GdbCommandError, AgentError) as exc:
            log.debug("ending the target: %s", exc)
            self.gdb_lost = True  # whatever gdb left in the target is ours to remove (_close)
        self.main.state = "exited" if self.config.pid is None else "detached"

    def _wait_stopped(self, timeout: float) -> bool:
        """Wait for the target to stop, still taking note of other events (library loads)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ev = self.mi.next_event(timeout=0.1)
            if ev is None:
                continue
            if ev.kind == "notify" and ev.message == "stopped":
                self.main.state = "stopped"
                return True
            if ev.kind == "gdb-exited":
                return False
            if ev.kind == "notify":
                self._on_notify(ev.message, ev.payload or {})
        return False

    def _drain_events(self) -> None:
        while (ev := self.mi.next_event(timeout=0.05)) is not None:
            if ev.kind == "notify" and ev.message != "stopped":
                self._on_notify(ev.message, ev.payload or {})

    # --- shutdown -------------------------------------------------------------------------------
    def _leave_attached_target(self) -> None:
        """gdb is gone: the attached target must run on without any breakpoint instruction of gdb's."""
        status, messages = guard.leave_attached(self.main.pid, self.gdb_lost)
        for message in messages:
            self.warn(message)
        if status is not None and (status != "detached" or self.gdb_lost or self.status == "running"):
            self.status = status

    def _close(self) -> str:
        mi = self.mi
        # After a detach gdb has forgotten the target's libraries: a dump now would file every
        # location under the executable. The one _finish_target wrote before detaching stands.
        if mi is not None and mi.alive and self.main.state != "detached":
            try:
                self.agent.dump_breakpoints(timeout=20)
            except (GdbDied, AgentError) as exc:
                log.debug("last breakpoint dump: %s", exc)
        if mi is not None:
            mi.close()
        if self.config.pid is None and self.main.pid and guard.alive(self.main.pid):
            # gdb went away without taking the launched target with it.
            try:
                os.kill(self.main.pid, signal.SIGKILL)
            except OSError as exc:
                log.debug("cannot kill %s: %s", self.main.pid, exc)
        if self.config.pid is not None and self.main.state != "exited":
            self._leave_attached_target()
        self.status = shutdown.final_status(self.status, self.end_reason, attached=self.config.pid is not None)
        if self.status == "gdb-died" and mi is not None and mi.stderr_tail:
            self.warn("gdb died: " + " ".join(mi.stderr_tail[-3:]))
        if self.writer:
            self._keys.settle()
            # Names for the frames recorded by library and offset that no fill record has yet.
            self.tailer.scan(emit=self.config.live)
            try:
                shutdown.write_suggestions(self.session_path, self.writer, self._torch_libs)
                self.writer.end(self.status, self.exit_code, reason=self.end_reason)
            except PttraceError as exc:
                self.write_error = self.write_error or exc.message
            self.writer.close()
        if self._terminal is not None:
            self._terminal.close()
        self._finished.set()
        if self.tailer is not None:
            self.tailer.stop()
        self.emit(RecorderFinished(self.status))
        self._tmp.cleanup()
        return self.status

