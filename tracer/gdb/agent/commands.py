"""The gdb commands pttrace drives the agent with (over MI), and the gdb events the agent follows.

  pttrace-setup CONFIG.json     read the configuration (below), open the session file, set breakpoints
  pttrace-break SPEC            add a breakpoint (pending if its library is not loaded yet)
  pttrace-break-address [ITEMS] add breakpoints pttrace's index resolved (items as in address_breakpoints)
  pttrace-delete SPEC           delete a breakpoint (a record says it is gone)
  pttrace-enable SPEC           turn a breakpoint on again
  pttrace-disable SPEC          turn a breakpoint off (kept, not stopped at)
  pttrace-mode record|stop      record and continue, or stop at the next hit
  pttrace-child-entries         the named breakpoints' new locations get their entries for fork children
  pttrace-dump                  append the breakpoints (with resolved locations) to the session
  pttrace-record-stop REASON    record the current stack as a stop (a crash signal, say)
  pttrace-status                print {hits, mode, need_libs, stop, write_error, stack_reuse} as JSON
  pttrace-snapshot              print the selected thread's call path as JSON (stepping in stop mode)
  pttrace-rerecord              record the deferred hit, now that the libraries it needed have symbols
  pttrace-followed              the operators --follow asked for (need_ops) are resolved and broken on
  pttrace-cfi-add {"library": L, "copy": C}   give gdb L's CFI-only copy instead of L's symbols
  pttrace-cfi-drop LIBRARY      take that copy away (L's full symbols are loaded next)
  pttrace-quiet on|off          every breakpoint off but execve's (a process goes through its exec), then on
  pttrace-ptrace info TID... | resume TID SIG | release PID   raw ptrace for a stop gdb lost (rescue.py)
  pttrace-library-stops RULES   the library loads to stop at (libstops.Rules as JSON); the first one sets
                                ``catch load`` with the condition ``$_pttrace_library_stop()``
  pttrace-warm                  do now what the agent's import left to first use (pttrace sends it once the
                                target is started, while the target starts)

The configuration of pttrace-setup: ``session`` (the file to append to), ``mode``, ``max_hits``,
``max_depth``, ``first_seq`` (the seq of the last hit already in the file), ``layers``, ``breakpoints``
(specs gdb resolves), ``address_breakpoints`` ({label, library, offset, function, layer, plt}: resolved
by pttrace's index), ``follow`` (``--follow``: {roots: {struct: label}, known: [struct], trigger: item}),
``log`` (a file for the agent's log; none if absent).
A command's error reaches pttrace as the MI command's error.
"""
from __future__ import annotations

import json
import os

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent import breakpoints, launcher, memcache, native, repeat, rescue, tensor_command
from tracer.gdb.agent.cfi_unwind import CFI
from tracer.gdb.agent.breakpoints import BREAKPOINTS, add_breakpoint
from tracer.gdb.agent.follow import FOLLOW
from tracer.gdb.agent.hits import defer_for, missing_symbols, record_hit, thread_info
from tracer.gdb.agent.libstops import LoadedLibraries, Rules, r_debug_address
from tracer.gdb.agent.log import LOG, open_log
from tracer.gdb.agent.osnames import OS_NAMES
from tracer.gdb.agent.prefetch import PREFETCH
from tracer.gdb.agent.processes import EXEC_FUNCTIONS, PROCESSES, QUIET, ExecWatch
from tracer.gdb.agent.reuse import STATS
from tracer.gdb.agent.repeat import EPOCH, REPEATS
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.stack import call_path
from tracer.gdb.agent.stepovers import STEPOVERS
from tracer.gdb.agent.state import CACHES, STATE
from tracer.gdb.agent.torchscript import READER as TORCHSCRIPT
from tracer.text.escape import gdb_regex_literal


def install_values(values: dict) -> None:
    """tracer.values' layout of the target torch (or why there is none), and the autograd Nodes' vtables
    by library, whose load bases are found as the libraries map (grad_fn's class name)."""
    from tracer.values import agent as values_agent

    tables = {lib: {int(k): v for k, v in t.items()} for lib, t in (values.get("vtables") or {}).items()}
    bases: dict[str, int] = {}  # (tracer.values.vtables.Symbolizer's job, without its symbol-index import)

    def symbolize(address: int):
        for lib, table in tables.items():
            if lib not in bases:
                base = native.mapped_base(lib)
                if base is None:
                    continue
                bases[lib] = base
            name = table.get(address - bases[lib])
            if name is not None:
                return name
        return None

    values_agent.install(values.get("layout"), symbolize if tables else None, values.get("why"))
    CACHES.arguments.clear()  # described with another layout


def _setup(arg: str) -> None:
    with open(arg.strip(), "r", encoding="utf-8") as fh:
        cfg = json.load(fh)
    if cfg.get("log"):
        open_log(cfg["log"])
    OUT.open(cfg["session"])
    STATE.mode = cfg.get("mode", "record")
    STATE.max_hits = int(cfg.get("max_hits") or 0)
    STATE.max_depth = int(cfg.get("max_depth") or 256)
    STATE.hits = int(cfg.get("first_seq") or 0)
    STATE.layers = set(cfg.get("layers") or [])
    STATE.evals = [str(e) for e in cfg.get("evals") or []]
    STATS.enabled = bool(cfg.get("stack_reuse", True))
    STATE.arguments = bool(cfg.get("arguments", True))
    STATS.path = cfg.get("stack_reuse_stats") or None
    REPEATS.enabled = bool(cfg.get("repeat", True))
    BREAKPOINTS.unplaced = list(cfg.get("address_breakpoints") or [])
    FOLLOW.configure(cfg.get("follow"))
    install_values(cfg.get("values") or {})
    TORCHSCRIPT.configure(cfg.get("torchscript"))
    PROCESSES.follow = bool(cfg.get("follow_children"))
    if PROCESSES.follow:
        for function in EXEC_FUNCTIONS:
            ExecWatch(function)
    for spec in cfg.get("breakpoints", []):
        add_breakpoint(spec)
    breakpoints.place_address_breakpoints()
    PREFETCH.start()  # the interpreter's units gdb will read at the first hit, read while the target runs
    _exit_without_finalizing()
    LOG.info("set up: session %s, mode %s, %d address breakpoints", OUT.path, STATE.mode, len(BREAKPOINTS.unplaced))


def _exit_without_finalizing() -> None:
    """gdb's exit skips its Python's finalization and gdb's cleanups after it, once gdb has killed or detached
    every inferior (``quit`` does that first): ~50 ms of every run's end that pttrace waits for (strace of gdb
    at a sigmoid run's end, load 4: from Python's SIGINT handler put back to ``exit_group``), and 0.06 s off
    the end by alternating runs. Nothing needs them: the agent writes the session file record by record
    (``os.write``), its log is flushed at each line and the library scans are saved when they change; gdb wrote
    its index cache as it read each library (the same files, from an empty cache, either way). The exit
    status is 0, as ``quit`` and ``-gdb-exit`` give."""
    import atexit

    atexit.register(os._exit, 0)


def _break_address(arg: str) -> None:
    """More breakpoints resolved by pttrace's index: a name found again in a library loaded later."""
    try:
        items = json.loads(arg)
    except ValueError as exc:
        raise gdb.GdbError(f"pttrace-break-address takes a JSON list: {exc}") from None
    if not isinstance(items, list) or not all(isinstance(i, dict) and "library" in i and "offset" in i
                                              and "label" in i for i in items):
        raise gdb.GdbError("pttrace-break-address takes [{label, library, offset, ...}]")
    BREAKPOINTS.unplaced.extend(items)
    breakpoints.place_address_breakpoints()


def _mode(arg: str) -> None:
    arg = arg.strip()
    if arg not in ("record", "stop"):
        raise gdb.GdbError("pttrace-mode takes record or stop")
    STATE.mode = arg


def _gdb_path_arg(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"' if any(c in path for c in ' \t"\'\\') else path


def _cfi_add(arg: str) -> None:
    """Give gdb L's CFI-only copy at L's load base instead of L's symbols: its frames are unwound by
    gdb and named by pttrace (fill records)."""
    req = json.loads(arg)
    lib, copy = req["library"], req["copy"]
    base = native.mapped_base(lib)
    if base is None:
        raise gdb.GdbError(f"{lib} is not mapped in the target")
    if not _holds(gdb.current_progspace(), copy):  # once a space: a second copy hid the library's symbols
        gdb.execute(f"add-symbol-file {_gdb_path_arg(copy)} -o {base:#x}", to_string=True)
    STATE.cfi_libs[lib] = (copy, base)
    real = os.path.realpath(lib)
    if real != lib:
        STATE.cfi_libs[real] = (copy, base)
    CFI.forget()
    CACHES.invalidate()
    gdb.write(json.dumps({"base": base}) + "\n")


def _cfi_drop(arg: str) -> None:
    lib = arg.strip()
    entry = None
    for name in (lib, os.path.realpath(lib)):
        entry = STATE.cfi_libs.pop(name, None) or entry
    if entry is not None:
        _drop_everywhere(entry[0], lib)
    CFI.forget()
    CACHES.invalidate()


def _holds(space, copy: str) -> bool:
    return space is not None and any(o.filename == copy for o in space.objfiles())


def _drop_everywhere(copy: str, lib: str) -> None:
    """Take the copy away in every process's program space, each time it was added there: a DataLoader
    worker's held it twice, one removal left the other in front of the library's symbols, and gdb found no
    function bounds there (s and n did nothing). A space other than the selected one gets the library's
    own symbols at once (the recorder gives them to the selected one)."""
    here = gdb.selected_inferior()
    thread = gdb.selected_thread()
    try:
        frame = gdb.selected_frame()
    except gdb.error:
        frame = None
    try:
        for inferior in [here, *[i for i in gdb.inferiors() if i.num != here.num]]:
            if not _holds(inferior.progspace, copy):
                continue
            if inferior.num != gdb.selected_inferior().num:
                gdb.execute(f"inferior {inferior.num}", to_string=True)
            for _ in range(8):  # each remove-symbol-file takes one of them away
                if not _holds(gdb.current_progspace(), copy):
                    break
                gdb.execute(f"remove-symbol-file {_gdb_path_arg(copy)}", to_string=True)
            if inferior.num != here.num:
                gdb.execute(f"sharedlibrary {gdb_regex_literal(lib)}", to_string=True)
    except gdb.error as exc:
        LOG.info("remove-symbol-file %s: %s", copy, exc)
    finally:
        if gdb.selected_inferior().num != here.num:
            if thread is not None and thread.is_valid():
                thread.switch()
            else:
                gdb.execute(f"inferior {here.num}", to_string=True)
            if frame is not None and frame.is_valid():
                frame.select()


def _snapshot(arg: str) -> None:
    frames, truncated = call_path()
    gdb.write(json.dumps({"thread": thread_info(), "frames": frames, "truncated": truncated}) + "\n")


def _status(arg: str) -> None:
    gdb.write(json.dumps({"hits": STATE.hits, "mode": STATE.mode, "need_libs": STATE.need_libs,
                          "need_launcher": STATE.pending_launcher, "need_ops": FOLLOW.pending,
                          "need_process": PROCESSES.need if STATE.pending_bp is not None else None,
                          "exec": STATE.exec_request,
                          "stop": STATE.stop_requested, "write_error": STATE.write_error,
                          "entries": breakpoints.entry_numbers(), "stepovers": len(STEPOVERS.watched),
                          "stack_reuse": {"enabled": STATS.enabled, **STATS.as_dict()}}) + "\n")


def _back_to_waiting_thread() -> bool:
    """Select the thread that stopped at the waiting hit; False (and the hit given up, with a warning) when it
    is gone. gdb may have another inferior selected by now: under load (11-16) a fork child's first hit was
    read in an ended DataLoader worker's inferior, written with no thread pid, and the child's hit was lost."""
    thread, STATE.pending_thread = STATE.pending_thread, None
    if thread is None:
        return True
    if not thread.is_valid():
        LOG.info("rerecord: the waiting hit's thread is gone")
        OUT.warn("a hit could not be recorded: its thread ended while gdb loaded the symbols it needed")
        STATE.pending_bp, PROCESSES.need, STATE.pending_spec, STATE.need_libs = None, None, None, []
        STATE.pending_keyset, STATE.pending_skip, STATE.pending_launcher = (None, None), 0, False
        STATE.pending_values = None
        return False
    if gdb.selected_thread() is not thread:
        LOG.info("rerecord: gdb had thread %s selected, the hit is thread %s's",
                 getattr(gdb.selected_thread(), "num", None), thread.num)
        thread.switch()
    return True


def _rerecord(arg: str) -> None:
    if (STATE.pending_bp is not None or STATE.pending_spec is not None or STATE.need_libs) \
            and not _back_to_waiting_thread():
        return
    if STATE.pending_bp is not None:
        # A child's first hit, now that its symbols are loaded: the breakpoint's stop() again.
        bp, STATE.pending_bp, PROCESSES.need = STATE.pending_bp, None, None
        CACHES.invalidate()
        STATE.stop_requested = bp.stop()
        return
    if STATE.pending_spec is None and not STATE.need_libs:
        return
    spec = STATE.pending_spec
    if STATE.need_libs or not STATE.pending_launcher:
        CACHES.invalidate()  # symbols were loaded: frames named before are stale
    STATE.need_libs = []
    keyset, why = STATE.pending_keyset
    newest = None
    if STATE.pending_skip:  # recorded from an older frame than the one it stopped in
        newest = gdb.newest_frame()
        for _ in range(STATE.pending_skip):
            newest = newest.older() or newest
    launched_by = None
    if STATE.pending_launcher:
        launched_by = launcher.find(call_path)
        # the launcher's stack (or, when none was found, the other threads' stacks) passes through
        # libraries without symbols, where gdb unwinds no further
        missing = missing_symbols(launched_by.get("frames") or [])
        missing += [lib for lib in launched_by.pop("unread", []) if lib not in STATE.asked_libs and lib not in missing]
        if missing:  # the launcher's stack passes through libraries without symbols: after them
            defer_for(missing, spec)
            return
    if STATE.pending_unstash:
        STATE.pending_unstash = not breakpoints.record_stashed(spec, newest)
    # Asked again (more libraries without symbols, or a worker's launcher to read): this state waits.
    if not record_hit(spec, allow_defer=not STATE.pending_launcher, keyset=keyset, keyset_note=why,
                      launched_by=launched_by, newest=newest, defer_missing=True, values=STATE.pending_values):
        return
    STATE.pending_spec, STATE.pending_keyset, STATE.pending_skip, STATE.pending_launcher = None, (None, None), 0, False
    STATE.pending_values = None
    STATE.stop_requested = STATE.wants_stop()


class _Command(gdb.Command):
    def __init__(self, name: str, fn):
        super().__init__(name, gdb.COMMAND_USER)
        self._fn = fn

    def invoke(self, arg, from_tty):
        EPOCH.bump()  # any command may change what the next hit records: no repeat of the hit before
        self._fn(arg)


def _followed(arg: str) -> None:
    """pttrace has broken on the operators --follow asked for (or said why not)."""
    FOLLOW.pending = []
def _process_ready(arg: str) -> None:
    """pttrace set up this inferior's symbols (a child's, as its parent's are)."""
    PROCESSES.ready.add(int(arg))
    PROCESSES.forget()


def _warm(arg: str) -> None:
    """What the import leaves to its first use, done while the target starts rather than at the first hit: the
    layer rules' patterns (classify.compiled_rules), ~40 compiled, a fifth of the agent's import."""
    from tracer.dispatch.classify import compiled_rules

    compiled_rules()


def _exec_seen(arg: str) -> None:
    STATE.exec_request = None


def _quiet(arg: str) -> None:
    if arg.strip() not in ("on", "off"):
        raise gdb.GdbError("pttrace-quiet takes on or off")
    if arg.strip() == "on":
        QUIET.on()
    else:
        QUIET.off()


class _LibraryStops(gdb.Function):
    """``$_pttrace_library_stop()``: the condition of pttrace's ``catch load``, true when a library loaded
    since the last look is one pttrace must act on at once (libstops.py). gdb evaluates it in the thread
    that loaded, after updating its list of libraries; an error in it stops the target, as before."""

    def __init__(self) -> None:
        super().__init__("_pttrace_library_stop")
        self.rules: Rules | None = None
        self.catchpoint = None
        self._seen: dict[int, LoadedLibraries] = {}
        self._r_debug: dict[tuple, int] = {}

    def invoke(self) -> int:
        PREFETCH.library_loaded()  # gdb is on the target's way at loads: no prefetching while they come
        if self.rules is None:
            return 1
        inferior = gdb.selected_inferior()
        key = (inferior.num, inferior.pid, inferior.progspace.filename)
        def read(address: int, size: int) -> bytes:
            return bytes(inferior.read_memory(address, size))

        try:
            if key not in self._r_debug:  # from the executable's DT_DEBUG, else gdb's symbol (read at the first stop)
                address = r_debug_address(inferior.pid, read)
                self._r_debug[key] = address if address is not None else \
                    int(gdb.parse_and_eval("(unsigned long) &_r_debug"))
            names = self._seen.setdefault(inferior.num, LoadedLibraries()).new(self._r_debug[key], read)
        except (gdb.error, gdb.MemoryError, ValueError, OverflowError):
            self._r_debug.pop(key, None)
            return 1
        wanted = [name for name in names if self.rules.must_stop(name)]
        if self.rules.scans is not None:
            self.rules.scans.save()
        if wanted:
            LOG.debug("stop for the libraries %s", wanted)
        return 1 if wanted else 0

    def set_rules(self, arg: str) -> None:
        self.rules = Rules.from_json(json.loads(arg))
        if self.catchpoint is None or not self.catchpoint.is_valid():
            before = {bp.number for bp in gdb.breakpoints()}
            gdb.execute("catch load", to_string=True)
            catchpoint = next(bp for bp in gdb.breakpoints() if bp.number not in before)
            catchpoint.condition = "$_pttrace_library_stop()"
            self.catchpoint = catchpoint


LIBRARY_STOPS = _LibraryStops()


def _on_exited(event) -> None:
    num = getattr(getattr(event, "inferior", None), "num", PROCESSES.current)
    if num == PROCESSES.current:
        CACHES.invalidate(target_exited=True)
    OS_NAMES.close()
    CFI.forget()
    PROCESSES.exited(num)


def _invalidate_all(*_args) -> None:
    CACHES.invalidate()
    PROCESSES.forget()


def _on_new_objfile(event) -> None:
    if BREAKPOINTS.unplaced or (FOLLOW.trigger_item is not None and FOLLOW.trigger is None):
        breakpoints.place_address_breakpoints()


def install() -> None:
    _Command("pttrace-setup", _setup)
    _Command("pttrace-break", add_breakpoint)
    _Command("pttrace-break-address", _break_address)
    _Command("pttrace-delete", lambda arg: breakpoints.delete_breakpoint(arg.strip()))
    _Command("pttrace-enable", lambda arg: breakpoints.enable_breakpoint(arg.strip(), True))
    _Command("pttrace-disable", lambda arg: breakpoints.enable_breakpoint(arg.strip(), False))
    _Command("pttrace-mode", _mode)
    _Command("pttrace-dump", lambda arg: breakpoints.dump_breakpoints())
    _Command("pttrace-child-entries", lambda arg: breakpoints.add_child_entries())
    _Command("pttrace-record-stop", lambda arg: record_hit(None, signal=arg.strip() or None))
    _Command("pttrace-status", _status)
    _Command("pttrace-stepovers", lambda arg: gdb.write(f"{STEPOVERS.check()}\n"))
    _Command("pttrace-snapshot", _snapshot)
    _Command("pttrace-rerecord", _rerecord)
    _Command("pttrace-followed", _followed)
    _Command("pttrace-cfi-add", _cfi_add)
    _Command("pttrace-cfi-drop", _cfi_drop)
    _Command("pttrace-process-ready", _process_ready)
    _Command("pttrace-exec-seen", _exec_seen)
    _Command("pttrace-quiet", _quiet)
    _Command("pttrace-ptrace", lambda arg: gdb.write(rescue.command(arg) + "\n"))
    _Command("pttrace-library-stops", LIBRARY_STOPS.set_rules)
    _Command("pttrace-warm", _warm)
    tensor_command.install()  # `tensor EXPR` at the TUI's gdb prompt
    gdb.events.breakpoint_modified.connect(breakpoints.on_modified)
    repeat.connect()
    gdb.events.new_objfile.connect(_on_new_objfile)
    for event in ("new_objfile", "free_objfile", "clear_objfiles"):
        if getattr(gdb.events, event, None) is not None:
            getattr(gdb.events, event).connect(_invalidate_all)
    gdb.events.exited.connect(_on_exited)
    gdb.events.stop.connect(lambda event: memcache.on_stop(event, LIBRARY_STOPS.catchpoint))
    for event in ("new_thread", "thread_exited"):  # thread_exited: gdb 14+
        if getattr(gdb.events, event, None) is not None:
            getattr(gdb.events, event).connect(lambda *_args: CACHES.forget_thread_names())
