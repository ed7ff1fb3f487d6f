"""What the agent holds between hits: its settings and counters (``STATE``) and its caches (``CACHES``).

One instance of each per gdb: gdb runs one agent. ``CACHES`` holds the caches of the process the last
hit was in; processes.py swaps in another process's (its ``__dict__``) when a hit comes from it.
"""
from __future__ import annotations

from typing import Any

from tracer.gdb.agent.reuse import Walk


class State:
    """The settings ``pttrace-setup`` gave and what the run has done so far."""

    def __init__(self) -> None:
        self.mode = "record"  # "record": record and continue; "stop": stop at the next hit
        self.max_hits = 0  # 0: no limit
        self.evals: list[str] = []  # --eval: gdb expressions evaluated at every recorded hit
        self.max_depth = 256  # frames kept per hit, innermost first
        self.arguments = True  # read each hit's arguments at its entry ($PTTRACE_NO_ARGS=1: off, for benchmarks)
        self.layers: set[str] = set()  # --layer: record only hits whose innermost frame is in one of these
        self.hits = 0  # the last hit's seq
        self.need_libs: list[str] = []  # libraries without symbols that the last stack passed through
        self.asked_libs: set[str] = set()  # every library asked for since the last hit was recorded
        self.pending_unstash = False  # the deferred hit's stashed template hops are recorded with it
        self.pending_spec: str | None = None  # the breakpoint whose hit waits to be recorded again after loading them
        self.pending_keyset: tuple = (None, None)  # its key set (or why not), read at the stop
        self.pending_values: dict | None = None  # what its frame carried, read at the stop (arguments.py)
        self.pending_skip = 0  # frames above the one it is recorded from (--follow's trigger: 1)
        self.pending_launcher = False  # it is a parallel worker's: its launching thread is read first
        self.pending_bp: Any = None  # a hit in a child whose symbols were not set up yet: stopped again after
        # The thread that stopped at the waiting hit (pending_bp or pending_spec): pttrace-rerecord reads it
        # there, whatever gdb has selected meanwhile (an ended process's inferior, whose hit had no pid).
        self.pending_thread: Any = None
        self.exec_request: dict | None = None  # a followed process about to exec: {inferior, pid, argv}
        self.stop_requested = False  # what the last hit decided, for pttrace-status
        self.write_error: str | None = None  # the session file cannot be written (disk full, directory gone)
        # library -> (its CFI-only copy, load base): gdb unwinds it, pttrace names its frames.
        self.cfi_libs: dict[str, tuple[str, int]] = {}

    def wants_stop(self) -> bool:
        if self.max_hits and self.hits >= self.max_hits:
            return True
        return self.mode == "stop"


class Caches:
    """Every cache of the agent that depends on the target, and when each is forgotten (``invalidate``).

    A hot breakpoint stops on the same stack again and again: its native frames are described once per
    pc, its Python frames once per instruction, and its whole walk is reused while the stack holds it
    (``reuse.py``). What depends on files only (source lines, demangled names) is kept by the modules that read it and never goes stale in a run.
    """

    def __init__(self) -> None:
        self.native: dict[tuple[int, int, bool], Any] = {}  # (pc, inline index, exact pc) -> CachedFrame
        self.lib_bases: dict[str, int | None] = {}  # library -> its load base (file offset 0), or None
        self.exe_ranges: list[tuple[int, int]] | None = None  # where the executable is mapped; None: not read
        # library -> whether gdb has read its symbols: asked for each unnamed frame of every hit (a
        # stripped executable's frames are unnamed: 4 a hit, each a walk over gdb's objfiles, ~15% of a hit)
        self.symbols_loaded: dict[str, bool] = {}
        # The frames older than the outermost PyEval_EvalCode (run_mod, Py_RunMain, main, _start...):
        # (thread, pc, sp of that frame) -> (frames, return-address slots).
        self.suffix: dict[tuple[int, int, int], tuple] = {}
        self.walks: dict[tuple[int, int, int], Walk] = {}  # (thread, innermost pc, sp) -> a reusable walk (reuse.py)
        # pcs a breakpoint stopped at with no DWARF argument to read there (no debug information, or the
        # function's first instruction): keyset.py reads the entry registers without asking gdb for a block.
        self.plain_entry: set[int] = set()
        # (function, its argument registers' words) -> (the memory regions read, the arguments described):
        # entry.py hands a hit the kept description when those regions still hold the same bytes.
        self.arguments: dict[tuple, tuple] = {}
        self.tstates: dict[int, int] = {}  # thread's global number -> the address of its PyThreadState
        # (thread's global number, eval frames) -> (the regions read for its Python frames, their groups):
        # python_frames.py hands a reused walk the kept groups while those regions hold the same bytes.
        self.py_groups: dict[tuple[int, int], tuple] = {}
        self.runtime: bool | None = None  # Python frames readable; None: not checked since the last change
        # The target's CPython runtime (tracer.pyruntime.PythonRuntime, with its code objects read so far)
        # and the record of each Python frame it gave (PyFrame -> CachedFrame): kept while the target runs.
        self.py_runtime: Any = None
        self.py_frames: dict[Any, Any] = {}
        # threading's thread names: the reader (tracer.pyruntime.objects.ThreadNames; False: this version's
        # are not read) and pthread ident -> name (None: not one of threading's threads when last read).
        # Forgotten when a thread starts or ends (names are given before start(), rarely changed).
        self.py_names_reader: Any = None
        self.py_names: dict[int, str | None] = {}
        # The same answers by LWP, so that a hit of a thread already named costs one dict look-up and
        # no read of its thread state (the hot path measured it: ~0.1 ms a hit).
        self.py_name_of_lwp: dict[int, str | None] = {}
        # The dynamic loader's entry code (start, end, file) in this process, () when there is none to know;
        # None: not read since gdb's objfiles changed (loader_entry.py).
        self.loader_entry: tuple | None = None

    def invalidate(self, target_exited: bool = False) -> None:
        """New or dropped symbols can rename any frame: forget every frame. When the target exited, its
        code objects go too (the next run's are not these)."""
        self.native.clear()
        self.lib_bases.clear()
        self.exe_ranges = None
        self.symbols_loaded.clear()
        self.suffix.clear()
        self.walks.clear()
        self.plain_entry.clear()
        self.arguments.clear()
        self.tstates.clear()
        self.py_groups.clear()
        self.runtime = None
        self.loader_entry = None
        self.forget_thread_names()
        if target_exited:
            self.py_runtime = None
            self.py_frames.clear()
            self.py_names_reader = None

    def forget_thread_names(self) -> None:
        """A thread started or ended (or the runtime changed): read threading's names again."""
        self.py_names.clear()
        self.py_name_of_lwp.clear()

    def forget_library_frames(self, libraries: list[str]) -> None:
        """These libraries' symbols are about to be read: their frames, and every walk, change names."""
        for key in [k for k, v in self.native.items() if v.get("library") in libraries]:
            del self.native[key]
        self.suffix.clear()
        self.walks.clear()
        self.plain_entry.clear()


STATE = State()
CACHES = Caches()
