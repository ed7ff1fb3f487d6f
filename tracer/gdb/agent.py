"""The recorder that runs *inside* gdb (sourced with ``source agent.py``).

Recording in gdb's own Python is ~4x cheaper per hit than ``commands; bt; continue`` and far
cheaper than an MI round trip per hit (DESIGN.md section 2). Each hit is appended to the session
file as one JSON line the moment it happens, so nothing recorded is lost if gdb or the target dies.

This module must import nothing but the standard library, gdb, and ``tracer.classify``.
Every read of the inferior's memory is treated as untrustworthy: a frame we cannot read is
recorded with what we know, never guessed.

gdb commands defined here (driven by pttrace over MI):
  pttrace-setup CONFIG.json     read the configuration, open the session file, set breakpoints
  pttrace-break SPEC            add a breakpoint (pending if its library is not loaded yet)
  pttrace-delete SPEC           delete a breakpoint
  pttrace-mode record|stop      record and continue, or stop at the next hit
  pttrace-dump                  append the current breakpoints (with resolved locations) to the session
  pttrace-record-stop REASON    record the current stack as a stop (a crash signal, say)
"""
from __future__ import annotations

import json
import os
import time

import gdb  # type: ignore[import-not-found]

from tracer.classify import classify, dispatch_key, is_cold_clone, is_plt, short_name
from tracer.gdb.linetable import line_ranges as _line_ranges

EVAL_FRAME = "_PyEval_EvalFrameDefault"
MAX_SOURCE = 400


class _State:
    session_fd = -1
    session_path = ""
    mode = "record"
    max_hits = 0
    max_depth = 256
    hits = 0
    warned: set = set()
    breakpoints: dict = {}
    started = time.time()
    py_ok = None  # None: not checked yet; False: interpreter has no debug info
    need_libs: list = []  # libraries without symbols that the last stack passed through
    pending_spec = None  # the breakpoint whose hit waits to be recorded again after loading them
    stop_requested = False  # what stop() decided, for pttrace-status
    write_error = None  # set when the session file cannot be written (disk full, directory gone)
    layers: set = set()  # --layer: record only hits whose innermost frame is in one of these
    address_breakpoints: list = []  # resolved by pttrace's symbol index, placed when their library maps
    address_groups: dict = {}  # label -> [TraceBreakpoint]


STATE = _State()

# Per-pc caches: the same return addresses come back at every hit of a hot breakpoint.
_native_cache: dict = {}
_code_cache: dict = {}
_source_cache: dict = {}
_exe_name = None


def _write(record: dict) -> None:
    if STATE.session_fd < 0:
        return
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a name that is not UTF-8: keep it, as JSON escapes
        data = (json.dumps(record, separators=(",", ":")) + "\n").encode("ascii")
    os.write(STATE.session_fd, data)


def _warn(message: str) -> None:
    if message in STATE.warned:
        return
    STATE.warned.add(message)
    _write({"type": "warning", "message": message})


# --------------------------------------------------------------------------------------------
# Native frames
# --------------------------------------------------------------------------------------------
def _library(pc: int) -> str | None:
    global _exe_name
    try:
        lib = gdb.solib_name(pc)
    except Exception:
        lib = None
    if lib:
        return lib
    if _exe_name is None:
        try:
            _exe_name = gdb.current_progspace().filename or ""
        except Exception:
            _exe_name = ""
    return _exe_name or None


def _symbols_loaded(lib: str | None) -> bool:
    """Whether gdb has read this library's symbols (with auto-solib-add off, maybe not)."""
    if not lib:
        return True
    try:
        names = {o.filename for o in gdb.objfiles()}
    except Exception:
        return True
    return lib in names or os.path.realpath(lib) in names


def _native(frame, inline_index: int) -> dict:
    pc = frame.pc()
    key = (pc, inline_index)
    cached = _native_cache.get(key)
    if cached is not None:
        return cached
    try:
        name = frame.name()
    except Exception:
        name = None
    file = line = None
    try:
        sal = frame.find_sal()
        if sal is not None and sal.symtab is not None and sal.line:
            file = sal.symtab.fullname()
            line = int(sal.line)
    except Exception:
        pass
    lib = _library(pc)
    info = {
        "kind": "native",
        "function": name,
        "short": short_name(name),
        "library": lib,
        "address": pc,
        "file": file,
        "line": line,
        "layer": classify(name, lib),
        "dispatch_key": dispatch_key(name),
    }
    try:
        if frame.type() == gdb.INLINE_FRAME:
            info["inlined"] = True
    except Exception:
        pass
    _native_cache[key] = info
    return info


# --------------------------------------------------------------------------------------------
# Python frames (CPython 3.11+ layout: _PyInterpreterFrame chains, several per C eval frame)
# --------------------------------------------------------------------------------------------
_types: dict = {}


def _type(name: str):
    t = _types.get(name)
    if t is None:
        t = gdb.lookup_type(name)
        _types[name] = t
    return t


def _read_str(obj) -> str | None:
    """Read a str object's text from the inferior (compact ASCII and compact UCS1/2/4)."""
    try:
        addr = int(obj)
        if not addr:
            return None
        ascii_t = _type("PyASCIIObject")
        a = obj.cast(ascii_t.pointer()).dereference()
        length = int(a["length"])
        if length < 0 or length > 1 << 16:
            return None
        state = a["state"]
        is_ascii = int(state["ascii"])
        compact = int(state["compact"])
        kind = int(state["kind"])
        if not compact:
            return None
        inf = gdb.selected_inferior()
        if is_ascii:
            data = addr + ascii_t.sizeof
            return bytes(inf.read_memory(data, length)).decode("ascii", "replace")
        data = addr + _type("PyCompactUnicodeObject").sizeof
        raw = bytes(inf.read_memory(data, length * kind))
        enc = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}.get(kind)
        return raw.decode(enc, "replace") if enc else None
    except Exception:
        return None


def _read_bytes(obj) -> bytes | None:
    try:
        b = obj.cast(_type("PyBytesObject").pointer()).dereference()
        size = int(b["ob_base"]["ob_size"])
        if size < 0 or size > 1 << 22:
            return None
        return bytes(gdb.selected_inferior().read_memory(b["ob_sval"].address, size))
    except Exception:
        return None


def _code_info(code) -> dict | None:
    addr = int(code)
    info = _code_cache.get(addr)
    if info is not None:
        return info
    try:
        c = code.dereference()
        filename = _read_str(c["co_filename"])
        name = _read_str(c["co_qualname"]) or _read_str(c["co_name"])
        first = int(c["co_firstlineno"])
        table = _read_bytes(c["co_linetable"]) or b""
        start = int(c["co_code_adaptive"].address)
    except Exception:
        return None
    info = {"file": filename, "function": name, "ranges": _line_ranges(table, first), "start": start,
            "first": first}
    _code_cache[addr] = info
    return info


def _line_of(info: dict, lasti_units: int) -> int | None:
    for start, end, line in info["ranges"]:
        if start <= lasti_units < end:
            return line
    return None


def _source(path: str | None, line: int | None) -> str | None:
    if not path or not line:
        return None
    lines = _source_cache.get(path)
    if lines is None:
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError:
            lines = []
        _source_cache[path] = lines
    if 0 < line <= len(lines):
        return lines[line - 1].strip()[:MAX_SOURCE]
    return None


def _python_frames(frame) -> list[dict] | None:
    """The Python frames one C-level eval frame runs, innermost first; None if unreadable."""
    try:
        iframe = frame.read_var("frame")
        if iframe.is_optimized_out:
            iframe = frame.read_var("cframe")["current_frame"]
    except Exception:
        return None
    out = []
    seen = 0
    try:
        while int(iframe) and seen < STATE.max_depth:
            seen += 1
            f = iframe.dereference()
            info = _code_info(f["f_code"])
            if info is None:
                out.append({"kind": "python", "function": None, "short": None, "library": None, "address": None,
                            "file": None, "line": None, "layer": "python", "dispatch_key": None, "source": None})
            else:
                lasti = (int(f["prev_instr"]) - info["start"]) // 2
                line = _line_of(info, lasti) if lasti >= 0 else info["first"]
                out.append({
                    "kind": "python",
                    "function": info["function"],
                    "short": info["function"],
                    "library": None,
                    "address": None,
                    "file": info["file"],
                    "line": line,
                    "layer": "python",
                    "dispatch_key": None,
                    "source": _source(info["file"], line),
                })
            if int(f["is_entry"]):
                break
            iframe = f["previous"]
    except Exception:
        if not out:
            return None
    return out


def _check_python() -> bool:
    if STATE.py_ok is None:
        try:
            _type("_PyInterpreterFrame")
            _type("PyASCIIObject")
            STATE.py_ok = True
        except Exception:
            STATE.py_ok = False
            _warn("the Python interpreter has no debug information (or is not CPython 3.11+): "
                  "Python frames are not shown, native frames are")
    return STATE.py_ok


# --------------------------------------------------------------------------------------------
# The stack walk
# --------------------------------------------------------------------------------------------
def call_path() -> tuple[list[dict], bool]:
    """Frames of the selected thread, outermost first, and whether the walk was cut at max_depth."""
    py = _check_python()
    frames: list[dict] = []
    try:
        f = gdb.newest_frame()
    except gdb.error:
        return frames, False
    last_pc = None
    inline_index = 0
    depth = 0
    truncated = False
    while f is not None:
        if depth >= STATE.max_depth:
            truncated = True
            break
        depth += 1
        try:
            pc = f.pc()
        except Exception:
            break
        inline_index = inline_index + 1 if pc == last_pc else 0
        last_pc = pc
        native = _native(f, inline_index)  # cached per pc: no symbol lookup for frames seen before
        if py and native["function"] == EVAL_FRAME and not native.get("inlined"):
            pyframes = _python_frames(f)
            if pyframes:
                room = STATE.max_depth - len(frames)
                if len(pyframes) > room:
                    frames.extend(pyframes[:room])
                    truncated = True
                    break
                frames.extend(pyframes)
            else:
                frames.append(native)
        else:
            frames.append(native)
        depth = len(frames)
        try:
            f = f.older()
        except gdb.error:
            _warn("gdb could not unwind past some frames; the outermost frames of those stacks are missing")
            break
    frames.reverse()
    return frames, truncated


def _thread() -> dict:
    try:
        th = gdb.selected_thread()
        return {"id": th.num, "name": th.name, "lwp": th.ptid[1] or None}
    except Exception:
        return {"id": None, "name": None, "lwp": None}


def _missing_symbols(frames: list[dict]) -> list[str]:
    libs = []
    for f in frames:
        if f["kind"] == "native" and not f.get("function") and f.get("library") and f["library"] not in libs:
            if not _symbols_loaded(f["library"]):
                libs.append(f["library"])
    return libs


def _entry_keyset(frame, name: str | None) -> int | None:
    """The DispatchKeySet a dispatcher hop was called with, read at its entry.

    It is the first argument (a 64-bit value in rdi on x86-64) of ``redispatch`` and of the kernels
    that take one; only valid at the function's first instructions, so only for the stopped frame.
    """
    if frame is None or not name or "(c10::DispatchKeySet" not in name:
        return None
    try:
        rdi = int(frame.read_register("rdi")) & 0xFFFFFFFFFFFFFFFF
        rsp = int(frame.read_register("rsp")) & 0xFFFFFFFFFFFFFFFF
        # A function returning a class by value (at::Tensor) gets the address of the return slot,
        # on the caller's stack, as a hidden first argument: the key set then comes in rsi.
        if abs(rdi - rsp) < (1 << 24):
            return int(frame.read_register("rsi")) & 0xFFFFFFFFFFFFFFFF
        return rdi
    except Exception:
        return None


def record_hit(spec: str | None, signal: str | None = None, allow_defer: bool = False,
               keyset: int | None = None) -> bool:
    """Record the current stack; returns False if deferred until missing symbols are loaded."""
    frames, truncated = call_path()
    if keyset is not None and frames:
        frames[-1] = dict(frames[-1], keyset=keyset)
    if allow_defer:
        missing = _missing_symbols(frames)
        if missing:
            STATE.need_libs = missing
            STATE.pending_spec = spec
            for key in [k for k, v in _native_cache.items() if v.get("library") in missing]:
                del _native_cache[key]
            return False
    STATE.hits += 1
    rec = {"type": "hit", "seq": STATE.hits, "breakpoint": spec, "thread": _thread(), "time": time.time(),
           "frames": frames}
    if truncated:
        rec["truncated"] = True
    if signal:
        rec["signal"] = signal
    _write(rec)
    return True


# --------------------------------------------------------------------------------------------
# Breakpoints
# --------------------------------------------------------------------------------------------
class TraceBreakpoint(gdb.Breakpoint):
    """Records the call path at each hit and lets the target run on (or stops, in stop mode)."""

    def __init__(self, spec: str, label: str | None = None, function: str | None = None):
        super().__init__(spec, type=gdb.BP_BREAKPOINT, internal=False)
        self.pt_spec = label or spec
        self.pt_function = function  # for address breakpoints: the symbol our index resolved

    def stop(self) -> bool:
        try:
            newest = gdb.newest_frame()
            innermost = _native(newest, 0)
        except Exception:
            newest, innermost = None, {"function": None, "layer": None}
        name = innermost["function"]
        if is_plt(name):
            return False  # a stub in another library, not the function itself
        if STATE.layers and innermost["layer"] not in STATE.layers:
            return False  # --layer: only hits whose innermost frame is in these layers
        keyset = _entry_keyset(newest, name)
        STATE.need_libs = []
        try:
            if not record_hit(self.pt_spec, allow_defer=True, keyset=keyset):
                STATE.stop_requested = self._wants_stop()
                return True  # pttrace loads the missing symbols, then asks for pttrace-rerecord
        except OSError as exc:
            STATE.write_error = f"{exc.strerror or exc}"
            return True  # stop so pttrace notices and reports it
        except Exception as exc:  # never let a bad read kill the run
            _warn(f"could not record a hit: {exc.__class__.__name__}: {exc}")
            return False
        STATE.stop_requested = self._wants_stop()
        return STATE.stop_requested

    @staticmethod
    def _wants_stop() -> bool:
        if STATE.max_hits and STATE.hits >= STATE.max_hits:
            return True
        return STATE.mode == "stop"


_demangled: dict = {}


def _demangle(name: str | None) -> str | None:
    """gdb reports minimal-symbol locations by their linkage name; show what a C++ reader expects."""
    if not name or not name.startswith("_Z"):
        return name
    out = _demangled.get(name)
    if out is None:
        try:
            out = gdb.execute("demangle -l c++ -- " + name, to_string=True).strip() or name
        except gdb.error:
            out = name
        _demangled[name] = out
    return out


def _locations(bp) -> list[dict]:
    out = []
    try:
        locs = bp.locations
    except Exception:
        locs = []
    for loc in locs:
        try:
            fn = _demangle(loc.function)
        except Exception:
            fn = None
        try:
            addr = int(loc.address)
        except Exception:
            addr = None
        file = line = None
        try:
            if loc.source:
                file, line = loc.source[0], loc.source[1]
            if loc.fullname:
                file = loc.fullname
        except Exception:
            pass
        note = None
        if is_plt(fn):
            note = "plt stub: not stopped at"
        elif is_cold_clone(fn):
            note = "cold clone (a split-off part of the function)"
        out.append({"function": fn, "library": _library(addr) if addr else None, "address": addr,
                    "file": file, "line": line, "enabled": bool(loc.enabled), "note": note})
    return out


def _fix_plt(bp) -> None:
    try:
        for loc in bp.locations:
            if loc.enabled and is_plt(loc.function):
                loc.enabled = False
    except Exception:
        pass


def _on_modified(bp) -> None:
    if isinstance(bp, TraceBreakpoint):
        _fix_plt(bp)


def _mapped_base(library: str) -> int | None:
    """Where a shared library is mapped in the target (the mapping of its file offset 0)."""
    try:
        pid = gdb.selected_inferior().pid
    except Exception:
        return None
    if not pid:
        return None
    real = os.path.realpath(library)
    try:
        with open(f"/proc/{pid}/maps") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) == 6 and int(parts[2], 16) == 0 and parts[5].strip() in (library, real):
                    return int(parts[0].split("-")[0], 16)
    except OSError:
        return None
    return None


def place_address_breakpoints(event=None) -> None:
    """Set the breakpoints our index resolved (``--op``) in every library that is mapped now."""
    remaining = []
    bases: dict = {}  # one read of /proc/PID/maps per library, not per breakpoint (3,100 x 40 loads: 23 s)
    for item in STATE.address_breakpoints:
        if item["library"] not in bases:
            bases[item["library"]] = _mapped_base(item["library"])
        base = bases[item["library"]]
        if base is None:
            remaining.append(item)
            continue
        try:
            bp = TraceBreakpoint(f"*{base + int(item['offset']):#x}", label=item["label"],
                                 function=item.get("function"))
            bp.pt_library = item["library"]
            STATE.address_groups.setdefault(item["label"], []).append(bp)
        except Exception as exc:
            _warn(f"could not set a breakpoint on {item.get('function')}: {exc}")
    STATE.address_breakpoints = remaining


def dump_breakpoints() -> None:
    for label, bps in STATE.address_groups.items():
        locs = []
        for bp in bps:
            if not bp.is_valid():
                continue
            for loc in _locations(bp):
                loc["function"] = bp.pt_function or loc["function"]
                loc["library"] = getattr(bp, "pt_library", None) or loc["library"]
                locs.append(loc)
        pending = [i for i in STATE.address_breakpoints if i["label"] == label]
        _write({"type": "breakpoint", "spec": label, "number": None, "locations": locs, "hits": 0,
                "pending": bool(pending), "enabled": True})
    for spec, bp in list(STATE.breakpoints.items()):
        locs = _locations(bp) if bp.is_valid() else []
        _write({"type": "breakpoint", "spec": spec, "number": bp.number if bp.is_valid() else None,
                "locations": locs, "hits": 0, "pending": bp.pending if bp.is_valid() else True,
                "enabled": bp.enabled if bp.is_valid() else False})


def add_breakpoint(spec: str) -> None:
    spec = spec.strip()
    if not spec:
        raise gdb.GdbError("pttrace-break needs a location")
    if spec in STATE.breakpoints:
        return
    bp = TraceBreakpoint(spec)
    STATE.breakpoints[spec] = bp
    _fix_plt(bp)


class _Command(gdb.Command):
    def __init__(self, name: str, fn):
        super().__init__(name, gdb.COMMAND_USER)
        self._fn = fn

    def invoke(self, arg, from_tty):
        self._fn(arg)


def _setup(arg: str) -> None:
    with open(arg.strip(), "r", encoding="utf-8") as fh:
        cfg = json.load(fh)
    STATE.session_path = cfg["session"]
    STATE.session_fd = os.open(STATE.session_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    STATE.mode = cfg.get("mode", "record")
    STATE.max_hits = int(cfg.get("max_hits") or 0)
    STATE.max_depth = int(cfg.get("max_depth") or 256)
    STATE.hits = int(cfg.get("first_seq") or 0)
    STATE.layers = set(cfg.get("layers") or [])
    STATE.address_breakpoints = list(cfg.get("address_breakpoints") or [])
    for spec in cfg.get("breakpoints", []):
        add_breakpoint(spec)
    place_address_breakpoints()


def _mode(arg: str) -> None:
    arg = arg.strip()
    if arg not in ("record", "stop"):
        raise gdb.GdbError("pttrace-mode takes record or stop")
    STATE.mode = arg


def _delete(arg: str) -> None:
    bp = STATE.breakpoints.pop(arg.strip(), None)
    if bp is not None and bp.is_valid():
        bp.delete()


def _record_stop(arg: str) -> None:
    record_hit(None, signal=arg.strip() or None)


def _snapshot(arg: str) -> None:
    """Print the selected thread's call path as one JSON line (for stepping in stop mode)."""
    frames, truncated = call_path()
    gdb.write(json.dumps({"thread": _thread(), "frames": frames, "truncated": truncated}) + "\n")


def _status(arg: str) -> None:
    gdb.write(json.dumps({"hits": STATE.hits, "mode": STATE.mode, "need_libs": STATE.need_libs,
                          "stop": STATE.stop_requested, "write_error": STATE.write_error}) + "\n")


def _rerecord(arg: str) -> None:
    """Record the deferred hit now that the libraries it needed have symbols."""
    if STATE.pending_spec is None and not STATE.need_libs:
        return
    spec, STATE.pending_spec, STATE.need_libs = STATE.pending_spec, None, []
    _native_cache.clear()
    record_hit(spec)
    STATE.stop_requested = TraceBreakpoint._wants_stop()


_Command("pttrace-setup", _setup)
_Command("pttrace-break", add_breakpoint)
_Command("pttrace-delete", _delete)
_Command("pttrace-mode", _mode)
_Command("pttrace-dump", lambda arg: dump_breakpoints())
_Command("pttrace-record-stop", _record_stop)
_Command("pttrace-status", _status)
_Command("pttrace-snapshot", _snapshot)
_Command("pttrace-rerecord", _rerecord)
gdb.events.breakpoint_modified.connect(_on_modified)
gdb.events.new_objfile.connect(lambda event: STATE.address_breakpoints and place_address_breakpoints())
