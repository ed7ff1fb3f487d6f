"""pttrace's breakpoints in gdb: named ones gdb resolves, and address ones pttrace's index resolved
(``--op``, and ``--break`` names it knows exactly), placed as their library maps."""
from __future__ import annotations

from typing import Any

import gdb  # type: ignore[import-not-found]

from tracer.session import records
from tracer.dispatch.classify import classify, is_cold_clone, is_plt, kernel_below_adapter
from tracer.gdb.agent import bulk, native, regs, stash
from tracer.gdb.agent.repeat import REPEATS
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.follow import FOLLOW, in_scope
from tracer.gdb.agent.hits import last_thread, missing_symbols, record_frames, record_hit, torchscript_quiet
from tracer.gdb.agent.keyset import entry_keyset
from tracer.gdb.agent.log import LOG
from tracer.gdb.agent.memcache import MEMORY_CACHE
from tracer.gdb.agent.processes import PROCESSES
from tracer.gdb.agent.python_frames import FRAMES
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.stack import call_path
from tracer.gdb.agent.stepovers import STEPOVERS
from tracer.gdb.agent.state import STATE
from tracer.gdb.agent.entry import entry_values, read_memory


class Registry:
    """Every breakpoint the agent set, by the spec pttrace knows it by."""

    def __init__(self) -> None:
        self.named: dict[str, TraceBreakpoint] = {}  # spec -> the breakpoint gdb resolves by name
        self.unplaced: list[dict] = []  # address breakpoints whose library is not mapped yet
        self.by_address: dict[str, list[TraceBreakpoint]] = {}  # label -> its address breakpoints
        self.stubs: dict[str, list[dict]] = {}  # label -> [location] of the @plt stubs listed, not broken on
        self.off: set[str] = set()  # labels of address breakpoints turned off (placed ones come off too)
        self.placed: set[tuple] = set()  # (label, address, inferior) of every address breakpoint set
        self.entries: dict[tuple[str, int], ChildEntry] = {}  # (spec, address) -> a named one's child entry


BREAKPOINTS = Registry()


def _called_by_adapter(frame, info: dict) -> bool:
    """Whether the stopped frame is a kernel known by its caller (see hits.kernels_by_caller)."""
    if frame is None or info.get("layer") != "runtime":
        return False
    try:
        caller = frame.older()
        return caller is not None and kernel_below_adapter("runtime", native.describe(caller, 0, exact=False)["function"])
    except READ_ERRORS:
        return False


class TraceBreakpoint(gdb.Breakpoint):
    """Records the call path at each hit and lets the target run on (or stops, in stop mode)."""

    pt_layer = None  # an --op adapter with its kernel inlined: the kernel's layer, for --layer
    pt_library = None  # an address breakpoint's library, as pttrace's index named it
    pt_follow = False  # a function of an operator --follow reached: records only inside a followed op
    pt_unstash = False  # a TORCH_LIBRARY kernel: the stashed template hops above it are recorded first

    def __init__(self, spec: str, label: str | None = None, function: str | None = None):
        super().__init__(spec, type=gdb.BP_BREAKPOINT, internal=False)
        self.pt_spec = label or spec
        self.pt_function = function  # for address breakpoints: the symbol our index resolved

    def stop(self) -> bool:
        try:
            if MEMORY_CACHE.on:
                MEMORY_CACHE.off()  # a hit reads memory as gdb always did (memcache.py)
            if STEPOVERS.active() and STEPOVERS.repeated():
                return False  # gdb's step over the hit before, not a hit (stepovers.py)
            with bulk.STOP:  # the memory this stop checks, read together (bulk.StopBatch)
                repeated = REPEATS.record(self)  # an exact repeat of the hit before (repeat.py)
                if repeated is not None:
                    stops = repeated
                else:
                    REPEATS.forget()
                    stops = self._stop()
            if stops:
                STEPOVERS.stopped_here()
            return stops
        except OSError as exc:
            STATE.write_error = f"{exc.strerror or exc}"
            return True  # stop so pttrace notices and reports it
        except Exception as exc:  # the edge of a gdb callback: never let a bad read kill the run
            LOG.exception("recording a hit of %s", self.pt_spec)
            OUT.warn(f"could not record a hit: {exc.__class__.__name__}: {exc}")
            return False

    def _stop(self) -> bool:
        pid = PROCESSES.enter()
        if not PROCESSES.is_ready():
            # A child's first hit: gdb has no symbols of its libraries yet. pttrace loads them, then
            # asks for this hit again (pttrace-rerecord), the thread still stopped here.
            PROCESSES.need = PROCESSES.current
            STATE.pending_bp = self
            STATE.pending_thread = gdb.selected_thread()
            STATE.stop_requested = False
            return True
        innermost: dict[str, Any]  # the innermost frame's record (a cached one, or a copy with a name)
        try:
            newest = regs.stop_frame()  # gdb's frame #0 only when something needs more than registers
            innermost = native.describe(newest, 0)
        except READ_ERRORS:
            newest, innermost = None, {"function": None, "layer": None}
        name = innermost["function"]
        if name is None and self.pt_function:
            # An address breakpoint in a library gdb has no names for (a CFI-only copy): the function
            # our index resolved, for --layer and the DispatchKeySet read below.
            name = self.pt_function
            innermost = dict(innermost, function=name, layer=classify(name, innermost.get("library")))
        if is_plt(name):
            return False  # a stub in another library, not the function itself
        if self.pt_follow and not in_scope(newest):
            return False  # the operator called from outside every followed operator
        if FOLLOW.active and FOLLOW.is_root_label(self.pt_spec):
            FOLLOW.begin()  # a followed operator runs: the operators it calls are watched
        if STATE.layers and innermost["layer"] not in STATE.layers and self.pt_layer not in STATE.layers \
                and not ("kernel" in STATE.layers and _called_by_adapter(newest, innermost)):
            return False  # --layer: only hits whose innermost frame is in these layers
        keyset, why = entry_keyset(newest, name, innermost.get("library"), _fresh_read)
        values = entry_values(newest, name, innermost.get("library"))
        STATE.pending_unstash = False
        if self.pt_unstash and stash.STASH.by_thread:
            STATE.pending_unstash = not record_stashed(self.pt_spec, newest)
        STATE.need_libs = []
        if not record_hit(self.pt_spec, allow_defer=True, keyset=keyset, newest=newest, keyset_note=why,
                          values=values):
            STATE.pending_keyset = (keyset, why)  # the stop's registers, for the hit recorded later
            STATE.pending_values = values
            STATE.stop_requested = STATE.wants_stop()
            return True  # pttrace loads the missing symbols, then asks for pttrace-rerecord
        if pid not in PROCESSES.described:
            PROCESSES.describe(pid, FRAMES.dataloader_worker)
        elif self.pt_plain():
            REPEATS.keep(self, newest, last_thread())
        STATE.stop_requested = STATE.wants_stop()
        return STATE.stop_requested

    def pt_plain(self) -> bool:
        """Whether nothing but the stop's registers, checked memory and the agent's settings decides what a
        hit of this breakpoint records (no --follow, --eval, stashed hop, pending TorchScript layout or
        TorchScript frames, nor stop mode): then its repeats are recorded as such (repeat.py)."""
        return not (self.pt_follow or self.pt_unstash or FOLLOW.active or STATE.evals or STATE.mode != "record") \
            and torchscript_quiet()


class ChildEntry(gdb.Breakpoint):
    """Where a fork child first stops at a breakpoint gdb resolves by name (``add_child_entries``): an
    internal breakpoint set by address at one of the named breakpoint's locations. In a process whose
    symbols are set up, gdb stops at the named breakpoint itself and this one lets the thread go on."""

    def __init__(self, address: int, owner: TraceBreakpoint):
        super().__init__(f"*{address:#x}", type=gdb.BP_BREAKPOINT, internal=True)
        self.pt_owner = owner

    def stop(self) -> bool:
        if gdb.selected_inferior().num in PROCESSES.ready:
            return False
        owner = self.pt_owner
        if not owner.is_valid() or not owner.enabled:
            return False
        return owner.stop()  # a child's first hit: deferred until pttrace has set the child's symbols up


def add_child_entries() -> None:
    """Give each location of the breakpoints gdb resolves by name a ``ChildEntry``, when children are followed.

    gdb takes its breakpoint instructions out of a fork child and puts back those with a location in the
    child's program space. One set by address gets a location there at the fork (gdb resolves ``*ADDR`` in
    every program space); one resolved by name needs its library's symbols in the child, which gdb does not
    read with ``auto-solib-add off`` before pttrace loads them at the child's first hit (set_up_child). So
    a child whose breakpoints were all resolved by name (libz's zlibCompileFlags called through ctypes)
    never stopped there, run or attached: its hits were lost. The entries are set by address: a child
    stops at them, and its first hit goes the way the first hit at a breakpoint of pttrace's index does."""
    if not PROCESSES.follow:
        return
    for spec, bp in list(BREAKPOINTS.named.items()):
        if not bp.is_valid() or spec.startswith("*"):
            continue  # ``*ADDR`` is in every child already
        try:
            addresses = {int(loc.address) for loc in bp.locations if loc.address is not None and loc.enabled
                         and not is_plt(loc.function)}
        except READ_ERRORS as exc:
            LOG.info("the locations of %s: %s", spec, exc)
            continue
        for address in sorted(addresses):
            if (spec, address) in BREAKPOINTS.entries:
                continue
            try:
                BREAKPOINTS.entries[(spec, address)] = ChildEntry(address, bp)
            except gdb.error as exc:
                LOG.info("no child entry for %s at %#x: %s", spec, address, exc)


def entry_numbers() -> dict[str, int]:
    """gdb's number of each ``ChildEntry`` (negative: internal) -> its named breakpoint's: a child stopped at
    an entry is shown stopped at the named breakpoint, never at gdb's internal number."""
    return {str(entry.number): entry.pt_owner.number for entry in BREAKPOINTS.entries.values()
            if entry.is_valid() and entry.pt_owner.is_valid()}


def _fresh_read(address: int, length: int):
    """read_memory for what is read afresh at a stop (the key set on the stack): no repeat is made of it."""
    bulk.STOP.clean = False
    return read_memory(address, length)


def _inferior() -> int:
    try:
        return gdb.selected_inferior().num
    except (AttributeError, *READ_ERRORS):
        return 0


def record_stashed(spec: str | None, newest) -> bool:
    """The shared boxing templates that called this kernel (stash.py): a hit each, outermost first.
    False when the stack passes through libraries without symbols: then with the kernel's hit, after."""
    frames, truncated = call_path(newest)
    if missing_symbols(frames):
        return False
    if truncated:
        return True  # the outer part of the stack is cut: the templates' hits would be, too
    for i, keyset, why, values in stash.STASH.claim(stash.thread_number(), frames):
        record_frames(spec, frames[: i + 1], keyset=keyset, keyset_note=why, values=values)
    return True


def _locations(bp) -> list[dict]:
    out = []
    seen = set()
    for loc in bp.locations:
        # gdb has a location per process followed (program space): one place, listed once.
        place = (loc.address, loc.function)
        if place in seen:
            continue
        seen.add(place)
        fn = native.demangle(loc.function)
        addr = int(loc.address) if loc.address is not None else None
        file = line = None
        if loc.source:
            file, line = loc.source[0], loc.source[1]
        if loc.fullname:
            file = loc.fullname
        note = None
        if is_plt(fn):
            note = "plt stub: not stopped at"
        elif is_cold_clone(fn):
            note = "cold clone (a split-off part of the function)"
        out.append({"function": fn, "library": native.library(addr) if addr else None, "address": addr,
                    "file": file, "line": line, "enabled": bool(loc.enabled), "note": note})
    return out


def _fix_plt(bp) -> None:
    """A name also matches its @plt stubs in the libraries calling it: gdb stops there too otherwise."""
    try:
        for loc in bp.locations:
            if loc.enabled and is_plt(loc.function):
                loc.enabled = False
    except READ_ERRORS as exc:  # a breakpoint deleted meanwhile
        LOG.info("could not disable the @plt locations of %s: %s", bp, exc)


def on_modified(bp) -> None:
    if isinstance(bp, TraceBreakpoint):
        _fix_plt(bp)


def place_address_breakpoints() -> None:
    """Set the breakpoints our index resolved in every library that is mapped now."""
    remaining = []
    bases: dict = {}  # one read of /proc/PID/maps per library, not per breakpoint (3,100 x 40 loads: 23 s)
    for item in BREAKPOINTS.unplaced:
        if item["library"] not in bases:
            bases[item["library"]] = native.mapped_base(item["library"])
        base = bases[item["library"]]
        if base is None:
            remaining.append(item)
            continue
        if item.get("stash"):
            stash.place(item, base)  # a template several kernels share: kept, a hop only above our kernel
            continue
        if item.get("plt"):
            # A stub calling the function from another library: listed, never stopped at (as gdb's
            # named breakpoints do with their @plt locations).
            BREAKPOINTS.stubs.setdefault(item["label"], []).append({
                "function": (item.get("function") or "") + "@plt", "library": item["library"],
                "address": base + int(item["offset"]), "file": None, "line": None, "enabled": False,
                "note": "plt stub: not stopped at"})
            continue
        where = (item["label"], base + int(item["offset"]), _inferior())
        if where in BREAKPOINTS.placed:
            continue  # resolved twice (an attach hears of every library already loaded): broken on once
        BREAKPOINTS.placed.add(where)
        try:
            bp = TraceBreakpoint(f"*{base + int(item['offset']):#x}", label=item["label"],
                                 function=item.get("function"))
        except gdb.error as exc:
            OUT.warn(f"could not set a breakpoint on {item.get('function')}: {exc}")
            continue
        bp.pt_library = item["library"]
        bp.pt_layer = item.get("layer")
        bp.pt_unstash = bool(item.get("unstash"))
        if item.get("follow"):
            bp.pt_follow = True
            FOLLOW.add_follower(bp)
        if item["label"] in BREAKPOINTS.off:
            bp.enabled = False
        BREAKPOINTS.by_address.setdefault(item["label"], []).append(bp)
    BREAKPOINTS.unplaced = remaining
    FOLLOW.place_trigger()


def dump_breakpoints() -> None:
    """A ``breakpoint`` record for each, with its resolved locations. A name gdb resolves that pttrace's
    index also set by address in a library gdb has no symbols for is one record with both's locations."""
    labels = list(BREAKPOINTS.by_address)
    labels += [lb for lb in dict.fromkeys(i["label"] for i in BREAKPOINTS.unplaced) if lb not in labels]
    for label in labels:
        if label in BREAKPOINTS.named:
            continue
        locs = _address_locations(label)
        pending = [i for i in BREAKPOINTS.unplaced if i["label"] == label and not i.get("plt")]
        OUT.write(records.breakpoint(label, None, locs, pending=bool(pending), enabled=label not in BREAKPOINTS.off))
    for spec, bp in list(BREAKPOINTS.named.items()):
        valid = bp.is_valid()
        by_index = _address_locations(spec)
        OUT.write(records.breakpoint(spec, bp.number if valid else None, by_index + (_locations(bp) if valid else []),
                                     pending=(bp.pending if valid else True) and not by_index,
                                     enabled=bp.enabled if valid else False))


def _address_locations(label: str) -> list[dict]:
    locs = []
    for bp in BREAKPOINTS.by_address.get(label, []):
        if not bp.is_valid():
            continue
        for loc in _locations(bp):
            loc["function"] = bp.pt_function or loc["function"]
            loc["library"] = bp.pt_library or loc["library"]
            locs.append(loc)
    return locs + BREAKPOINTS.stubs.get(label, [])


def add_breakpoint(spec: str) -> None:
    spec = spec.strip()
    if not spec:
        raise gdb.GdbError("pttrace-break needs a location")
    if spec in BREAKPOINTS.named:
        return
    bp = TraceBreakpoint(spec)
    BREAKPOINTS.named[spec] = bp
    _fix_plt(bp)
    add_child_entries()


def delete_breakpoint(spec: str) -> None:
    bp = BREAKPOINTS.named.pop(spec, None)
    if bp is not None and bp.is_valid():
        bp.delete()
    for key in [k for k in BREAKPOINTS.entries if k[0] == spec]:
        entry = BREAKPOINTS.entries.pop(key)
        if entry.is_valid():
            entry.delete()
    for bp in BREAKPOINTS.by_address.pop(spec, []):  # a --break resolved by address, or an --op
        if bp.is_valid():
            bp.delete()
    BREAKPOINTS.placed = {p for p in BREAKPOINTS.placed if p[0] != spec}
    BREAKPOINTS.stubs.pop(spec, None)
    BREAKPOINTS.off.discard(spec)
    BREAKPOINTS.unplaced = [i for i in BREAKPOINTS.unplaced if i["label"] != spec]
    OUT.write(records.breakpoint_removed(spec))  # readers drop it: it stays removed in the file


def enable_breakpoint(spec: str, on: bool) -> None:
    """Turn a breakpoint off (gdb keeps it, the target no longer stops there) or on again."""
    named = BREAKPOINTS.named.get(spec)
    group = BREAKPOINTS.by_address.get(spec, [])
    if named is None and spec not in BREAKPOINTS.by_address and not any(
            i["label"] == spec for i in BREAKPOINTS.unplaced):
        raise gdb.GdbError(f"no breakpoint {spec}")
    for bp in ([named] if named is not None else []) + group:
        if bp.is_valid():
            bp.enabled = on
    if named is None:
        (BREAKPOINTS.off.discard if on else BREAKPOINTS.off.add)(spec)
