"""gdb's symbol tables of the interpreter's call machinery, read while the target runs instead of at its first hit.

gdb expands a compilation unit's full symbol table the first time a frame's pc falls in it (to find the
functions inlined there, the name, file:line), and the stack of every hit in a Python program passes through
the same few units of libpython: the eval loop, the call protocol, builtins, instances called, the script's
start. At the first hit of ``wrapper_CPU_sigmoid`` under hello-world.py that was ~80 ms of the hit's ~0.1 s
``stop()`` (quiet machine; ``gdb.block_for_pc`` at the hit's own pcs beforehand took the same 80 ms and left the
walk ~1 ms): ceval.c 20 ms, typeobject.c 28-34 ms, call.c, pythonrun.c, methodobject.c, classobject.c, main.c
3-9 ms each, libc's start-up 1-2 ms.

gdb is idle while the target runs (MI runs it asynchronously) and loads no library, so once such a library has
symbols the agent has gdb read those units at such a time: a thread of its own waits until the target has
loaded no library for ``QUIET`` seconds (in hello-world.py, after ``import torch``: ~0.9 s before the hit), then
hands gdb's thread one unit at a time (``gdb.post_event``). A load or a hit meanwhile waits at most for the unit
being read; a target stopped (pttrace at work on a library stop, a user at the prompt) gets no such work until it
runs again; a hit before them reads what it needs itself, as before. What is recorded does not change: gdb reads
the same tables, earlier.
"""
from __future__ import annotations

import os
import threading
import time

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.log import LOG

# Library (file-name prefix) -> one function of each unit a Python program's stacks pass through; a name the
# library does not define (another CPython) is skipped. Each unit is read once per library loaded.
UNITS: dict[str, tuple[str, ...]] = {
    "libpython": (
        "_PyEval_EvalFrameDefault",  # Python/ceval.c: every Python frame's eval loop
        "_PyObject_MakeTpCall",  # Objects/call.c: the call protocol (and the inline vectorcall helpers)
        "cfunction_call",  # Objects/methodobject.c: a builtin called (torch's bindings)
        "method_vectorcall",  # Objects/classobject.c: a bound method called
        "slot_tp_call",  # Objects/typeobject.c: an instance called (nn.Module.__call__)
        "_PyRun_SimpleFileObject",  # Python/pythonrun.c: the script run (pyrun_file is only inlined there)
        "Py_BytesMain",  # Modules/main.c: the interpreter's main
    ),
    "libc.so": ("__libc_start_call_main",),  # the outermost frames of every main thread
}
INTERPRETER = "libpython"  # an interpreter built without a shared libpython has these units in itself
# How long the target must have run without loading a library before gdb reads a unit. gdb is on the target's
# way at each load (its library-stop condition runs there), and a unit takes it 3-35 ms: read during
# ``import torch``'s ~80 loads they delayed the target as much as they spared its first hit (alternating runs).
QUIET = 0.2


class Prefetch:
    """The units still to read (objfile, function name), read one at a time once the target has run for
    ``QUIET`` seconds without loading a library."""

    def __init__(self) -> None:
        self.pending: list[tuple[object, str]] = []
        self.read_units = 0  # units read so far (tests)
        self._last_load = time.monotonic()
        self._lock = threading.Lock()
        self._waiter: threading.Thread | None = None
        self._turn = threading.Event()  # set by _step in gdb's thread: the waiter may go on
        self._took = False  # whether the last _step read a unit

    def start(self) -> None:
        """Follow the libraries gdb gets symbols of from now on, and take those it has already."""
        gdb.events.new_objfile.connect(self._on_new_objfile)
        for objfile in gdb.objfiles():
            self._add(objfile)

    def library_loaded(self) -> None:
        """The target loaded a library (the library stops' condition, at each load): it may need gdb again soon."""
        self._last_load = time.monotonic()

    def _on_new_objfile(self, event) -> None:
        self.library_loaded()
        self._add(event.new_objfile)

    def _add(self, objfile) -> None:
        base = os.path.basename(objfile.filename or "")
        for prefix, names in UNITS.items():
            if base.startswith(prefix):
                self.pending += [(objfile, name) for name in names]
        if base.startswith("python") and objfile.filename == objfile.progspace.filename:
            self.pending += [(objfile, name) for name in UNITS[INTERPRETER]]
        with self._lock:
            if self.pending and self._waiter is None:
                self._waiter = threading.Thread(target=self._wait_for_quiet, name="pttrace-prefetch", daemon=True)
                _start_without_signals(self._waiter)

    def _wait_for_quiet(self) -> None:
        """A thread of its own: wait until the target has loaded no library for ``QUIET`` s, then have gdb's
        thread read one unit (``_step``), and again until none is left."""
        while True:
            with self._lock:
                if not self.pending:
                    self._waiter = None
                    return
            idle = time.monotonic() - self._last_load
            if idle < QUIET:
                time.sleep(QUIET - idle)
                continue
            self._turn.clear()
            gdb.post_event(self._step)
            self._turn.wait()
            if not self._took:
                time.sleep(QUIET)  # the target is stopped (a library stop, a prompt): look again later

    def _step(self) -> None:
        """In gdb's thread: one unit read, if the target still runs and has loaded no library meanwhile."""
        self._took = False
        try:
            if self.pending and _running() and time.monotonic() - self._last_load >= QUIET:
                self._took = True
                self._read(*self.pending.pop(0))
        finally:
            self._turn.set()

    def _read(self, objfile, name: str) -> None:
        """gdb's lookup of the name in that library expands the unit defining it, as a frame there would."""
        began = time.perf_counter()
        found = None
        try:
            if objfile.is_valid():
                found = objfile.lookup_global_symbol(name) or objfile.lookup_static_symbol(name)
        except READ_ERRORS as exc:
            LOG.debug("prefetch of %s's unit: %s", name, exc)
        library = os.path.basename(objfile.filename or "?")
        if found is None:
            LOG.debug("no unit of %s in %s to prefetch", name, library)
            return
        self.read_units += 1
        LOG.debug("prefetched the unit of %s in %s: %.1f ms", name, library, (time.perf_counter() - began) * 1000)


def _start_without_signals(thread: threading.Thread) -> None:
    """``thread`` started with every signal blocked (a thread inherits its creator's mask). gdb 13 does not block
    them in threads Python starts, and its native target waits for the SIGCHLD of the target's events in its own
    thread: one delivered to this thread instead left gdb waiting for ever (twice in the suite's first seconds,
    two runs starting at once under load: "gdb did not answer `-exec-run` within 30 s")."""
    import signal

    old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _running() -> bool:
    thread = gdb.selected_thread()
    try:
        return thread is not None and thread.is_running()
    except READ_ERRORS:
        return False


PREFETCH = Prefetch()
