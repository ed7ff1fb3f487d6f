"""The end of a recording: the status the session ends with, the key table that must come before
the end record, and the names suggested for breakpoints that never resolved."""
from __future__ import annotations

import concurrent.futures
import logging
import threading
from pathlib import Path

from tracer.session import storage
from tracer.errors import PttraceError

log = logging.getLogger("pttrace.recorder")

# Why a run was cut short by the user (or the clock): a target that exited meanwhile is still "interrupted".
CUT_SHORT = ("timeout", "interrupted", "sigint", "sigterm", "sighup", "quit")


# How a run or attach ended, as pttrace's exit code (README: "Exit codes").
EXIT_GDB_LOST = 3
LOST_EVENT = "gdb lost an event"  # recorder/watchdog.py: a stop gdb never reported ended the run
SIGNAL_EXIT = {"sighup": 129, "sigint": 130, "sigterm": 143}


def exit_code(end_reason: str | None, gdb_lost: bool) -> int:
    """0 when the recording ended as asked (the target's end, --max-hits, --timeout, quit), 128+N when
    pttrace was ended by signal N, 3 when gdb died, was killed, stopped answering or lost an event pttrace
    could not take the run past (hits after it were not recorded: the run did not end as asked)."""
    if end_reason in SIGNAL_EXIT:
        return SIGNAL_EXIT[end_reason]
    return EXIT_GDB_LOST if gdb_lost or end_reason == LOST_EVENT else 0


def final_status(status: str, end_reason: str | None, attached: bool) -> str:
    """The session's status from what the run loop saw (``status`` is "running" if nothing ended it)."""
    if status == "running":
        if attached and end_reason != "exited":
            status = "detached"
        else:
            status = "completed" if end_reason in ("max-hits", "exited") else "interrupted"
    if end_reason in CUT_SHORT and status == "completed":
        status = "interrupted"
    return status


class KeyTable:
    """The target torch's DispatchKeySet numbering, written into the session once: at once if known,
    as soon as it is computed otherwise, and before the end record at the latest."""

    def __init__(self, writer: storage.SessionWriter, table: dict | None, later):
        self._writer = writer
        self._later = later
        self._lock = threading.Lock()
        self._done = False
        if table:
            self._write(table)
        elif later is not None:
            later.add_done_callback(self._arrived)

    def _write(self, table: dict | None) -> None:
        with self._lock:
            if self._done or not table:
                return
            self._done = True
            try:
                self._writer.dispatch_keys(table)
            except PttraceError as exc:  # the end record reports an unwritable file
                log.debug("key table not written: %s", exc.message)

    def _arrived(self, fut: concurrent.futures.Future) -> None:
        if not fut.cancelled() and fut.exception() is None:
            self._write(fut.result())

    def settle(self) -> None:
        """Before the end record: a run shorter than torch's import waits for the rest of it."""
        if self._later is not None:
            try:
                self._write(self._later.result(timeout=60))
            except concurrent.futures.TimeoutError:
                log.debug("the key table did not come within 60 s")
            except concurrent.futures.CancelledError:
                pass
        with self._lock:
            self._done = True  # nothing after the end record


def write_op_tables(writer: storage.SessionWriter, later) -> None:
    """The ``--op`` operators' dispatch tables (``commands.ops._op_tables``), once they came (60 s at most)."""
    if later is None:
        return
    try:
        try:
            tables = later.result(timeout=60)
        except Exception as exc:  # a timeout, or the target's torch could not say
            writer.warning(f"the operators' dispatch tables could not be read from the target's torch ({exc}): the "
                           "decision at each hop does not say which key falls through or which kernel it selects")
            return
        if tables:
            writer.write({"type": "dispatch_tables", "tables": tables})
            from tracer.dispatch.dispatch_tables import hand_registered_warning

            hand = hand_registered_warning(tables)
            if hand:
                writer.warning(hand)
    except PttraceError as exc:  # the end record reports an unwritable file
        log.debug("dispatch tables not written: %s", exc.message)


def write_suggestions(session_path: Path, writer: storage.SessionWriter, torch_libs: list[str]) -> None:
    """For breakpoints that never resolved: say so in the session, with close names."""
    from tracer.symbols import suggest

    session = storage.load(session_path, hits=False)
    for bp in session.breakpoints:
        if any(loc.address for loc in bp.locations):
            continue
        try:
            bp.suggestions = suggest(bp.spec, torch_libs, limit=5) if torch_libs else []
        except (PttraceError, OSError) as exc:
            log.debug("no suggestions for %s: %s", bp.spec, exc)
            bp.suggestions = []
        bp.error = "never resolved: no loaded library defines a function of that name"
        writer.breakpoint(bp)
