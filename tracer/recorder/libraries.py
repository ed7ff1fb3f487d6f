"""Which libraries gdb reads the symbols of, and which it gets as unwind tables only (the CFI path).

gdb reading libtorch_cpu.so's symbols costs ~4 s (DESIGN.md section 2), so it reads only those of the
libraries a breakpoint needs. With ``auto-solib-add off`` gdb stops at the library loads this policy must
decide (library_stops.py: the others are decided at the next stop); a recorded stack that passes through a skipped library makes the agent ask for it, and the hit
is recorded again. On the CFI path a heavy library that only address breakpoints need (or none) is
given to gdb as a copy holding its unwind tables alone: frames unwind, and our index names them.

The libraries of a process are those of its children until they exec, so one policy serves every
inferior of a recording.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Callable

from tracer.gdb.mi import MiConnection
from tracer.recorder import resolve
from tracer.recorder.agent_link import AgentError, AgentLink
from tracer.recorder.stack_libraries import StackLibraries
from tracer.settings import Settings
from tracer.text.escape import gdb_regex_literal

if TYPE_CHECKING:
    from tracer.gdb.agent.libstops import NameScans

log = logging.getLogger("pttrace.recorder")
# Libraries gdb reads at once even when others wait for a stack (see LibraryPolicy.lazy): nearly every
# stack passes through them, and gdb's thread support reads libc anyway.
READ_AT_ONCE = ("libpython", "libc.so", "ld-linux", "ld64.so", "libc10.so")  # libc10: the TLS key sets


# gdb reads these libraries' symbols as they load whatever pttrace asks (its thread library, gdb 11+).
GDB_READS = ("libpthread", "libc.so")


def keep_decompressed(paths: list[str]) -> None:
    """The debug files of libraries gdb reads, decompressed once for the runs after (symbols/plain_debug.py)."""
    if paths:
        from tracer.symbols.plain_debug import keep_decompressed_later

        keep_decompressed_later(paths)


class LibraryPolicy:
    def __init__(self, mi: MiConnection, agent: AgentLink, settings: Settings, torch_libs: list[str],
                 warn: Callable[[str], None]):
        self.mi = mi
        self.agent = agent
        self.settings = settings
        self.torch_libs = torch_libs
        self._warn = warn
        self.deferring = False  # gdb stops at each library load and we decide (auto-solib-add off)
        self.cfi = False  # the CFI path is on for this run
        self.needed: set[str] | None = None  # basenames of heavy libraries gdb must read; None: all
        self.heavy: set[str] = set()
        self.gdb_specs: list[str] = []  # breakpoints gdb resolves by name
        self.address_breakpoints: list[dict] = []
        self.loaded: set[str] = set()
        self.skipped: set[str] = set()  # libraries loaded without their symbols
        # Small libraries gdb reads only when a recorded stack passes through them (the agent asks:
        # need_libs): most of a torch program's ~60 (extension modules, libcrypto, libstdc++...) never are.
        self.lazy = False
        self.waiting: set[str] = set()
        # Those the same command's last runs needed (stack_libraries.py): read as they load, not at the hit.
        self.remembered: StackLibraries | None = None
        self._break_libs: set[str] | None = None  # the libraries of address_breakpoints, resolved
        self.cfi_libs: set[str] = set()  # libraries gdb has as unwind tables now
        self._new: list[str] = []
        self._copies: dict[str, str | None] = {}  # library -> its CFI-only copy (None: cannot be had)
        self._copies_lock = threading.Lock()
        self._needles: dict[str, list[list[bytes]] | None] = {}  # spec -> its strings for libstops.may_name
        self._scans: NameScans | None = None  # what earlier runs read of each library, read when first needed
        # Called when what must be decided at a library's load changes (library_stops.py keeps gdb's
        # rules in step); set once gdb's catchpoint for library loads exists.
        self.rules_changed: Callable[[], None] | None = None

    def _changed(self) -> None:
        if self.rules_changed is not None:
            self.rules_changed()

    # --- the plan, before the target runs -------------------------------------------------------
    def plan(self, gdb_specs: list[str], address_breakpoints: list[dict]) -> None:
        """Decide what gdb reads, and tell gdb to stop at library loads if we decide there."""
        self.gdb_specs = list(gdb_specs)
        self.address_breakpoints = list(address_breakpoints)
        self._break_libs = None
        if self.settings.all_symbols:
            return
        self.cfi = self.settings.use_cfi
        heavy = resolve.heavy(self.torch_libs)
        self.heavy = {os.path.basename(lib) for lib in heavy}
        try:
            self.needed = resolve.libraries_for_breakpoints(gdb_specs, heavy, address_breakpoints,
                                                            with_addresses=not self.cfi)
        except resolve.IndexFailure as exc:
            self._warn(f"pttrace's symbol index could not tell which libraries the breakpoints are in ({exc}); "
                       "gdb reads the symbols of every library, which costs seconds")
            self.needed = None
        if self.needed is None:
            self.cfi = False
        if self.cfi:
            self._prepare_copies()
        forced = self.cfi and bool(self.settings.cfi_libs)
        if self.needed is not None and (forced or not self.heavy <= self.needed):
            self.mi.command("-gdb-set auto-solib-add off")  # gdb stops at the loads library_stops.py names
            self.deferring = True
            self.lazy = True
        else:
            # Every big library is needed (or which are is unknown): gdb reads each library's
            # symbols as it loads, as plain gdb does, without a stop and a round trip per library.
            self.needed = None

    # --- library loads --------------------------------------------------------------------------
    def library_loaded(self, path: str) -> None:
        """``=library-loaded`` without symbols: decided at the next solib stop (or now, after attach)."""
        self._new.append(path)

    def decide_new(self) -> None:
        new, self._new = self._new, []
        keep_decompressed([p for p in new if os.path.basename(p).startswith(GDB_READS)])
        wanted = [p for p in new if self.wants_symbols(p)]
        self.skipped.update(p for p in new if p not in wanted)
        self.load_symbols(wanted)
        if self.cfi:
            for path in new:
                if path not in wanted and path not in self.waiting:
                    self._load_cfi(path)

    def wants_symbols(self, path: str) -> bool:
        if self.needed is None:
            return True
        base = os.path.basename(path)
        if base in self.needed:
            return True
        try:
            skippable = resolve.is_heavy(path) or (self.cfi and self._forced_cfi(path))
        except OSError:
            return True
        if not skippable:
            return not self.lazy or self._read_now(path)
        if base not in self.heavy and any(self._may_define(spec, path) for spec in self.gdb_specs):
            # A library of the user's own (or one --cfi-lib names) that defines a breakpoint gdb
            # resolves by name. Only our index can tell before gdb reads it. On the CFI path our index
            # sets those breakpoints by address instead, and gdb never reads the library's DWARF
            # (a debug build's: gigabytes, most of gdb's time); else gdb needs its symbols.
            if self.cfi and self._break_by_index(path):
                return False
            self.needed.add(base)
            self._changed()
            return True
        return False

    def _read_now(self, path: str) -> bool:
        """Whether gdb reads a small library's symbols as it loads: one almost every stack passes through
        (the interpreter, libc, the dynamic linker), or one a breakpoint gdb resolves by name may be in.
        The others wait in ``waiting`` until a recorded stack passes through them."""
        base = os.path.basename(path)
        if base.startswith(READ_AT_ONCE) or os.path.realpath(path) in self._break_libraries():
            return True  # a breakpoint's key set may be read with the library's DWARF (agent/keyset.py)
        if any(self._may_define(spec, path) for spec in self.gdb_specs):
            return True
        if self.remembered is not None and self.remembered.knows(path):
            log.debug("a stack of this command's last run passed through %s", path)
            return True
        self.waiting.add(path)
        return False

    def _may_define(self, spec: str, path: str) -> bool:
        """resolve.may_define after the test gdb's library stops make first (libstops.may_name, its answers
        kept across runs in library-scans.json): a library without the strings our index needs to find
        ``spec`` does not define it. Asking our index opened each of a re-run's ~60 libraries (~0.1 s of
        pttrace's CPU under cProfile at load 12); now it is one ``stat`` for most of them."""
        if spec not in self._needles:
            found = resolve.name_needles(spec)
            self._needles[spec] = [[n.encode("utf-8", "surrogateescape") for n in found]] if found else None
        groups = self._needles[spec]
        if groups is not None:
            from tracer.gdb.agent.libstops import NameScans, may_name
            from tracer.recorder.later_libraries import scans_file

            if self._scans is None:
                self._scans = NameScans(scans_file())
            if not may_name(path, groups, self.settings.debug_dirs, self._scans):
                return False
        return resolve.may_define(spec, path)

    def break_libraries(self) -> set[str]:
        """The real paths of the libraries of the breakpoints set by address (stubs' aside)."""
        return self._break_libraries()

    def _break_libraries(self) -> set[str]:
        if self._break_libs is None:
            self._break_libs = {os.path.realpath(b["library"]) for b in self.address_breakpoints if not b.get("plt")}
        return self._break_libs

    def breakpoints_added(self, items: list[dict]) -> None:
        """Address breakpoints set in libraries loaded later: a small one waiting gets its symbols now."""
        self.address_breakpoints += items
        self._break_libs = None
        libraries = {os.path.realpath(i["library"]) for i in items if not i.get("plt")}
        self.load_symbols([p for p in sorted(self.waiting) if os.path.realpath(p) in libraries])
        self._changed()

    def load_for_stack(self, paths) -> None:
        """The libraries a recorded stack passes through without symbols (the agent's need_libs), read in
        the process it stopped in, even when another process of the recording has them already."""
        if self.remembered is not None:
            self.remembered.add(paths)
        for path in paths:
            self.loaded.add(path)
            self.skipped.discard(path)
            self.waiting.discard(path)
            log.debug("gdb reads the symbols of %s (a stack passes through it)", path)
            self.load_symbols_here(path)

    def load_waiting(self) -> None:
        """Every library still waiting, and from now on each as it loads: what gdb shows of a stack it
        unwinds without pttrace's agent (a crash's, stepping, an interrupted target's) must be whole."""
        self.decide_new()  # loads gdb did not stop for are decided first
        self.lazy = False
        waiting, self.waiting = sorted(self.waiting), set()
        self.load_symbols(waiting)
        self._changed()

    def _break_by_index(self, path: str) -> bool:
        """Set the by-name breakpoints this library defines by address, from our index: True if every
        one of them could be (then gdb gets the library as unwind tables only)."""
        items: list[dict] = []
        try:
            for spec in self.gdb_specs:
                if not resolve.may_define(spec, path):
                    continue
                if not resolve.index_resolvable(spec.strip()):
                    return False  # FILE:LINE and the like: gdb's to resolve, with the library's DWARF
                items += resolve.breakpoints_in(spec.strip(), path)
        except resolve.IndexFailure as exc:
            self._warn(f"pttrace's symbol index could not read {os.path.basename(path)} ({exc}); "
                       "gdb reads its symbols")
            return False
        if not items:
            return False
        try:
            self.agent.break_address(items)
        except AgentError as exc:
            self._warn(f"{exc.message}; gdb reads the symbols of {os.path.basename(path)} instead")
            return False
        labels = sorted({i["label"] for i in items})
        self._warn(f"{os.path.basename(path)}: --break {', '.join(labels)} set where pttrace's index finds "
                   f"{'it' if len(labels) == 1 else 'them'} ({len(items)} location(s)), so gdb does not read its "
                   f"{os.path.getsize(path) / 2**20:,.0f} MB of symbols and DWARF; copies inlined into other "
                   "functions are not broken on (--all-symbols lets gdb find them)")
        return True

    def load_symbols(self, paths) -> None:
        read = False
        at_once: list[str] = []
        for path in paths:
            if path in self.loaded:
                continue
            self.loaded.add(path)
            self.skipped.discard(path)
            self.waiting.discard(path)
            log.debug("gdb reads the symbols of %s", path)
            self.mi.console(f"sharedlibrary {gdb_regex_literal(path)}", timeout=300, check=False)
            read = True
            at_once.append(path)
        keep_decompressed(at_once)
        if read and self.gdb_specs:
            # A breakpoint gdb resolves by name may have a location in them now, which a fork child gets
            # only through an entry set by address (agent/breakpoints.py, add_child_entries).
            self.agent.child_entries()

    def load_symbols_here(self, path: str) -> None:
        """gdb reads the library's symbols in the selected process's program space (a child's)."""
        self.mi.console(f"sharedlibrary {gdb_regex_literal(path)}", timeout=300, check=False)

    def copy_of(self, path: str) -> str | None:
        return self._copy(path) if self.cfi or path in self.cfi_libs else None

    # --- the CFI path ---------------------------------------------------------------------------
    def _forced_cfi(self, path: str) -> bool:
        return os.path.basename(path) in self.settings.cfi_libs

    def _cfi_candidates(self) -> list[str]:
        return [lib for lib in self.torch_libs if resolve.is_heavy(lib) or self._forced_cfi(lib)]

    def _prepare_copies(self) -> None:
        """Write (or find in the cache) the copies of torch's heavy libraries while the target starts."""
        paths = self._cfi_candidates()
        if paths:
            threading.Thread(target=lambda: [self._copy(p) for p in paths], name="cfi-copies", daemon=True).start()

    def _copy(self, path: str) -> str | None:
        from tracer.symbols.cfi import cfi_copy

        real = os.path.realpath(path)
        with self._copies_lock:
            if real not in self._copies:
                try:
                    self._copies[real] = cfi_copy(real)
                except resolve.IndexFailure as exc:
                    self._copies[real] = None
                    self._warn(f"no unwind-table copy of {os.path.basename(path)} ({exc}); gdb reads its symbols")
            return self._copies[real]

    def _load_cfi(self, path: str) -> bool:
        """Give gdb the library's CFI-only copy; if that fails, its symbols as before (or, when no
        breakpoint is in it, nothing: the agent asks for them if a stack passes through it)."""
        copy = self._copy(path)
        if copy is not None:
            refused = self.agent.cfi_add(path, copy)
            if refused is None:
                self.cfi_libs.add(path)
                self.loaded.add(path)
                if os.path.realpath(path) in self._break_libraries():
                    self._read_ahead(path)  # a hit's innermost frame is there: named by our index at the end
                return True
            self._warn(f"gdb refused the unwind-table copy of {os.path.basename(path)} ({refused}); it reads its symbols")
        wanted = {os.path.basename(b["library"]) for b in self.address_breakpoints if not b.get("plt")}
        if os.path.basename(path) in wanted:
            self.load_symbols([path])
        return False

    def _read_ahead(self, path: str) -> None:
        """Our index names this library's frames (fill records): what naming the first one reads, read on a
        thread of its own while the target runs, not at the session's end. Only a library a breakpoint is in:
        libtorch_cpu.so's table is ~25 MB of pttrace's peak memory while it is read, which a run whose stacks
        never pass through it (``--break initModule``) would pay for nothing."""
        from tracer.symbols import read_ahead

        threading.Thread(target=read_ahead, args=(path,), name="index-read-ahead", daemon=True).start()

    def _symbols_instead_of_cfi(self, path: str) -> None:
        self.agent.cfi_drop(path)
        self.cfi_libs.discard(path)
        self.loaded.discard(path)
        self.load_symbols([path])

    def for_stepping(self) -> None:
        """gdb steps by function bounds, which come from symbols: a library given to it as unwind
        tables only gets its symbols before the first step (and libraries loaded later get theirs)."""
        self.load_waiting()
        if not self.cfi_libs and not self.cfi:
            return
        self.cfi = False
        for path in sorted(self.cfi_libs):
            self._symbols_instead_of_cfi(path)

    def for_breakpoint(self, spec: str) -> None:
        """A breakpoint added later that gdb resolves itself: give gdb the symbols of the libraries it
        may be defined in that gdb has now only as unwind tables, or not at all (and of those loaded later)."""
        self.decide_new()  # loads gdb did not stop for are decided first
        if not self.cfi and self.needed is None:
            return  # gdb reads every library's symbols already
        self.gdb_specs.append(spec)
        candidates = sorted(set(self._cfi_candidates()) | self.cfi_libs | self.skipped)
        names: set[str] | None = None  # None: cannot tell, every library gets its symbols
        if not resolve.names_a_place(spec) and resolve.index_resolvable(spec.strip()):
            from tracer.symbols import libraries_defining

            try:
                names = {os.path.basename(p) for p in libraries_defining(spec.strip(), candidates)}
            except resolve.IndexFailure as exc:
                self._warn(f"pttrace's symbol index failed on {spec} ({exc}); gdb reads every library's symbols")
        if names is None:
            self.cfi = False
            self.needed = None
        elif self.needed is not None:
            self.needed |= names
        for path in sorted(self.cfi_libs):
            if names is None or os.path.basename(path) in names:
                self._symbols_instead_of_cfi(path)
        self.load_symbols([p for p in sorted(self.skipped) if names is None or os.path.basename(p) in names])
        self._changed()

