"""The agent's side of the session file: hits, breakpoints and warnings, appended as they happen.

Records are encoded by ``tracer.session.records`` (the code every reader decodes them with); each is one
``write()`` on an ``O_APPEND`` descriptor, so pttrace's own records never interleave with these. A hit
is interned (schema 2): its frames, stack and site are written once, at the first hit that needs them.
An ``OSError`` (disk full, directory gone) reaches the caller: the breakpoint stops so pttrace notices.
"""
from __future__ import annotations

import os

from tracer.session import records


class SessionOut:
    def __init__(self) -> None:
        self.fd = -1
        self.path = ""
        self._warned: set[str] = set()
        self._interner = records.Interner()
        self._tail: str | None = None  # the last hit's line after its time, when it was written (repeat.py)

    def open(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: dict) -> None:
        if self.fd >= 0:
            os.write(self.fd, records.encode(record))

    def write_hit(self, seq: int, breakpoint: str | None, thread: dict, time: float, frames: list,
                  truncated: bool = False, signal: str | None = None, launched_by: dict | None = None,
                  values: list | None = None) -> None:
        self._tail = None
        if self.fd < 0:
            return
        data = self._interner.encode_hit(seq, breakpoint, thread, time, frames, truncated, signal, launched_by,
                                         values)
        try:
            os.write(self.fd, data)
        except OSError:
            self._interner.rollback()
            raise
        self._tail = self._interner.last_tail

    def last_hit_tail(self) -> str | None:
        """The end of the hit just written ('"site":N...}'), None if it was not written or has more."""
        return self._tail

    def write_raw(self, data: bytes) -> None:
        """A hit line made by repeat.py: one ``write()``, as every record."""
        if self.fd >= 0:
            os.write(self.fd, data)

    def warn(self, message: str) -> None:
        """A warning every view shows, written once however often it recurs."""
        if message not in self._warned:
            self._warned.add(message)
            self.write(records.warning(message))


OUT = SessionOut()
