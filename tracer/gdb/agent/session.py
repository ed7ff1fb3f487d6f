"""The agent's side of the session file: hits, breakpoints and warnings, appended as they happen.

Records are encoded by ``tracer.records`` (the code every reader decodes them with); each is one
``write()`` on an ``O_APPEND`` descriptor, so pttrace's own records never interleave with these.
An ``OSError`` (disk full, directory gone) reaches the caller: the breakpoint stops so pttrace notices.
"""
from __future__ import annotations

import os

from tracer import records


class SessionOut:
    def __init__(self) -> None:
        self.fd = -1
        self.path = ""
        self._warned: set[str] = set()

    def open(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: dict) -> None:
        if self.fd >= 0:
            os.write(self.fd, records.encode(record))

    def write_hit(self, record: dict) -> None:
        if self.fd >= 0:
            os.write(self.fd, records.encode_hit(record))

    def warn(self, message: str) -> None:
        """A warning every view shows, written once however often it recurs."""
        if message not in self._warned:
            self._warned.add(message)
            self.write(records.warning(message))


OUT = SessionOut()
