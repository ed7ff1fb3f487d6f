"""The small libraries the last run of the same command's stacks passed through, read at once on a re-run.

gdb reads a small library's symbols only when a recorded stack passes through it (libraries.py): the
agent asks, pttrace reads them, and the hit is walked again, once per library, since gdb unwinds past
one it has no symbols for only by guessing. On bench/call_bigdebug.py's first hit that is libffi, then
_ctypes: an MI stop, two more walks and their round trips at every run (timed from the MI lines of a
re-run at load 12: 0.10 s of gdb's CPU, 0.45-0.6 s of wall time, the target stopped). A re-run of the same
command meets the same libraries, so their names are kept in pttrace's cache, by the command (the
interpreter, the program and its arguments, the breakpoints), and read as they load. A library kept
that the run never loads costs nothing; one that changed on disk (size, mtime) is not read early.
"""
from __future__ import annotations

import hashlib
import json
import os

from tracer.settings import cache_dir, write_cache_file

KEEP = 64  # libraries kept for one command: a stack passes through a few


def _stamp(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


class StackLibraries:
    """The libraries a command's recorded stacks needed the symbols of, kept across its runs."""

    def __init__(self, command: list[str]):
        key = hashlib.sha256(json.dumps(command).encode("utf-8", "surrogateescape")).hexdigest()[:24]
        self.path = cache_dir() / "stack-libraries" / f"{key}.json"
        try:
            data = json.loads(self.path.read_text())
            self._known: dict[str, str] = {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
        except (OSError, ValueError):
            self._known = {}

    def knows(self, path: str) -> bool:
        """Whether a stack of this command's last runs passed through this very library (same size, mtime)."""
        real = os.path.realpath(path)
        stamp = self._known.get(real)
        return stamp is not None and stamp == _stamp(real)

    def add(self, paths) -> None:
        changed = False
        for path in paths:
            real = os.path.realpath(path)
            stamp = _stamp(real)
            if stamp is not None and self._known.get(real) != stamp:
                self._known.pop(real, None)
                self._known[real] = stamp
                changed = True
        if not changed:
            return
        while len(self._known) > KEEP:
            self._known.pop(next(iter(self._known)))
        write_cache_file(self.path, json.dumps(self._known), "stack-libraries")
