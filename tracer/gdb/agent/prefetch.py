"""gdb's symbol tables of the interpreter's call machinery, read while the target runs instead of at its first hit.

gdb expands a compilation unit's full symbol table the first time a frame's pc falls in it (to find the
functions inlined there, the name, file:line), and the stack of every hit in a Python program passes through
the same few units of libpython: the eval loop, the call protocol, builtins, instances called, the script's
start. At the first hit of ``wrapper_CPU_sigmoid`` under hello-world.py that was ~80 ms of the hit's ~0.1 s
``stop()`` (quiet machine; ``gdb.block_for_pc`` at the hit's own pcs beforehand took the same 80 ms and left the
walk ~1 ms): ceval.c 20 ms, typeobject.c 28-34 ms, call.c, pythonrun.c, methodobject.c, classobject.c, main.c
3-9 ms each, libc's start-up 1-2 ms.

gdb is idle while the target runs (MI runs it asynchronously), so once such a library has symbols the agent
has gdb read those units then: one unit a turn of gdb's event loop (``gdb.post_event``), and only while the
target runs. A library stop or a hit waits at most for the unit being read, and the hit finds the units read;
a target stopped (pttrace at work on a library stop, a user at the prompt) gets no such work until it runs
again. What is recorded does not change: gdb reads the same tables, earlier.
"""
from __future__ import annotations

import os
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
        "pyrun_file",  # Python/pythonrun.c: the script run
        "Py_BytesMain",  # Modules/main.c: the interpreter's main
    ),
    "libc.so": ("__libc_start_call_main",),  # the outermost frames of every main thread
}
INTERPRETER = "libpython"  # an interpreter built without a shared libpython has these units in itself


class Prefetch:
    """The units still to read (objfile, function name), read one at a time while the target runs."""

    def __init__(self) -> None:
        self.pending: list[tuple[object, str]] = []
        self._listening = False  # to gdb's ``cont`` events: only while units are pending (none at a hot hit)
        self._posted = False
        self.read_units = 0  # units read so far (tests)

    def start(self) -> None:
        """Follow the libraries gdb gets symbols of from now on, and take those it has already."""
        gdb.events.new_objfile.connect(self._on_new_objfile)
        for objfile in gdb.objfiles():
            self._add(objfile)

    def _on_new_objfile(self, event) -> None:
        self._add(event.new_objfile)

    def _add(self, objfile) -> None:
        base = os.path.basename(objfile.filename or "")
        for prefix, names in UNITS.items():
            if base.startswith(prefix):
                self.pending += [(objfile, name) for name in names]
        if base.startswith("python") and objfile.filename == objfile.progspace.filename:
            self.pending += [(objfile, name) for name in UNITS[INTERPRETER]]
        if self.pending and not self._listening:
            gdb.events.cont.connect(self._on_cont)
            self._listening = True

    def _on_cont(self, _event) -> None:
        if not self._posted:
            self._posted = True
            gdb.post_event(self._step)

    def _step(self) -> None:
        """Read one unit if the target still runs, and come back for the next at the next turn."""
        self._posted = False
        thread = gdb.selected_thread()
        try:
            running = thread is not None and thread.is_running()
        except READ_ERRORS:
            running = False
        if not running or not self.pending:
            self._stop_listening()
            return
        objfile, name = self.pending.pop(0)
        self._read(objfile, name)
        if self.pending:
            self._posted = True
            gdb.post_event(self._step)
        else:
            self._stop_listening()

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

    def _stop_listening(self) -> None:
        """Until the target runs again (or, with nothing pending, until a library brings more)."""
        if not self.pending and self._listening:
            gdb.events.cont.disconnect(self._on_cont)
            self._listening = False


PREFETCH = Prefetch()
