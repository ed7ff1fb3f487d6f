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
"""
from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from tracer.session import records
from tracer.errors import PttraceError
from tracer.recorder import guard
from tracer.recorder.events import from_child
from tracer.recorder.keeper import Keeper

if TYPE_CHECKING:
    from tracer.recorder.exec_hold import Execd
    from tracer.recorder.recorder import Recorder

log = logging.getLogger("pttrace.recorder")

CHILDREN_SUFFIX = ".children"


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

    def __init__(self, rec: "Recorder", make_recorder: Callable | None = None):
        self._rec = rec
        self._make = make_recorder
        self._subs: dict[int, "Recorder"] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closing = False
        self._keeper = Keeper()

    def hold(self, pid: int) -> bool:
        """Stop ``pid`` (SIGSTOP) until its recorder has attached; a keeper continues it if pttrace dies."""
        self._keeper.held(pid)
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            self._keeper.released(pid)
            return False
        return True

    def resume(self, pid: int) -> None:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
        self._keeper.released(pid)

    def wants(self, argv: list[str]) -> bool:
        """A program this recording traces with a recorder of its own: Python."""
        return _python_like(argv, self._rec.python)

    def hand_over(self, execd: "Execd") -> None:
        """A child held (stopped, detached) at the first instruction of the Python it executed: traced from
        there by a recorder of its own, in a thread; let go untraced if that cannot be."""
        if self._closing or self._rec.session_path is None:
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
        self._rec.warn(f"process {pid}, a child that executes another program{what}, was not followed: its hits "
                       "are not recorded")

    def _follow(self, execd: "Execd") -> None:
        pid, argv = execd.pid, execd.argv
        try:
            self._trace(pid, argv)
        except PttraceError as exc:
            self.resume(pid)
            self._rec.warn(f"process {pid} ({' '.join(argv[:4])}) could not be traced: {exc.message}")
        except Exception as exc:  # the edge of a thread of our own: the main recording goes on, said
            self.resume(pid)
            log.exception("tracing child %s", pid)
            self._rec.warn(f"process {pid} ({' '.join(argv[:4])}) could not be traced: {type(exc).__name__}: {exc}")

    def _trace(self, pid: int, argv: list[str]) -> None:
        from tracer.recorder.recorder import Recorder

        rec = self._rec
        sub_dir = Path(str(rec.session_path)[: -len(".jsonl")] + CHILDREN_SUFFIX)
        sub_dir.mkdir(exist_ok=True)
        # live: its hits go to the main recording's listener (a TUI shows them as they happen)
        cfg = dataclasses.replace(rec.config, pid=pid, script=None, module=None, code=None, script_args=(),
                                  python=rec.python, session_dir=sub_dir, live=rec.config.live, forward_output=False,
                                  forward_input=False, timeout=None, notes=(), max_hits=0, mode="record")
        sub = (self._make or Recorder)(cfg, lambda ev: self._forward(pid, ev))
        with self._lock:
            if self._closing:
                self.resume(pid)
                return
            self._subs[pid] = sub
        try:
            path = sub.start()
        finally:
            self.resume(pid)
        rel = os.path.relpath(path, Path(rec.session_path).parent)
        if rec.writer is not None:
            try:
                rec.writer.write(records.process(pid, argv=argv, session=rel))
            except PttraceError as exc:
                log.debug("process record: %s", exc)
        sub.run()

    def _forward(self, pid: int, event) -> None:
        forwarded = from_child(pid, event)
        if forwarded is not None:
            self._rec.emit(forwarded)

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
