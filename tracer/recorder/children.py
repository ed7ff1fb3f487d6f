"""Children that run another program (``exec``): a Python one is traced by a recorder of its own.

gdb 13 cannot follow a process into a new program with pttrace's breakpoints (they are set by address,
and gdb would put them into the new program at the old addresses), so the recording takes a child through
its exec and detaches it there, held (SIGSTOP) at the new program's first instruction (exec_hold.py).
When it executes a Python interpreter (``subprocess`` running Python, multiprocessing's spawn and
forkserver children, torchrun's ranks), a second recorder attaches to it with the same breakpoints, lets
it go (SIGCONT) and writes its hits into a session file of its own beside the main one
(``<session id>.children/<pid>.jsonl``): nothing it runs is missed, its dynamic loader included. The
main session names that file in the child's ``process`` record, and ``storage.load`` reads it with the
main one. A child whose recorder cannot start is let go (SIGCONT) untraced, with a warning.

Each child's recorder runs in the recording's mode (record or stop, changed with it): in stop mode its
hits stop the child in that recorder's gdb, and its controller (``control_of``) steers it from there. A
breakpoint added, removed or turned off during the run is changed in every child's recorder too, and one
that starts later starts with the change.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from tracer.errors import PttraceError
from tracer.recorder import guard
from tracer.recorder.config import TraceConfig
from tracer.recorder.control import Controller
from tracer.recorder.events import Listener, RecorderEvent, from_child
from tracer.recorder.keeper import Keeper
from tracer.recorder.shutdown import LOST_EVENT
from tracer.session import records, storage

log = logging.getLogger("pttrace.recorder")

CHILDREN_SUFFIX = ".children"


@dataclass(frozen=True)
class Execd:
    """A process held at the first instruction of the program it executed (SIGSTOP, detached)."""

    pid: int
    argv: list[str]
    program: str | None


class ChildRecorder(Protocol):
    """What a child's recorder is asked (``Recorder`` is one; tests may hand another)."""

    def start(self) -> Path: ...

    def run(self) -> str: ...

    def request_stop(self, reason: str = "interrupted") -> None: ...

    @property
    def end_reason(self) -> str | None: ...

    @property
    def control(self) -> Controller | None: ...


MakeRecorder = Callable[[TraceConfig, Listener], ChildRecorder]


def _python_like(argv: list[str], python: str) -> bool:
    if not argv:
        return False
    prog = os.path.basename(argv[0])
    if prog.startswith("python"):
        return True
    try:
        return os.path.realpath(argv[0]) == os.path.realpath(python)
    except OSError:
        return False


class ExecChildren:
    """The recorders of a recording's children that executed Python (one thread each)."""

    def __init__(self, config: TraceConfig, python: str, session_path: Path, writer: storage.SessionWriter,
                 make_recorder: MakeRecorder, emit: Callable[[RecorderEvent], None], warn: Callable[[str], None]):
        self._config = config
        self._python = python
        self._session_path = session_path
        self._writer = writer
        self._make = make_recorder
        self._emit = emit
        self._warn = warn
        self._subs: dict[int, ChildRecorder] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closing = False
        self._keeper = Keeper()
        self.lost: list[int] = []  # children whose own recorder was ended by an event its gdb lost
        self.mode = config.mode  # the recording's mode, which each child's recorder follows
        self._off: set[str] = set()  # breakpoints turned off during the run: off in a child's recorder too

    def set_mode(self, mode: str) -> None:
        """The recording's mode changed (the TUI's m): every child's recorder takes it; one that starts
        later starts in it."""
        with self._lock:
            self.mode = mode
            subs = list(self._subs.values())
        for sub in subs:
            control = sub.control
            if control is None:
                continue  # still starting: _trace gives it the mode once it is up
            try:
                control.set_mode(mode)
            except PttraceError as exc:  # its gdb is ending: nothing left to stop
                log.debug("mode of a child's recorder: %s", exc.message)

    def breakpoint_changed(self, spec: str, change: str) -> None:
        """The user added ("add"), removed ("remove"), turned off ("off") or on ("on") a breakpoint of the
        recording: every child's recorder makes the same change, and one that starts later starts with it."""
        with self._lock:
            specs = [b for b in self._config.breakpoints if b != spec]
            if change != "remove":
                specs.append(spec)
            self._config = dataclasses.replace(self._config, breakpoints=tuple(specs))
            if change == "off":
                self._off.add(spec)
            else:
                self._off.discard(spec)
            subs = list(self._subs.items())
        for pid, sub in subs:
            if sub.control is not None:  # one still starting takes its breakpoints from the configuration
                self._change(pid, sub.control, spec, change)

    def _change(self, pid: int, control: Controller, spec: str, change: str) -> None:
        try:
            if change == "add":
                control.add_breakpoint(spec)
            elif change == "remove":
                control.delete_breakpoint(spec)
            else:
                control.enable_breakpoint(spec, change == "on")
        except PttraceError as exc:  # its gdb may be ending; else the child keeps it as it was: said
            self._warn(f"process {pid}: breakpoint {spec!r} could not be changed ({change}) in its own recorder: "
                       f"{exc.message}")

    def control_of(self, pid: int) -> Controller | None:
        """The controller of the recorder that traces ``pid`` (None: no such recorder, or still starting)."""
        with self._lock:
            sub = self._subs.get(pid)
        return sub.control if sub is not None else None

    def controls(self) -> dict[int, Controller]:
        """Every child's recorder that can be steered, by pid."""
        with self._lock:
            subs = dict(self._subs)
        return {pid: sub.control for pid, sub in subs.items() if sub.control is not None}

    def hold(self, pid: int) -> bool:
        """Stop ``pid`` (SIGSTOP) until its recorder has attached; a keeper continues it if pttrace dies."""
        self._keeper.held(pid)
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            self._keeper.released(pid)
            return False
        return True

    def holding(self, pid: int) -> None:
        """``pid`` was stopped by pttrace's own means (a detach with SIGSTOP): the keeper continues it if
        pttrace dies before its recorder lets it go."""
        self._keeper.held(pid)

    def resume(self, pid: int) -> None:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
        self._keeper.released(pid)

    def wants(self, argv: list[str]) -> bool:
        """A program this recording traces with a recorder of its own: Python."""
        return _python_like(argv, self._python)

    def hand_over(self, execd: Execd) -> None:
        """A child held (stopped, detached) at the first instruction of the Python it executed: traced from
        there by a recorder of its own, in a thread; let go untraced if that cannot be."""
        if self._closing:
            self.resume(execd.pid)
            self.not_followed(execd.pid, f" ({' '.join(execd.argv[:3])})")
            return
        t = threading.Thread(target=self._follow, args=(execd,), name=f"exec-child-{execd.pid}", daemon=True)
        self._threads.append(t)
        t.start()

    def idle(self) -> bool:
        """No child recorder runs."""
        return not any(t.is_alive() for t in self._threads)

    def not_followed(self, pid: int | None, what: str = "") -> None:
        self._warn(f"process {pid}, a child that executes another program{what}, was not followed: its hits "
                       "are not recorded")

    def _follow(self, execd: Execd) -> None:
        pid, argv = execd.pid, execd.argv
        try:
            self._trace(pid, argv)
        except PttraceError as exc:
            self.resume(pid)
            self._warn(f"process {pid} ({' '.join(argv[:4])}) could not be traced: {exc.message}")
        except Exception as exc:  # the edge of a thread of our own: the main recording goes on, said
            self.resume(pid)
            log.exception("tracing child %s", pid)
            self._warn(f"process {pid} ({' '.join(argv[:4])}) could not be traced: {type(exc).__name__}: {exc}")

    def _trace(self, pid: int, argv: list[str]) -> None:
        sub_dir = Path(str(self._session_path)[: -len(".jsonl")] + CHILDREN_SUFFIX)
        sub_dir.mkdir(exist_ok=True)
        # live: its hits go to the main recording's listener (a TUI shows them as they happen)
        cfg = dataclasses.replace(self._config, pid=pid, script=None, module=None, code=None, script_args=(),
                                  python=self._python, session_dir=sub_dir, live=self._config.live,
                                  forward_output=False, forward_input=False, timeout=None, notes=(), max_hits=0,
                                  mode=self.mode)
        sub = self._make(cfg, lambda ev: self._forward(pid, ev))
        with self._lock:
            if self._closing:
                self.resume(pid)
                return
            self._subs[pid] = sub
        try:
            path = sub.start()
            if self.mode != cfg.mode and sub.control is not None:  # changed while its gdb started
                sub.control.set_mode(self.mode)
            for spec in sorted(self._off):
                if sub.control is not None:
                    self._change(pid, sub.control, spec, "off")
        finally:
            self.resume(pid)
        rel = os.path.relpath(path, self._session_path.parent)
        try:
            self._writer.write(records.process(pid, argv=argv, session=rel))
        except PttraceError as exc:
            log.debug("process record: %s", exc)
        sub.run()
        if sub.end_reason == LOST_EVENT:
            # Its session says where; the recording as a whole did not end as asked (not "completed").
            self.lost.append(pid)
            self._warn(f"the recorder of process {pid} was ended by an event its gdb lost: the hits of process "
                       f"{pid} (and of its children) after that are missing")

    def _forward(self, pid: int, event) -> None:
        forwarded = from_child(pid, event)
        if forwarded is not None:
            self._emit(forwarded)

    def close(self, kill: bool) -> None:
        """The main recording ends: every child recorder ends too (detaching); a run's children are
        killed after (an attach's are left running)."""
        with self._lock:
            self._closing = True
            subs = dict(self._subs)
        for sub in subs.values():
            sub.request_stop("interrupted")
        for t in self._threads:
            t.join(60)
        if kill:
            for pid in subs:
                if not guard.alive(pid):
                    continue
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        self._keeper.close()
