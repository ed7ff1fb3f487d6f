"""Following the session file the agent appends to: each new call path's frames get names and
file:line from our index (``fill`` records), and, for a live UI, each new record becomes an event.
Read a chunk at a time, a line at a time: a million-hit session is never all in memory."""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from tracer.session import evals, records, storage
from tracer.errors import PttraceError
from tracer.session.fill import FrameFiller
from tracer.session.model import Breakpoint, Frame, Hit
from tracer.session.torchscript import GRAPH, TsGraph, TsRecordError, is_interpreter_loop
from tracer.recorder.events import (BreakpointRecorded, EvalsRecorded, GraphRecorded, HitRecorded, ProcessRecorded,
                                    RecorderEvent, WarningRaised)

log = logging.getLogger("pttrace.recorder")


def unnamed_warning(library: str, frames: list[Frame]) -> str:
    """The warning for the frames of ``library`` ("" if in no file) that stay without a name."""
    n = len(frames)
    count = f"{n} frame{'s' if n > 1 else ''} of the first call path through it"
    if not library:
        return (f"frames outside every file the target mapped have no function name ({count.replace(' through it', '')}"
                "): code in anonymous memory (JIT-compiled), or return addresses gdb read where the stack holds "
                "none; they are shown by address")
    from tracer.symbols.debug_packages import debug_advice

    interpreter = any(f.layer == "interpreter" for f in frames)
    return (f"frames in {library} have no function name ({count}): neither gdb nor pttrace's symbol index has a "
            "symbol there, so they are shown by library and address. To name them: "
            + debug_advice(library).what_to_do(interpreter))


class SessionTailer:
    def __init__(self, path: Path, writer: storage.SessionWriter, emit: Callable[[RecorderEvent], None],
                 warn: Callable[[str], None]):
        self.path = path
        self.writer = writer
        self._emit = emit
        self._warn = warn
        self._told: set[str] = set()
        self._unnamed_told: set[str] = set()  # libraries whose unnamed frames were warned of
        self._unnamed_lock = threading.Lock()
        self._filler = FrameFiller()
        self._lock = threading.Lock()
        self._tail = records.Tail()
        self._reader = storage.HitReader()
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        # called once, at the first call path through TorchScript's interpreter (torchscript.py's probe)
        self.on_interpreter: Callable[[], None] | None = None

    def fill(self, frames: list[Frame]) -> None:
        """Name what gdb left unnamed in these frames, and append the answers as a fill record."""
        entries = self._filler.fill(frames)
        for library, why in list(self._filler.unreadable.items()):
            if library not in self._told:
                self._told.add(library)
                self._warn(f"pttrace's symbol index cannot read {library} ({why}); its frames keep their "
                           "library and offset (`pttrace where 0xOFFSET --lib LIBRARY` once it is readable)")
        self._warn_unnamed(frames)
        hook = self.on_interpreter
        if hook is not None and any(f.kind == "native" and is_interpreter_loop(f.function) for f in frames):
            self.on_interpreter = None
            hook()
        if entries:
            try:
                self.writer.fill(entries)
            except PttraceError as exc:  # the session's end reports an unwritable file
                log.debug("fill record not written: %s", exc.message)

    def _warn_unnamed(self, frames: list[Frame]) -> None:
        """Once per library: its frames that neither gdb nor our index could name, and what would name them.
        Here, once per distinct call path (the agent records a hit in ~0.3 ms and never asks)."""
        unnamed: dict[str, list[Frame]] = {}
        for f in frames:
            if f.kind == "native" and not f.function and not f.inlined:
                unnamed.setdefault(f.library or "", []).append(f)
        for library, found in unnamed.items():
            with self._unnamed_lock:  # fill is also called for a stop's frames, on the recorder's thread
                if library in self._unnamed_told or library in self._filler.unreadable:  # that one said why
                    continue
                self._unnamed_told.add(library)
            self._warn(unnamed_warning(library, found))

    def scan(self, emit: bool) -> None:
        """Read the records appended since the last scan: fill each new call path's frames, and with
        ``emit``, turn the records into events."""
        with self._lock:
            try:
                fh = open(self.path, "rb")
            except OSError as exc:
                log.debug("cannot read %s: %s", self.path, exc)
                return
            with fh:
                for raw in self._tail.lines(fh):  # the agent may be half-way through the last line
                    self._scan_line(raw, emit)

    def _scan_line(self, raw: bytes, emit: bool) -> None:
        # Without a UI only frames need a look (to be filled): an interned hit refers to its stack,
        # a schema-1 hit matters if it has a frame recorded by library and offset.
        if not emit and raw.startswith(b'{"type":"hit"') and (b'"site":' in raw or b'"offset"' not in raw):
            return
        try:
            decoded = records.decode(raw)
            rec = self._reader.feed(decoded)
        except (records.BadRecord, KeyError, TypeError, ValueError):
            return
        kind = decoded["type"]
        if kind == records.STACK:  # each distinct path once, filled before its hits are shown
            self.fill(self._reader.records.stacks[int(decoded["id"])][0])
        elif kind == records.HIT and isinstance(rec, Hit):
            if "site" not in decoded:
                self.fill(rec.frames)
                if rec.launched_by is not None:  # a parallel worker's launching thread: its stack too
                    self.fill(rec.launched_by.frames)
            if emit:
                self._emit(HitRecorded(rec))
        elif not isinstance(rec, dict):
            return  # a definition, kept by the reader
        elif emit and kind == records.BREAKPOINT:
            self._emit(BreakpointRecorded(Breakpoint.from_dict(rec)))
        elif emit and kind == records.PROCESS:
            self._emit(ProcessRecorded(dict(rec)))
        elif emit and kind == records.WARNING:
            self._emit(WarningRaised(str(rec.get("message"))))
        elif emit and kind == evals.EVALS:
            try:
                seq, values = evals.read(rec)
            except ValueError:
                return
            self._emit(EvalsRecorded(seq, tuple(values)))
        elif emit and kind == GRAPH:  # a live UI draws TorchScript's graphs as they are read
            try:
                graph = TsGraph.from_dict(rec.get("graph"))
            except TsRecordError:
                return  # the session's reader says so, once the run has ended
            self._emit(GraphRecorded(graph))

    def start(self, emit: bool = True) -> None:
        """Follow the file on a thread, until ``stop()``: for a UI that shows hits as they happen
        (``emit``), or to name frames while the target runs."""
        self._thread = threading.Thread(target=self._follow, args=(emit,), name="session-tail", daemon=True)
        self._thread.start()

    def _follow(self, emit: bool) -> None:
        while True:
            done = self._done.is_set()
            self.scan(emit=emit)
            if done:
                break
            # Woken at once by ``stop``: a plain sleep made every run's end wait for it to run out (25 ms on
            # average: the join was 0.024 s of a sigmoid run's end under cProfile).
            self._done.wait(0.05)

    def stop(self) -> None:
        """After the last record: one more scan by the thread, then it ends."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(2)
