"""A gdb/MI3 connection: token-numbered commands that wait for their own result, and an event queue.

pygdbmi's parser turns each MI line into a dict; this module owns the process and the threads.
We do not use ``GdbController.write()``: it returns whatever arrived within a timeout, not the
result of the command that was written (DESIGN.md section 2).
"""
from __future__ import annotations

import itertools
import os
import queue
import select
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from tracer.errors import GdbDied, PttraceError


def _parser():
    """pygdbmi's parser, imported by the reader thread once gdb is started: its import (~15 ms quiet, 35 ms at
    load 10: the escapes' tables) is not on the way to gdb's start."""
    from pygdbmi import gdbmiparser

    # pygdbmi's parser passes every key, value, dict and list it parses through ``fmt_green`` (its debug log's
    # colours) before calling ``logger.debug``, whether or not that log is on: a third of each line's parse
    # (352 us against 245 us a line for a library load, a stop and a breakpoint table). Its log shows the raw
    # values instead when someone turns it on.
    if not gdbmiparser.logger.isEnabledFor(10):  # logging.DEBUG, without importing logging for it
        gdbmiparser.fmt_green = lambda x: x
    return gdbmiparser


def stream_lines(stream: Iterable[bytes]) -> Iterator[bytes]:
    """A pipe's lines until its end, or until another thread closes it under the reader (closing gdb does):
    that read raises ValueError (or OSError), and is the same end, so the reader still tells that gdb is gone
    and frees whoever waits for an answer (a loaded suite run showed the ValueError escape the reader thread)."""
    try:
        yield from stream
    except (ValueError, OSError):
        return


@dataclass
class MiResult:
    """gdb's result record for one command, with the console and log text it wrote meanwhile."""

    token: int
    message: str  # "done", "running", "connected", "error", "exit"
    payload: dict[str, Any] | None
    console: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)  # gdb's stderr-like stream (warnings, errors) meanwhile

    @property
    def error(self) -> str | None:
        if self.message != "error":
            return None
        return (self.payload or {}).get("msg") or "gdb reported an error"


@dataclass
class MiEvent:
    """An asynchronous record: ``*stopped``, ``=library-loaded``, ``=thread-created``, stream output."""

    kind: str  # "notify" | "console" | "log" | "target" | "gdb-exited"
    message: str | None
    payload: Any


class GdbCommandError(PttraceError):
    """gdb answered ``^error`` to a command."""


def mi_quote(text: str) -> str:
    """Quote a string as an MI c-string, so user input reaches gdb as one argument, unchanged."""
    if "\n" in text or "\r" in text or "\0" in text:
        raise GdbCommandError("a gdb argument cannot contain a line break or a NUL byte.")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class MiConnection:
    """Owns one gdb process speaking MI3 on its stdin/stdout."""

    def __init__(self, proc: subprocess.Popen):
        """``proc``: gdb started on pipes (spawn.start_process), before this module was imported: its first output
        waits in the pipe until the readers start here."""
        self.proc = proc
        self._tokens = itertools.count(100)
        self._pending: dict[int, tuple[threading.Event, list]] = {}
        self._lock = threading.Lock()
        self._command_lock = threading.Lock()
        self._console: list[str] | None = None
        self._log: list[str] | None = None
        self.events: "queue.Queue[MiEvent]" = queue.Queue()
        self.stderr_tail: list[str] = []
        self.transcript: list[str] = []  # last MI lines, for error reports
        self.last_notify = 0.0  # time.monotonic() of the last async record (*stopped, =thread-group-started...)
        self._alive = True
        self._exit_requested = False
        self._reader = threading.Thread(target=self._read_stdout, name="gdb-mi-reader", daemon=True)
        self._reader.start()
        self._err_reader = threading.Thread(target=self._read_stderr, name="gdb-stderr", daemon=True)
        self._err_reader.start()

    # --- reading -------------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        gdbmiparser = _parser()
        for raw in stream_lines(self.proc.stdout):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line or line == "(gdb) " or line == "(gdb)":
                continue
            self.transcript.append(line)
            if len(self.transcript) > 200:
                del self.transcript[:100]
            try:
                rec = gdbmiparser.parse_response(line)
            except Exception:  # a line the parser cannot read is not worth dying for
                self.events.put(MiEvent("log", None, line))
                continue
            self._dispatch(rec)
        self._alive = False
        with self._lock:
            for ev, box in self._pending.values():
                box.append(None)
                ev.set()
        self.events.put(MiEvent("gdb-exited", None, self.exit_code(wait=2.0)))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in stream_lines(self.proc.stderr):
            self.stderr_tail.append(raw.decode("utf-8", errors="replace").rstrip())
            if len(self.stderr_tail) > 50:
                del self.stderr_tail[:25]

    def _dispatch(self, rec: dict[str, Any]) -> None:
        kind = rec.get("type")
        if kind == "result":
            token = rec.get("token")
            with self._lock:
                waiter = self._pending.pop(token, None) if token is not None else None
            if waiter is not None:
                ev, box = waiter
                box.append(rec)
                ev.set()
            return
        if kind == "notify":
            self.last_notify = time.monotonic()
        if kind == "console" and self._console is not None:
            self._console.append(rec.get("payload") or "")
        elif kind == "log" and self._log is not None:
            self._log.append(rec.get("payload") or "")
        self.events.put(MiEvent(kind or "log", rec.get("message"), rec.get("payload")))

    def exit_code(self, wait: float = 0.0) -> int | None:
        """gdb's exit status (negative: killed by that signal); None while it runs.

        Its stdout closes a moment before the kernel lets us reap it, so a caller that has just seen
        EOF waits a little: otherwise a gdb killed by SIGKILL would look like one that is still there.
        """
        try:
            return self.proc.wait(wait) if wait else self.proc.poll()
        except subprocess.TimeoutExpired:
            return None

    # --- commands ------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._alive and self.proc.poll() is None

    def command(self, text: str, timeout: float | None = 30.0, check: bool = True) -> MiResult:
        """Send one MI command and wait for *its* result record."""
        if not self.alive:
            raise GdbDied("gdb is no longer running.")
        with self._command_lock:
            token = next(self._tokens)
            ev = threading.Event()
            box: list = []
            with self._lock:
                self._pending[token] = (ev, box)
            self._console, self._log = [], []
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(f"{token}{text}\n".encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                raise GdbDied("gdb is no longer running.") from None
            if not ev.wait(timeout):
                with self._lock:
                    self._pending.pop(token, None)
                raise GdbCommandError(f"gdb did not answer `{text.split()[0]}` within {timeout:g} s.")
            console, self._console = self._console, None
            logged, self._log = self._log, None
            rec = box[0] if box else None
            if rec is None:
                raise GdbDied("gdb exited while running a command.")
            result = MiResult(token, rec.get("message") or "", rec.get("payload"), console or [], logged or [])
            if check and result.message == "error":
                raise GdbCommandError(f"gdb refused `{text}`: {result.error}")
            return result

    def console(self, cli_command: str, timeout: float | None = 30.0, check: bool = True) -> MiResult:
        """Run a CLI command through ``-interpreter-exec console``, its text quoted for MI."""
        return self.command(f"-interpreter-exec console {mi_quote(cli_command)}", timeout, check)

    def stop_waiting(self) -> bool:
        """A ``*stopped`` gdb sent is waiting in the queue, not read yet (a peek: nothing is taken)."""
        with self.events.mutex:
            return any(ev.kind == "notify" and ev.message == "stopped" for ev in self.events.queue)

    def next_event(self, timeout: float | None = None) -> MiEvent | None:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    # --- shutdown ------------------------------------------------------------------------------
    def request_exit(self) -> None:
        """Ask gdb to exit, without waiting: its exit (0.1-0.16 s at load 11: the target's death, then the kernel
        freeing gdb's memory; the agent skips its Python's finalization) goes on while the caller ends its own
        part; ``close`` waits for it."""
        if self._exit_requested or self.proc.poll() is not None or not self._alive:
            return
        self._exit_requested = True
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(b"-gdb-exit\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def close(self, grace: float = 3.0) -> None:
        """Ask gdb to exit (unless ``request_exit`` did); kill it if it does not. Never leaves a gdb behind."""
        self.request_exit()
        self._wait_exit(grace)
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait(5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream:
                    stream.close()
            except OSError:
                pass

    def _wait_exit(self, timeout: float) -> None:
        """Wait until gdb has exited, ``timeout`` at most: woken by its exit (a pidfd turns readable then), not
        by polling every 20 ms, as this did (10 ms lost on average at every run's end)."""
        if self.proc.poll() is not None:
            return
        try:
            fd = os.pidfd_open(self.proc.pid)
        except OSError:  # reaped meanwhile (by the reader's exit_code), or a kernel without pidfds
            fd = None
        if fd is not None:
            try:
                select.select([fd], [], [], timeout)
            finally:
                os.close(fd)
            return
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
