"""CPython's frames in the agent: ``tracer.pyruntime``'s reader over gdb's reads of the target's memory.

No gdb types and no debug information are needed: ``_PyRuntime`` (and ``Py_Version``) are found by
their ELF symbols, which gdb reads from ``.dynsym``/``.symtab`` of the executable or libpython, and
the reader knows each CPython's layout (3.10-3.12 from its table, 3.13+ from the interpreter's own
``_Py_DebugOffsets``). A thread's frames come from its thread state, one group per C-level
``_PyEval_EvalFrameDefault``, innermost first: the stack walk hands the i-th eval frame it meets the
i-th group. What cannot be read, or does not match, is a warning in the session, never a guess.

The stack walk asks ``FRAMES.available()``, ``FRAMES.walk_groups(thread)`` (the groups of a walk, in
order) and ``FRAMES.thread_groups(thread, count)`` (the groups of a reused walk, all or nothing).
"""
from __future__ import annotations

import re

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent import bulk
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.log import LOG
from tracer.gdb.agent.pycode import SourceLines, frame_record
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.state import CACHES, STATE
from tracer.pyruntime import LayoutError, NotRunning, PythonRuntime
from tracer.pyruntime.objects import ThreadNames

_VERSION_IN_NAME = re.compile(r"python3\.(\d+)")
_MAX_THREADS = 4096
_MAX_RECORDS = 1 << 16
_NOT_SHOWN = "Python frames are not shown, native frames are"
_PATIENCE = 20  # hits without a Python thread before saying so


def _memory_reader():
    read = gdb.selected_inferior().read_memory

    def read_bytes(address: int, size: int) -> bytes:
        return bytes(read(address, size))
    return read_bytes


def _symbol_address(name: str) -> int | None:
    """A data symbol's address from gdb's symbols (ELF symbol tables suffice: no debug info needed)."""
    try:
        return int(gdb.parse_and_eval(f"(unsigned long)&{name}"))
    except READ_ERRORS:
        return None


def _minor_version(runtime_address: int) -> int | None:
    """CPython 3's minor version: ``Py_Version`` (3.11+), else the name of the file defining _PyRuntime."""
    version = _symbol_address("Py_Version")
    if version is not None:
        try:
            return (int.from_bytes(bytes(gdb.selected_inferior().read_memory(version, 4)), "little") >> 16) & 0xFF
        except READ_ERRORS:
            pass
    space = gdb.current_progspace()
    path = space.solib_name(runtime_address) or space.filename or ""
    m = _VERSION_IN_NAME.search(path.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def _loader_at_work() -> bool:
    """The dynamic loader has not mapped libc yet (a hit in the first instructions of a program)."""
    try:
        with open(f"/proc/{gdb.selected_inferior().pid}/maps") as fh:
            return not any("/libc.so" in line or "/libc-" in line for line in fh)
    except OSError:
        return False


class CPythonFrames:
    def __init__(self) -> None:
        self.sources = SourceLines()
        self.not_running = 0  # hits at which the runtime had no thread yet
        self.left_over = False  # the last walk met fewer eval frames than the chain has groups (WalkGroups.finish)

    # --- the runtime --------------------------------------------------------------------------------
    def available(self) -> bool:
        """Whether Python frames can be read; said once in the session's warnings when not.
        ``CACHES.runtime``: None until checked after the last change of the target's libraries."""
        if CACHES.runtime is None:
            CACHES.runtime = self._find_runtime()
        return bool(CACHES.runtime)  # None: not readable yet (asked again at the next hit)

    def _find_runtime(self) -> bool | None:
        address = _symbol_address("_PyRuntime")
        if address is None and _loader_at_work():
            return None  # a process held at its exec: its libraries are not there yet, asked again later
        if address is None:
            OUT.warn("the target has no _PyRuntime symbol (not CPython 3.10+, or its symbol tables were "
                     f"stripped): {_NOT_SHOWN}")
            return False
        runtime = CACHES.py_runtime
        if runtime is not None and runtime.address == address:
            return True
        try:
            runtime = PythonRuntime(_memory_reader(), address, _minor_version(address), READ_ERRORS)
        except NotRunning as exc:
            self.not_running += 1
            if self.not_running == _PATIENCE:
                OUT.warn(f"the CPython runtime still had no thread after {_PATIENCE} hits (a process "
                         f"that runs no Python yet, or an interpreter pttrace misreads): {_NOT_SHOWN}")
            LOG.info("Python frames not readable yet: %s", exc)
            return None  # the interpreter is still starting: asked again at the next hit
        except LayoutError as exc:
            OUT.warn(f"{exc}: {_NOT_SHOWN}")
            return False
        CACHES.py_runtime = runtime
        CACHES.py_frames.clear()
        CACHES.py_names_reader = None
        CACHES.forget_thread_names()
        LOG.info("CPython 3.%d runtime at %#x", runtime.layout.minor, address)
        return True

    # --- threads ------------------------------------------------------------------------------------
    def _tstate(self, thread):
        """The thread state of a gdb thread, just read (one read when its address is cached): matched by
        LWP (3.11+) or pthread handle (3.10)."""
        rt = CACHES.py_runtime
        lwp = thread.ptid[1]
        key = thread.global_num
        cached = CACHES.tstates.get(key)
        if cached is not None:
            state = rt.thread_state(cached)
            if state is not None and self._is(state, thread, lwp):
                return state
        for state in rt.threads():
            if self._is(state, thread, lwp):
                if len(CACHES.tstates) >= _MAX_THREADS:
                    CACHES.tstates.clear()
                CACHES.tstates[key] = state.address
                return state
        return None

    @staticmethod
    def _is(state, thread, lwp: int) -> bool:
        if state.native_id is not None:
            return state.native_id == lwp
        try:
            return state.thread_id == int.from_bytes(thread.handle(), "little")
        except READ_ERRORS:
            return False

    def python_name(self, thread) -> str | None:
        """The thread's ``threading`` name (``Thread(name=...)``), None for a thread ``threading`` does not
        know. Read from ``threading._active`` when a thread is first seen after threads started or ended:
        one read of its thread state per hit otherwise."""
        lwp = thread.ptid[1]
        if lwp in CACHES.py_name_of_lwp:  # looked up since threads last changed (None: not threading's)
            return CACHES.py_name_of_lwp[lwp]
        if not CACHES.py_runtime or not self.available():
            return None
        state = self._tstate(thread)
        if state is None:
            return None
        names = CACHES.py_names
        if state.thread_id in names:
            name = CACHES.py_name_of_lwp[lwp] = names[state.thread_id]
            return name
        reader = CACHES.py_names_reader
        if reader is None:
            try:
                reader = ThreadNames(CACHES.py_runtime)
            except LayoutError as exc:
                OUT.warn(f"{exc}: threads are shown by their OS names only")
                reader = False
            CACHES.py_names_reader = reader
        if reader is False:
            return None
        if len(names) >= _MAX_THREADS:
            names.clear()
        names.update(reader.names())
        name = CACHES.py_name_of_lwp[lwp] = names.setdefault(state.thread_id, None)
        return name

    def dataloader_worker(self) -> tuple[int, int] | None:
        """(worker id, number of workers) when the stopped process is a DataLoader worker."""
        if not self.available() or not CACHES.py_runtime:
            return None
        reader = CACHES.py_names_reader
        if reader is None:
            try:
                reader = CACHES.py_names_reader = ThreadNames(CACHES.py_runtime)
            except LayoutError:
                reader = CACHES.py_names_reader = False
        return reader.dataloader_worker() if reader else None

    def _chain(self, thread):
        state = self._tstate(thread)
        if state is None:
            return None
        return CACHES.py_runtime.frames(state, STATE.max_depth)

    def _record(self, frame):
        records = CACHES.py_frames
        rec = records.get(frame)
        if rec is None:
            if len(records) >= _MAX_RECORDS:
                records.clear()
            rec = records[frame] = frame_record(frame, self.sources)
        return rec

    def _groups(self, chain) -> list[list]:
        return [[self._record(f) for f in g] for g in chain.groups]

    # --- what the stack walk asks -------------------------------------------------------------------
    def walk_groups(self, thread) -> "WalkGroups":
        return WalkGroups(self, thread)

    def thread_groups(self, thread, count: int) -> list | None:
        """The Python frames of the ``count`` eval frames of a reused walk, innermost first; None unless
        the thread's chain was read whole and has exactly that many groups (then gdb walks the hit).

        The groups of the last hit of this thread are handed out again when every byte read for them (its
        thread state, each ``_PyInterpreterFrame``) is unchanged, checked with one ``process_vm_readv``
        (bulk.py): the same frames at the same instructions."""
        key = (thread.global_num, count)
        inferior = gdb.selected_inferior()
        kept = CACHES.py_groups.get(key)
        if kept is not None and kept[0].unchanged(inferior):
            return kept[1]
        runtime = CACHES.py_runtime
        recorder = bulk.Recorder(runtime.read)
        runtime.read = recorder  # every read of the chain (and of a code object not seen before) is kept
        try:
            chain = self._chain(thread)
        finally:
            runtime.read = recorder.reader
        if chain is None or not chain.complete or len(chain.groups) != count:
            return None
        groups = self._groups(chain)
        regions = recorder.regions_read()
        if regions is not None:
            if len(CACHES.py_groups) >= _MAX_THREADS:
                CACHES.py_groups.clear()
            CACHES.py_groups[key] = (regions, groups)
        return groups


class WalkGroups:
    """The groups of one walk, read at the first eval frame met, handed out in order."""

    def __init__(self, frames: CPythonFrames, thread) -> None:
        self.frames = frames
        self.thread = thread
        self.groups: list | None = None
        self.used = 0
        self.chain = None

    def next(self) -> list | None:
        if self.groups is None:
            self.chain = self.frames._chain(self.thread)
            if self.chain is None:
                OUT.warn("a thread's Python state was not found (a thread not started by Python, or one "
                         "still starting): its eval frames are shown as native frames")
                self.groups = []
            else:
                self.groups = self.frames._groups(self.chain)
                if self.chain.error:
                    OUT.warn(f"a Python frame chain could not be read whole ({self.chain.error.split(' at ')[0]}): "
                             "those hits show the Python frames read before it")
        if self.used >= len(self.groups):
            if self.chain is not None and self.chain.complete:
                OUT.warn("a hit had more C eval frames than Python frame groups: the extra eval frames are "
                         "shown as native frames")
            return None
        group = self.groups[self.used]
        self.used += 1
        return group

    def finish(self) -> None:
        """After a whole walk: Python frames left over mean the walk and the chain disagreed. Said only
        if the hit is written (``left_over``, read by hits.record_hit): a walk through a library whose
        symbols gdb has not read yet can end early, and that hit is recorded again once they are read
        (measured: an asyncio coroutine's generator hit, 2 of 3 groups met on the first walk, 3 of 3 on
        the second, yet warned)."""
        if self.groups and self.used < len(self.groups):
            self.frames.left_over = True


FRAMES = CPythonFrames()
