"""The launched target's standard input in ``--batch``: pttrace's own stdin (a pipe, a file or a
terminal), copied into the target's pseudo-terminal.

The target reads a terminal, not a pipe: it is what gdb gives it (``-inferior-tty-set``). A terminal
has no end of file, only an EOF character in canonical mode, so the terminal is switched to canonical
mode without echo, line editing or signals, and every byte that canonical mode would take as an
instruction (EOF, erase, kill, the NUL that Linux counts as a disabled character...) is sent behind
``^V`` (literal next), so that any bytes arrive as they are. Lines longer than the terminal's line
buffer (4,095 bytes) are pushed on in pieces with ``^D`` (which only ends the file on an empty line).
At the end of our stdin the target reads end-of-file, as from a pipe (a few times over, for a
program that reads again).
"""
from __future__ import annotations

import logging
import os
import select
import termios
import threading

log = logging.getLogger("pttrace.recorder")

LNEXT, EOF = b"\x16", b"\x04"
_PUSH_EVERY = 2048  # bytes of one line before a ^D pushes them to the reader
_EOFS = 8  # end-of-file read this many times over: a pipe answers every later read with it too
_SPECIAL = ("VEOF", "VERASE", "VKILL", "VWERASE", "VREPRINT", "VLNEXT", "VEOL", "VEOL2", "VDISCARD")


def make_canonical(slave: int) -> set[int]:
    """Canonical input without echo or signals on the target's terminal (output stays raw); the
    byte values that are special in it."""
    attrs = termios.tcgetattr(slave)
    attrs[3] = (attrs[3] | termios.ICANON | termios.IEXTEN) & ~(termios.ECHO | termios.ECHONL | termios.ISIG)
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    attrs = termios.tcgetattr(slave)
    special = set()
    for name in _SPECIAL:
        value = attrs[6][getattr(termios, name)]
        special.add(value[0] if isinstance(value, bytes) else value)
    return special


def encode(data: bytes, special: set[int], pending: int) -> tuple[bytes, int]:
    """``data`` as the canonical terminal must receive it to deliver it unchanged; ``pending``:
    bytes of the current line not yet pushed (before and after)."""
    out = bytearray()
    for b in data:
        if b in special:
            out += LNEXT
        out.append(b)
        if b == 0x0A:
            pending = 0
        else:
            pending += 1
            if pending >= _PUSH_EVERY:
                out += EOF
                pending = 0
    return bytes(out), pending


def end_of_input(pending: int) -> bytes:
    """What ends the file: a push of the unfinished line, if any, then end-of-file."""
    return (EOF if pending else b"") + EOF * _EOFS


class InputForwarder:
    """Copies ``source`` (a file descriptor) into the terminal's master side until the source ends or
    ``close()``. It never blocks the recorder: reads and writes wait in this thread, in small pieces
    once ``select`` says they can go (a target that stops reading can still hold one write until it
    ends; the thread is a daemon)."""

    def __init__(self, source: int, master: int, slave: int):
        self.source = source
        self.master = master
        self.special = make_canonical(slave)
        self._closed = threading.Event()
        self.thread = threading.Thread(target=self._run, name="target-input", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        pending = 0
        try:
            while not self._closed.is_set():
                ready, _, _ = select.select([self.source], [], [], 0.2)
                if not ready:
                    continue
                data = os.read(self.source, 65536)
                if not data:
                    break
                chunk, pending = encode(data, self.special, pending)
                if not self._write(chunk):
                    return
            self._write(end_of_input(pending))
        except OSError as exc:  # our stdin or the terminal went away: the target sees no more input
            log.debug("target input stopped: %s", exc)

    def _write(self, data: bytes) -> bool:
        view = memoryview(data)
        while view:
            if self._closed.is_set():
                return False
            _, ready, _ = select.select([], [self.master], [], 0.2)
            if ready:
                view = view[os.write(self.master, view[:512]):]
        return True

    def close(self) -> None:
        self._closed.set()
        self.thread.join(timeout=1.0)


# The ``read`` system call's number, by machine: what /proc/PID/task/T/syscall starts with while a
# thread is blocked in it.
_READ_SYSCALL = {"x86_64": 0, "aarch64": 63}


def reading_stdin(pid: int | None) -> bool:
    """Whether a thread of ``pid`` is blocked reading its standard input (``read(0, ...)``), as the
    kernel tells in ``/proc/PID/task/T/syscall`` (readable by the process's ancestors: pttrace is one).
    False when that cannot be read."""
    number = _READ_SYSCALL.get(os.uname().machine)
    if not pid or number is None:
        return False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/syscall", encoding="ascii") as fh:
                fields = fh.read().split()
        except (OSError, UnicodeDecodeError):
            continue
        if len(fields) >= 2 and fields[0] == str(number):
            try:
                if int(fields[1], 16) == 0:
                    return True
            except ValueError:
                continue
    return False
