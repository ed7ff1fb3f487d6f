"""Following the session file the agent appends to: each new hit's frames get names and file:line
from our index (``fill`` records), and, for a live UI, each new record becomes an event."""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Callable

from tracer import records, storage
from tracer.errors import PttraceError
from tracer.fill import FrameFiller
from tracer.model import Breakpoint, Hit
from tracer.recorder.events import BreakpointRecorded, HitRecorded, RecorderEvent, WarningRaised

log = logging.getLogger("pttrace.recorder")


class SessionTailer:
    def __init__(self, path: Path, writer: storage.SessionWriter, emit: Callable[[RecorderEvent], None],
                 warn: Callable[[str], None]):
        self.path = path
        self.writer = writer
        self._emit = emit
        self._warn = warn
        self._told: set[str] = set()
        self._filler = FrameFiller()
        self._lock = threading.Lock()
        self._tail = records.Tail()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()

    def fill(self, frames: list) -> None:
        """Name what gdb left unnamed in these frames, and append the answers as a fill record."""
        entries = self._filler.fill(frames)
        for library, why in list(self._filler.unreadable.items()):
            if library not in self._told:
                self._told.add(library)
                self._warn(f"pttrace's symbol index cannot read {library} ({why}); its frames keep their "
                           "library and offset (`pttrace where 0xOFFSET --lib LIBRARY` once it is readable)")
        if entries:
            try:
                self.writer.fill(entries)
            except PttraceError as exc:  # the session's end reports an unwritable file
                log.debug("fill record not written: %s", exc.message)

    def scan(self, emit: bool) -> None:
        """Read the records appended since the last scan: fill the new hits' frames, and with
        ``emit``, turn the records into events."""
        with self._lock:
            try:
                with open(self.path, "rb") as fh:
                    lines = self._tail.lines(fh)  # the agent may be half-way through the last line
            except OSError as exc:
                log.debug("cannot read %s: %s", self.path, exc)
                return
            for raw in lines:
                if b'"offset"' not in raw and not emit:
                    continue  # only frames recorded by library and offset need our index
                try:
                    rec = records.decode(raw)
                except records.BadRecord:
                    continue
                kind = rec.get("type")
                if kind == "hit":
                    self.fill(rec.get("frames") or [])
                    if rec.get("launched_by"):  # a parallel worker's launching thread: its stack too
                        self.fill(rec["launched_by"].get("frames") or [])
                    if emit:
                        self._emit(HitRecorded(Hit.from_dict(rec)))
                elif emit and kind == "breakpoint":
                    self._emit(BreakpointRecorded(Breakpoint.from_dict(rec)))
                elif emit and kind == "warning":
                    self._emit(WarningRaised(str(rec.get("message"))))

    def start(self) -> None:
        """Follow the file on a thread, until ``stop()``: for a UI that shows hits as they happen."""
        self._thread = threading.Thread(target=self._follow, name="session-tail", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        while True:
            done = self._done.is_set()
            self.scan(emit=True)
            if done:
                break
            time.sleep(0.05)

    def stop(self) -> None:
        """After the last record: one more scan by the thread, then it ends."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(2)
