"""Children that run another program (``exec``): a Python one is traced by a recorder of its own.

gdb 13 cannot follow a process into a new program with pttrace's breakpoints (they are set by address,
and gdb would put them into the new program at the old addresses), so the recording lets a vfork child
go (processes.py). When that child then executes a Python interpreter (``subprocess`` running Python,
multiprocessing's spawn and forkserver children, torchrun's ranks), a second recorder attaches to it
with the same breakpoints and writes its hits into a session file of its own beside the main one
(``<session id>.children/<pid>.jsonl``); the main session names it in the child's ``process`` record,
and ``storage.load`` reads it with the main one. What runs before the attach (the interpreter's first
fraction of a second) is not traced; the session says so.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from tracer import records
from tracer.errors import PttraceError
from tracer.recorder import guard
from tracer.recorder.launch import cmdline
from tracer.recorder.processes import parent_of

if TYPE_CHECKING:
    from tracer.recorder.recorder import Recorder

log = logging.getLogger("pttrace.recorder")

EXEC_WAIT = 3.0  # seconds a child let go at its vfork is watched for its exec
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


def _resume(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except OSError:
        pass


class ExecChildren:
    """The recorders of a recording's children that executed Python (one thread each)."""

    def __init__(self, rec: "Recorder", make_recorder: Callable | None = None):
        self._rec = rec
        self._make = make_recorder
        self._subs: dict[int, "Recorder"] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closing = False

    def let_go(self, pid: int, before: list[str] | None = None) -> None:
        """A child gdb let go at its vfork (or at its ``execve``): watched for the program it executes.
        ``before``: its command line before the exec (a vfork child's is its parent's until then)."""
        if before is None:
            ppid = parent_of(pid)
            before = cmdline(ppid) if ppid else []
        if self._closing or self._rec.session_path is None:
            self._not_followed(pid)
            return
        t = threading.Thread(target=self._follow, args=(pid, before), name=f"exec-child-{pid}", daemon=True)
        self._threads.append(t)
        t.start()

    def _not_followed(self, pid: int, what: str = "") -> None:
        self._rec.warn(f"process {pid}, a child that executes another program{what}, was not followed: its hits "
                       "are not recorded")

    def _follow(self, pid: int, before: list[str]) -> None:
        end = time.monotonic() + EXEC_WAIT
        argv = cmdline(pid)
        # Empty while the kernel swaps the program in, or when the process is gone.
        while (argv == before or not argv) and time.monotonic() < end and not self._closing:
            if not argv and not guard.alive(pid):
                break
            time.sleep(0.005)
            argv = cmdline(pid)
        if not argv:
            self._not_followed(pid, " that ended before pttrace saw what it ran")
            return
        if argv == before or self._closing:
            self._not_followed(pid)
            return
        if not _python_like(argv, self._rec.python):
            self._rec.warn(f"process {pid} executes {' '.join(argv[:3])}, not Python: it is not traced")
            return
        # Held (SIGSTOP) while its recorder starts and attaches, so that its hits are not missed; let go
        # (SIGCONT) once attached, or whatever happens.
        try:
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            return
        try:
            self._trace(pid, argv)
        except PttraceError as exc:
            _resume(pid)
            self._rec.warn(f"process {pid} ({' '.join(argv[:4])}) could not be traced: {exc.message}")
        except Exception as exc:  # the edge of a thread of our own: the main recording goes on, said
            _resume(pid)
            log.exception("tracing child %s", pid)
            self._rec.warn(f"process {pid} ({' '.join(argv[:4])}) could not be traced: {type(exc).__name__}: {exc}")

    def _trace(self, pid: int, argv: list[str]) -> None:
        from tracer.recorder.recorder import Recorder

        rec = self._rec
        sub_dir = Path(str(rec.session_path)[: -len(".jsonl")] + CHILDREN_SUFFIX)
        sub_dir.mkdir(exist_ok=True)
        cfg = dataclasses.replace(rec.config, pid=pid, script=None, module=None, code=None, script_args=(),
                                  python=rec.python, session_dir=sub_dir, live=False, forward_output=False,
                                  forward_input=False, timeout=None, notes=(), max_hits=0, mode="record")
        sub = (self._make or Recorder)(cfg)
        with self._lock:
            if self._closing:
                return
            self._subs[pid] = sub
        try:
            path = sub.start()
        finally:
            _resume(pid)
        rel = os.path.relpath(path, Path(rec.session_path).parent)
        if rec.writer is not None:
            try:
                rec.writer.write(records.process(pid, argv=argv, session=rel, attached_late=True))
            except PttraceError as exc:
                log.debug("process record: %s", exc)
        rec.warn(f"process {pid} ({' '.join(argv[:4])}) executes Python: it is traced by a recorder of its own "
                 "that attached after its exec (what it ran before that is not recorded)")
        sub.run()

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
