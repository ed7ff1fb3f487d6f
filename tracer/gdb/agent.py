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
import sys
import time

import gdb  # type: ignore[import-not-found]

from tracer.classify import (classify, dispatch_key, is_cold_clone, is_plt, kernel_below_adapter,
                             short_name)
from tracer.gdb.linetable import line_ranges as _line_ranges

EVAL_FRAME = "_PyEval_EvalFrameDefault"
_ORDER = sys.byteorder  # the target's, as gdb debugs native processes only here
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
    address_stubs: dict = {}  # label -> [location] of the @plt stubs listed, not broken on
    cfi_libs: dict = {}  # library -> (its CFI-only copy, load base): gdb unwinds it, pttrace names it


STATE = _State()

# Per-pc caches: the same return addresses come back at every hit of a hot breakpoint.
_native_cache: dict = {}  # (pc, inline index) -> _NativeFrame
# The frames older than the outermost PyEval_EvalCode (the interpreter's start-up: run_mod,
# Py_RunMain, main, _start...) are the same at every hit of a thread: unwound once, then reused.
_suffix_cache: dict = {}  # (thread, pc, sp of that frame) -> (frames, return-address slots)
# The whole stack of a hit, reused while its return addresses are all still in their slots (see
# _reuse_walk): (thread, innermost pc, innermost sp) -> (frames with _EVAL for each eval frame's Python
# frames, lowest slot, bytes from there to the highest, (offset, return address) checks, eval frames).
_walk_cache: dict = {}
_tstates: dict = {}  # thread's global number -> the address of its PyThreadState
_code_cache: dict = {}
_source_cache: dict = {}
_exe_name = None


class _NativeFrame(dict):
    """A cached native frame; ``text`` keeps its JSON, encoded once (a hot hit repeats the same frames)."""

    __slots__ = ("text",)


def _frame_text(frame: dict) -> str:
    text = getattr(frame, "text", None)
    if text is None:
        text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
        if isinstance(frame, _NativeFrame):
            frame.text = text
    return text


def _write_hit(record: dict) -> None:
    """``_write`` for a hit, byte for byte, with each cached native frame's JSON reused."""
    if STATE.session_fd < 0:
        return
    if "frames" not in record:
        _write(record)
        return
    head, tail, frames = {}, {}, None
    for key, value in record.items():
        if key == "frames":
            frames = value
        elif frames is None:
            head[key] = value
        else:
            tail[key] = value
    dumps = json.dumps
    text = dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1]
    text += ',"frames":[' + ",".join([_frame_text(f) for f in frames or ()]) + "]"
    if tail:
        text += "," + dumps(tail, ensure_ascii=False, separators=(",", ":"))[1:]
    else:
        text += "}"
    try:
        data = (text + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a name that is not UTF-8: the slow path escapes it
        _write(record)
        return
    os.write(STATE.session_fd, data)


def _clear_frame_caches(*_args) -> None:
    """New or dropped symbols can rename any frame: forget every cached frame."""
    _native_cache.clear()
    _lib_bases.clear()
    _suffix_cache.clear()
    _frame_var.clear()
    _forget_walks()


def _clear_all_caches(*_args) -> None:
    """The target ended: code objects and frames of the next run are not these."""
    _clear_frame_caches()
    _code_cache.clear()
    _py_frame_cache.clear()


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


def _full_name(frame, name: str | None) -> str | None:
    """The full demangled name, with parameters, as gdb gives it for a minimal symbol: a function with
    DWARF is named by gdb without its parameters (``ns::f``); its linkage name, demangled, has them."""
    if not name:
        return name
    try:
        sym = frame.function()
        linkage = sym.linkage_name if sym is not None else None
    except Exception:
        return name
    if linkage and linkage.startswith("_Z"):
        full = _demangle(linkage)
        if full and full != linkage:
            return full
    return name


_lib_bases: dict = {}  # library -> its load base (the mapping of file offset 0), or None


def _lib_base(lib: str) -> int | None:
    cfi = STATE.cfi_libs.get(lib)
    if cfi is not None:
        return cfi[1]
    if lib not in _lib_bases:
        _lib_bases[lib] = _mapped_base(lib)
    return _lib_bases[lib]


def _native(frame, inline_index: int) -> dict:
    pc = frame.pc()
    key = (pc, inline_index)
    cached = _native_cache.get(key)
    if cached is not None:
        return cached
    try:
        name = _full_name(frame, frame.name())
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
    info = _NativeFrame({
        "kind": "native",
        "function": name,
        "short": short_name(name),
        "library": lib,
        "address": pc,
        "file": file,
        "line": line,
        "layer": classify(name, lib),
        "dispatch_key": dispatch_key(name),
    })
    if (name is None or file is None) and lib and lib != _exe_name:
        # pttrace names it from its own index (a ``fill`` record): keep where it is in its library.
        base = _lib_base(lib)
        if base is not None and pc >= base:
            info["offset"] = pc - base
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
    if isinstance(code, int):
        return None
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
            "first": first, "ident": None}
    if filename and filename.startswith("<") and not filename.startswith("<frozen "):
        # exec'd or compiled code (<string>, fx's <eval_with_key>): it can die and another code object
        # take its address. Remember what it points to, to notice that (see _still_same_code).
        info["ident"] = _code_ident(addr)
    _code_cache[addr] = info
    return info


_code_ident_spots = None  # offsets of co_filename, co_qualname, co_linetable in PyCodeObject, or False


def _code_ident(addr: int) -> bytes | None:
    """The raw pointers a code object holds to its file name, name and line table (one memory read)."""
    global _code_ident_spots
    if _code_ident_spots is None:
        try:
            fields = {f.name: f for f in _type("PyCodeObject").fields()}
            _code_ident_spots = [(fields[n].bitpos // 8, 8) for n in ("co_filename", "co_qualname", "co_linetable")]
        except Exception:
            _code_ident_spots = False
    if not _code_ident_spots:
        return None
    end = max(o + n for o, n in _code_ident_spots)
    try:
        raw = bytes(gdb.selected_inferior().read_memory(addr, end))
    except Exception:
        return None
    return b"".join(raw[o:o + n] for o, n in _code_ident_spots)


def _still_same_code(addr: int) -> bool:
    """False if the code object cached at ``addr`` was replaced by another; forgets it then.
    File-backed code lives as long as its module, so only exec'd code is checked (cheap: one read)."""
    info = _code_cache.get(addr)
    if info is None or info["ident"] is None or _code_ident(addr) == info["ident"]:
        return True
    del _code_cache[addr]
    for key in [k for k in _py_frame_cache if k[0] == addr]:
        del _py_frame_cache[key]
    return False


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


_UNKNOWN_PY = {"kind": "python", "function": None, "short": None, "library": None, "address": None,
               "file": None, "line": None, "layer": "python", "dispatch_key": None, "source": None}
_py_frame_cache: dict = {}  # (code object address, prev_instr) -> _NativeFrame of that Python frame
_iframe_layout = None  # (size, [(offset, size) of f_code, prev_instr, previous, is_entry]) or False


def _layout():
    """Where _PyInterpreterFrame keeps the four fields read per frame (one memory read a frame,
    instead of a gdb.Value per field); False if the interpreter's debug info does not say."""
    global _iframe_layout
    if _iframe_layout is None:
        try:
            t = _type("_PyInterpreterFrame")
            fields = {f.name: f for f in t.fields()}
            spots = []
            for name in ("f_code", "prev_instr", "previous", "is_entry"):
                f = fields[name]
                if f.bitpos % 8 or f.bitsize or f.type.sizeof not in (1, 2, 4, 8):
                    raise ValueError(name)
                spots.append((f.bitpos // 8, f.type.sizeof))
            _iframe_layout = (t.sizeof, spots)
        except Exception:
            _iframe_layout = False
    return _iframe_layout


def _python_frame(code_addr: int, code, prev_instr: int) -> dict:
    # Same code object, same instruction: the same frame (its line and source are read once).
    key = (code_addr, prev_instr)
    same = _still_same_code(code_addr)  # (a dict lookup, unless the code was exec'd)
    cached = _py_frame_cache.get(key) if same else None
    if cached is not None:
        return cached
    if isinstance(code, int) and code_addr not in _code_cache:  # its cached code was another's
        code = gdb.Value(code_addr).cast(_type("PyCodeObject").pointer())
    info = _code_info(code)
    if info is None:
        return dict(_UNKNOWN_PY)
    lasti = (prev_instr - info["start"]) // 2
    line = _line_of(info, lasti) if lasti >= 0 else info["first"]
    cached = _py_frame_cache[key] = _NativeFrame({
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
    return cached


_frame_var: dict = {}  # eval frame pc -> "frame" or "cframe": where its _PyInterpreterFrame is readable


def _current_iframe(frame):
    """The eval frame's current _PyInterpreterFrame pointer (a gdb.Value)."""
    pc = frame.pc()
    if _frame_var.get(pc) != "cframe":
        iframe = frame.read_var("frame")
        if not iframe.is_optimized_out:
            _frame_var[pc] = "frame"
            return iframe
        _frame_var[pc] = "cframe"  # optimized out at this pc: it is so at every stop here
    return frame.read_var("cframe")["current_frame"]


def _python_frames(frame) -> list[dict] | None:
    """The Python frames one C-level eval frame runs, innermost first; None if unreadable."""
    try:
        iframe = _current_iframe(frame)
        addr = int(iframe)
    except Exception:
        return None
    layout = _layout()
    if not layout:
        return _python_frames_by_value(iframe)
    size, ((o_code, s_code), (o_instr, s_instr), (o_prev, s_prev), (o_entry, s_entry)) = layout
    code_ptr = _type("PyCodeObject").pointer()
    read = gdb.selected_inferior().read_memory
    out = []
    seen = 0
    try:
        while addr and seen < STATE.max_depth:
            seen += 1
            raw = bytes(read(addr, size))
            code_addr = int.from_bytes(raw[o_code:o_code + s_code], _ORDER)
            code = gdb.Value(code_addr).cast(code_ptr) if code_addr not in _code_cache else code_addr
            out.append(_python_frame(code_addr, code, int.from_bytes(raw[o_instr:o_instr + s_instr], _ORDER)))
            if int.from_bytes(raw[o_entry:o_entry + s_entry], _ORDER):
                break
            addr = int.from_bytes(raw[o_prev:o_prev + s_prev], _ORDER)
    except Exception:
        if not out:
            return None
    return out


def _python_frames_by_value(iframe) -> list[dict] | None:
    """``_python_frames`` through gdb.Values (when the frame layout cannot be read from debug info)."""
    out = []
    seen = 0
    try:
        while int(iframe) and seen < STATE.max_depth:
            seen += 1
            f = iframe.dereference()
            code = f["f_code"]
            out.append(_python_frame(int(code), code, int(f["prev_instr"])))
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
ANCHOR = "PyEval_EvalCode"  # the interpreter runs the main module from here: only C start-up below
_SLOT = 8  # bytes of a return address on the stack (x86-64 and aarch64)


def _suffix_slots(frames: list):
    """Where the return addresses of these older frames sit on the stack, and their values.

    A frame's pc is the return address its callee pushed just below the frame's sp (x86-64; on
    other machines the check below fails and the suffix is simply not reused)."""
    slots = []
    for f in frames:
        try:
            slots.append((int(f.read_register("sp")) - _SLOT, f.pc()))
        except Exception:
            return None
    if not slots:
        return None
    lo = min(a for a, _ in slots)
    hi = max(a for a, _ in slots) + _SLOT
    if hi - lo > 1 << 16:
        return None
    return lo, hi - lo, tuple((a - lo, pc.to_bytes(_SLOT, _ORDER)) for a, pc in slots)


def _suffix_still_valid(slots) -> bool:
    """Every return address of the cached suffix is still in its slot: the same callers, live."""
    lo, size, checks = slots
    try:
        mem = bytes(gdb.selected_inferior().read_memory(lo, size))
    except Exception:
        return False
    return all(mem[off:off + _SLOT] == want for off, want in checks)


# --------------------------------------------------------------------------------------------
# Whole-stack reuse: a hot breakpoint stops on the same stack again and again
# --------------------------------------------------------------------------------------------
# A hit whose innermost frame has the pc and sp of a hit walked before, and whose every native
# frame's return address is still in its stack slot (one read of the stack), has the native frames
# of that walk: gdb would unwind the same pcs at the same stack addresses. Its Python frames are read
# afresh, from the thread's PyThreadState (cframe->current_frame, then ``previous``): the chain splits
# at ``is_entry`` into one group per C-level eval frame, innermost first.
_EVAL = object()  # a walk's place for the Python frames of one eval frame
_MAX_STACK_READ = 256 << 10
_MAX_WALKS = 4096
_MAX_THREADS = 4096
_MAX_INTERPRETERS = 64
_TAILCALL = getattr(gdb, "TAILCALL_FRAME", -1)


class _Reuse:
    enabled = os.environ.get("PTTRACE_NO_STACK_REUSE") != "1"
    stats_path = os.environ.get("PTTRACE_STACK_REUSE_STATS") or None  # tests: where the counters go
    reused = 0  # hits recorded from a cached walk
    walked = 0  # hits walked with gdb (the first of a stack, or a failed check)
    rejected = 0  # cached walks found stale at a hit
    runtime = None  # offsets and addresses to find a thread's PyThreadState; False: not readable


def _forget_walks() -> None:
    _walk_cache.clear()
    _tstates.clear()
    _Reuse.runtime = None


def _runtime_layout():
    """Offsets of the fields read to find a thread's current Python frame, from the interpreter's
    debug info; False if any is missing (then hits are walked by gdb, as without reuse)."""
    if _Reuse.runtime is None:
        try:
            ts = {f.name: f for f in _type("PyThreadState").fields()}
            cf = {f.name: f for f in _type("_PyCFrame").fields()}
            interp = {f.name: f for f in _type("PyInterpreterState").fields()}
            threads = {f.name: f for f in interp["threads"].type.fields()}
            spots = {}
            for name, field in (("ts_next", ts["next"]), ("ts_native", ts["native_thread_id"]),
                                ("ts_cframe", ts["cframe"]), ("cf_current", cf["current_frame"]),
                                ("is_next", interp["next"])):
                if field.bitpos % 8 or field.bitsize or field.type.sizeof != 8:
                    raise ValueError(name)
                spots[name] = field.bitpos // 8
            head = threads["head"]
            if interp["threads"].bitpos % 8 or head.bitpos % 8 or head.type.sizeof != 8:
                raise ValueError("threads.head")
            spots["is_threads"] = interp["threads"].bitpos // 8 + head.bitpos // 8
            spots["interpreters"] = int(gdb.parse_and_eval("&_PyRuntime.interpreters.head"))
            lo = min(spots["ts_next"], spots["ts_native"], spots["ts_cframe"])
            spots["ts_lo"] = lo
            spots["ts_size"] = max(spots["ts_next"], spots["ts_native"], spots["ts_cframe"]) + 8 - lo
            _Reuse.runtime = spots
        except Exception:
            _Reuse.runtime = False
    return _Reuse.runtime


def _u64(raw: bytes, off: int) -> int:
    return int.from_bytes(raw[off:off + 8], _ORDER)


def _find_tstate(rt: dict, lwp: int, read) -> int | None:
    """The PyThreadState of the thread with this LWP (native_thread_id), held by the GIL or not."""
    lo, size = rt["ts_lo"], rt["ts_size"]
    interp = _u64(bytes(read(rt["interpreters"], 8)), 0)
    seen = 0
    for _ in range(_MAX_INTERPRETERS):
        if not interp:
            return None
        ts = _u64(bytes(read(interp + rt["is_threads"], 8)), 0)
        while ts and seen < _MAX_THREADS:
            seen += 1
            raw = bytes(read(ts + lo, size))
            if _u64(raw, rt["ts_native"] - lo) == lwp:
                return ts
            ts = _u64(raw, rt["ts_next"] - lo)
        interp = _u64(bytes(read(interp + rt["is_next"], 8)), 0)
    return None


def _python_groups(thread, walk, mem: bytes, read) -> list | None:
    """The Python frames of each eval frame of ``walk``, innermost first; None if they cannot be read
    the way the walk needs them (then the hit is walked by gdb)."""
    rt = _runtime_layout()
    layout = _layout()
    if not rt or not layout:
        return None
    lwp = thread.ptid[1]
    if not lwp:
        return None
    lo, size = rt["ts_lo"], rt["ts_size"]
    stack_lo, stack_hi = walk[1], walk[1] + walk[2]
    cframe = None
    for attempt in (0, 1):
        ts = _tstates.get(thread.global_num) if attempt == 0 else None
        if ts is None:
            if attempt == 0:
                continue
            ts = _find_tstate(rt, lwp, read)
            if ts is None:
                return None
            if len(_tstates) >= _MAX_THREADS:
                _tstates.clear()
            _tstates[thread.global_num] = ts
        raw = bytes(read(ts + lo, size))
        cframe = _u64(raw, rt["ts_cframe"] - lo)
        # Its own thread's, and running Python on this stack: the innermost eval frame's _PyCFrame is a
        # local of that frame, between the innermost frame and the outermost return address.
        if _u64(raw, rt["ts_native"] - lo) == lwp and stack_lo <= cframe < stack_hi:
            break
        cframe = None
    if cframe is None:
        return None
    at = cframe + rt["cf_current"] - stack_lo
    if at + 8 <= len(mem):
        addr = _u64(mem, at)
    else:
        addr = _u64(bytes(read(cframe + rt["cf_current"], 8)), 0)
    size_f, ((o_code, s_code), (o_instr, s_instr), (o_prev, s_prev), (o_entry, s_entry)) = layout
    code_ptr = None
    want = walk[4]
    groups: list = []
    group: list = []
    budget = STATE.max_depth
    while len(groups) < want:
        if not addr or budget <= 0:
            return None  # fewer activations than eval frames, or deeper than recorded: walk it
        budget -= 1
        raw = bytes(read(addr, size_f))
        code_addr = int.from_bytes(raw[o_code:o_code + s_code], _ORDER)
        if code_addr in _code_cache:
            code = code_addr
        else:
            if code_ptr is None:
                code_ptr = _type("PyCodeObject").pointer()
            code = gdb.Value(code_addr).cast(code_ptr)
        group.append(_python_frame(code_addr, code, int.from_bytes(raw[o_instr:o_instr + s_instr], _ORDER)))
        if int.from_bytes(raw[o_entry:o_entry + s_entry], _ORDER):
            groups.append(group)
            group = []
        addr = int.from_bytes(raw[o_prev:o_prev + s_prev], _ORDER)
    return groups


def _keep_walk(key, entries: list) -> None:
    """Cache a complete walk: its frames (``_EVAL`` for each eval frame's Python frames) and the
    return-address slots that must be unchanged for it to be reused."""
    items = [e[0] for e in entries]
    slots = [e[1] for e in entries if e[1] is not None]
    if not slots:
        return
    lo = min(a for a, _ in slots)
    hi = max(a for a, _ in slots) + _SLOT
    if hi - lo > _MAX_STACK_READ:
        return
    checks = tuple(sorted({(a - lo, want) for a, want in slots}))
    if len(_walk_cache) >= _MAX_WALKS:
        _walk_cache.clear()
    _walk_cache[key] = (items, lo, hi - lo, checks, sum(1 for i in items if i is _EVAL))


def _reuse_walk(walk, thread) -> list | None:
    """The frames of this hit (innermost first, not cut at max_depth) from a cached walk, or None if
    the stack is not that walk's any more."""
    items, lo, size, checks, n_eval = walk
    read = gdb.selected_inferior().read_memory
    try:
        mem = bytes(read(lo, size))
        for off, want in checks:
            if mem[off:off + _SLOT] != want:
                return None
        groups = _python_groups(thread, walk, mem, read) if n_eval else ()
    except Exception:
        return None
    if groups is None:
        return None
    if not n_eval:
        return list(items)
    out: list = []
    it = iter(groups)
    for item in items:
        if item is _EVAL:
            out.extend(next(it))
        else:
            out.append(item)
    return out


def _write_reuse_stats() -> None:
    try:
        with open(_Reuse.stats_path, "w", encoding="utf-8") as fh:
            json.dump({"reused": _Reuse.reused, "walked": _Reuse.walked, "rejected": _Reuse.rejected}, fh)
    except OSError:
        pass


def call_path(newest=None) -> tuple[list[dict], bool]:
    """Frames of the selected thread, outermost first, and whether the walk was cut at max_depth.
    ``newest``: gdb.newest_frame(), when the caller has it already (asking again costs a lookup)."""
    py = _check_python()
    try:
        f = newest if newest is not None and newest.is_valid() else gdb.newest_frame()
    except gdb.error:
        return [], False
    key = None
    if _Reuse.enabled:
        try:
            thread = gdb.selected_thread()
            key = (thread.global_num, f.pc(), int(f.read_register("sp")))
        except Exception:
            key = None
        walk = _walk_cache.get(key) if key is not None else None
        if walk is not None:
            frames = _reuse_walk(walk, thread)
            if frames is not None:
                _Reuse.reused += 1
                truncated = len(frames) > STATE.max_depth
                if truncated:
                    del frames[STATE.max_depth:]
                frames.reverse()
                return frames, truncated
            _Reuse.rejected += 1
            del _walk_cache[key]
        _Reuse.walked += 1
    frames, truncated, entries = _walk(f, py, key is not None)
    if entries is not None and not truncated:
        _keep_walk(key, entries)
    frames.reverse()
    return frames, truncated


def _walk(f, py: bool, collect: bool):
    """Unwind with gdb from ``f``: frames innermost first, whether cut at max_depth, and (``collect``)
    the entries of _keep_walk, or None if this walk cannot be reused (incomplete, an unreadable eval
    frame, a frame that is not a plain call such as a signal or tail-call frame)."""
    frames: list[dict] = []
    max_depth = STATE.max_depth
    last_pc = None
    inline_index = 0
    truncated = False
    anchor_key = None  # the outermost PyEval_EvalCode met so far: (key, index in frames)
    suffix_gdb: list = []  # the gdb frames after it, for the cache's stack check
    complete = False
    entries: list | None = [] if collect else None
    prev_inline = True  # frame 0's return address is not on the stack (nor that of frames inlined in it)
    while f is not None:
        if len(frames) >= max_depth:
            truncated = True
            break
        try:
            pc = f.pc()
        except Exception:
            break
        inline_index = inline_index + 1 if pc == last_pc else 0
        last_pc = pc
        native = _native(f, inline_index)  # cached per pc: no symbol lookup for frames seen before
        name = native["function"]
        slot = None
        if entries is not None:
            # A frame whose caller is a plain call has its pc in the slot below its sp. gdb makes up
            # an inlined frame (same pc and sp as the frame it is inlined in) and a tail-call frame
            # (from the DWARF call sites at the pcs around it: nothing on the stack) from their
            # neighbours; any other kind (a signal frame) is not reused.
            try:
                ftype = f.type()
                if ftype == _TAILCALL:
                    prev_inline = False
                elif ftype not in (gdb.NORMAL_FRAME, gdb.INLINE_FRAME):
                    entries = None
                else:
                    if not prev_inline:
                        slot = (int(f.read_register("sp")) - _SLOT, pc.to_bytes(_SLOT, _ORDER))
                    prev_inline = ftype == gdb.INLINE_FRAME
            except Exception:
                entries = None
        if name == EVAL_FRAME and py and not native.get("inlined"):
            pyframes = _python_frames(f)
            if pyframes:
                if entries is not None:
                    entries.append((_EVAL, slot))
                room = max_depth - len(frames)
                if len(pyframes) > room:
                    frames.extend(pyframes[:room])
                    truncated = True
                    break
                frames.extend(pyframes)
            else:
                frames.append(native)
                entries = None
            anchor_key = None  # Python runs below the last anchor: it was not the outermost
        else:
            frames.append(native)
            if entries is not None:
                entries.append((native, slot))
            if anchor_key is not None:
                suffix_gdb.append(f)
        if name == ANCHOR and not native.get("inlined"):
            # Its callers are C start-up frames, the same at every hit as long as this activation
            # (same thread, pc and stack address) is live: reuse them instead of unwinding again.
            try:
                key = (gdb.selected_thread().global_num, pc, int(f.read_register("sp")))
            except Exception:
                key = None
            cached = _suffix_cache.get(key) if key is not None else None
            if cached is not None and _suffix_still_valid(cached[1]):
                suffix = cached[0]
                room = max_depth - len(frames)
                if len(suffix) > room:
                    frames.extend(suffix[:room])
                    truncated = True
                else:
                    frames.extend(suffix)
                    if entries is not None:
                        lo, _size, checks = cached[1]
                        if len(checks) == len(suffix):
                            entries.extend((x, (lo + off, want)) for x, (off, want) in zip(suffix, checks))
                        else:
                            entries = None
                        complete = True
                break
            anchor_key = (key, len(frames)) if key is not None else None
            suffix_gdb = []
        try:
            f = f.older()
        except gdb.error:
            _warn("gdb could not unwind past some frames; the outermost frames of those stacks are missing")
            break
    else:
        complete = True
        if anchor_key is not None and suffix_gdb:
            key, start = anchor_key
            if all(x["kind"] == "native" and x["function"] not in (EVAL_FRAME, ANCHOR) for x in frames[start:]):
                slots = _suffix_slots(suffix_gdb)
                if slots is not None:
                    _suffix_cache[key] = (frames[start:], slots)
    return frames, truncated, (entries if complete and not truncated else None)


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
            if f["library"] in STATE.cfi_libs:
                continue  # unwound from its CFI-only copy; pttrace names its frames (a fill record)
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


def _kernels_by_caller(frames: list) -> None:
    """A frame the classifier left as runtime but that a boxing adapter calls is the kernel it wraps
    (a TORCH_LIBRARY kernel has a name of its own): relabel it, in a copy (cached frames are shared)."""
    for i in range(1, len(frames)):
        f = frames[i]
        if f["layer"] == "runtime" and f["kind"] == "native" and kernel_below_adapter("runtime", frames[i - 1]["function"]):
            frames[i] = dict(f, layer="kernel")


def record_hit(spec: str | None, signal: str | None = None, allow_defer: bool = False,
               keyset: int | None = None, newest=None) -> bool:
    """Record the current stack; returns False if deferred until missing symbols are loaded."""
    frames, truncated = call_path(newest)
    _kernels_by_caller(frames)
    if keyset is not None and frames:
        frames[-1] = dict(frames[-1], keyset=keyset)
    if allow_defer:
        missing = _missing_symbols(frames)
        if missing:
            STATE.need_libs = missing
            STATE.pending_spec = spec
            for key in [k for k, v in _native_cache.items() if v.get("library") in missing]:
                del _native_cache[key]
            _suffix_cache.clear()
            _walk_cache.clear()
            return False
    STATE.hits += 1
    rec = {"type": "hit", "seq": STATE.hits, "breakpoint": spec, "thread": _thread(), "time": time.time(),
           "frames": frames}
    if truncated:
        rec["truncated"] = True
    if signal:
        rec["signal"] = signal
    _write_hit(rec)
    if _Reuse.stats_path:
        _write_reuse_stats()
    return True


# --------------------------------------------------------------------------------------------
# Breakpoints
# --------------------------------------------------------------------------------------------
def _called_by_adapter(frame, info: dict) -> bool:
    """Whether the stopped frame is a kernel known by its caller (see _kernels_by_caller)."""
    if frame is None or info.get("layer") != "runtime":
        return False
    try:
        caller = frame.older()
        return caller is not None and kernel_below_adapter("runtime", _native(caller, 0)["function"])
    except Exception:
        return False


class TraceBreakpoint(gdb.Breakpoint):
    """Records the call path at each hit and lets the target run on (or stops, in stop mode)."""

    def __init__(self, spec: str, label: str | None = None, function: str | None = None):
        super().__init__(spec, type=gdb.BP_BREAKPOINT, internal=False)
        self.pt_spec = label or spec
        self.pt_function = function  # for address breakpoints: the symbol our index resolved

    pt_layer = None  # an --op adapter with its kernel inlined: the kernel's layer, for --layer

    def stop(self) -> bool:
        try:
            newest = gdb.newest_frame()
            innermost = _native(newest, 0)
        except Exception:
            newest, innermost = None, {"function": None, "layer": None}
        name = innermost["function"]
        if name is None and self.pt_function:
            # An address breakpoint in a library gdb has no names for (a CFI-only copy): the function
            # our index resolved, for --layer and the DispatchKeySet read below.
            name = self.pt_function
            innermost = dict(innermost, function=name, layer=classify(name, innermost.get("library")))
        if is_plt(name):
            return False  # a stub in another library, not the function itself
        if STATE.layers and innermost["layer"] not in STATE.layers and self.pt_layer not in STATE.layers \
                and not ("kernel" in STATE.layers and _called_by_adapter(newest, innermost)):
            return False  # --layer: only hits whose innermost frame is in these layers
        keyset = _entry_keyset(newest, name)
        STATE.need_libs = []
        try:
            if not record_hit(self.pt_spec, allow_defer=True, keyset=keyset, newest=newest):
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
        if item.get("plt"):
            # A stub calling the function from another library: listed, never stopped at (as gdb's
            # named breakpoints do with their @plt locations).
            STATE.address_stubs.setdefault(item["label"], []).append({
                "function": (item.get("function") or "") + "@plt", "library": item["library"],
                "address": base + int(item["offset"]), "file": None, "line": None, "enabled": False,
                "note": "plt stub: not stopped at"})
            continue
        try:
            bp = TraceBreakpoint(f"*{base + int(item['offset']):#x}", label=item["label"],
                                 function=item.get("function"))
            bp.pt_library = item["library"]
            bp.pt_layer = item.get("layer")
            STATE.address_groups.setdefault(item["label"], []).append(bp)
        except Exception as exc:
            _warn(f"could not set a breakpoint on {item.get('function')}: {exc}")
    STATE.address_breakpoints = remaining


def dump_breakpoints() -> None:
    labels = list(STATE.address_groups)
    labels += [lb for lb in dict.fromkeys(i["label"] for i in STATE.address_breakpoints) if lb not in labels]
    for label in labels:
        bps = STATE.address_groups.get(label, [])
        locs = []
        for bp in bps:
            if not bp.is_valid():
                continue
            for loc in _locations(bp):
                loc["function"] = bp.pt_function or loc["function"]
                loc["library"] = getattr(bp, "pt_library", None) or loc["library"]
                locs.append(loc)
        locs += STATE.address_stubs.get(label, [])
        pending = [i for i in STATE.address_breakpoints if i["label"] == label and not i.get("plt")]
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
    spec = arg.strip()
    bp = STATE.breakpoints.pop(spec, None)
    if bp is not None and bp.is_valid():
        bp.delete()
    for bp in STATE.address_groups.pop(spec, []):  # a --break resolved by address, or an --op
        if bp.is_valid():
            bp.delete()
    STATE.address_stubs.pop(spec, None)
    STATE.address_breakpoints = [i for i in STATE.address_breakpoints if i["label"] != spec]


def _gdb_path_arg(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"' if any(c in path for c in ' \t"\'\\') else path


def _cfi_add(arg: str) -> None:
    """``pttrace-cfi-add {"library": L, "copy": C}``: give gdb L's CFI-only copy at L's load base
    instead of L's symbols. Its frames are unwound by gdb and named by pttrace (fill records)."""
    req = json.loads(arg)
    lib, copy = req["library"], req["copy"]
    base = _mapped_base(lib)
    if base is None:
        raise gdb.GdbError(f"{lib} is not mapped in the target")
    gdb.execute(f"add-symbol-file {_gdb_path_arg(copy)} -o {base:#x}", to_string=True)
    STATE.cfi_libs[lib] = (copy, base)
    real = os.path.realpath(lib)
    if real != lib:
        STATE.cfi_libs[real] = (copy, base)
    _clear_frame_caches()
    gdb.write(json.dumps({"base": base}) + "\n")


def _cfi_drop(arg: str) -> None:
    """``pttrace-cfi-drop LIBRARY``: take the CFI-only copy away (its full symbols are loaded next)."""
    lib = arg.strip()
    entry = None
    for name in (lib, os.path.realpath(lib)):
        entry = STATE.cfi_libs.pop(name, None) or entry
    if entry is not None:
        try:
            gdb.execute(f"remove-symbol-file {_gdb_path_arg(entry[0])}", to_string=True)
        except gdb.error:
            pass
    _clear_frame_caches()


def _record_stop(arg: str) -> None:
    record_hit(None, signal=arg.strip() or None)


def _snapshot(arg: str) -> None:
    """Print the selected thread's call path as one JSON line (for stepping in stop mode)."""
    frames, truncated = call_path()
    gdb.write(json.dumps({"thread": _thread(), "frames": frames, "truncated": truncated}) + "\n")


def _status(arg: str) -> None:
    gdb.write(json.dumps({"hits": STATE.hits, "mode": STATE.mode, "need_libs": STATE.need_libs,
                          "stop": STATE.stop_requested, "write_error": STATE.write_error,
                          "stack_reuse": {"enabled": _Reuse.enabled, "reused": _Reuse.reused,
                                          "walked": _Reuse.walked, "rejected": _Reuse.rejected}}) + "\n")


def _rerecord(arg: str) -> None:
    """Record the deferred hit now that the libraries it needed have symbols."""
    if STATE.pending_spec is None and not STATE.need_libs:
        return
    spec, STATE.pending_spec, STATE.need_libs = STATE.pending_spec, None, []
    _clear_frame_caches()
    record_hit(spec)
    STATE.stop_requested = TraceBreakpoint._wants_stop()


# --------------------------------------------------------------------------------------------
# gdb's search for Python frame unwinders
# --------------------------------------------------------------------------------------------
class _UnwinderGate:
    """gdb calls ``gdb._execute_unwinders`` for every frame it unwinds, and that walks every objfile
    (~70 with torch) for Python unwinders; none is registered here, so answer "none" at once while
    that stays true. Which objfiles have unwinders is recomputed whenever objfiles come or go, an
    unwinder is registered, or gdb's frame cache is flushed."""

    def __init__(self) -> None:
        self.original = gdb._execute_unwinders
        self.with_unwinders = None  # objfiles holding unwinders; None: to be recomputed

    def invalidate(self, *_args) -> None:
        self.with_unwinders = None

    def __call__(self, pending_frame):
        objfiles = self.with_unwinders
        if objfiles is None:
            objfiles = self.with_unwinders = [o for o in gdb.objfiles() if o.frame_unwinders]
        if objfiles or gdb.frame_unwinders or gdb.current_progspace().frame_unwinders:
            return self.original(pending_frame)
        return None

    def install(self) -> None:
        if type(getattr(gdb._execute_unwinders, "__self__", None)).__name__ == "_UnwinderGate":
            return  # the agent was imported twice
        for event in ("new_objfile", "free_objfile", "clear_objfiles"):
            registry = getattr(gdb.events, event, None)
            if registry is not None:
                registry.connect(self.invalidate)
        try:
            import gdb.unwinder as unwinder_module
        except ImportError:
            unwinder_module = None
        if unwinder_module is not None:
            register = unwinder_module.register_unwinder

            def register_unwinder(locus, unwinder, replace=False):
                self.invalidate()
                return register(locus, unwinder, replace)

            unwinder_module.register_unwinder = register_unwinder
        invalidate_frames = gdb.invalidate_cached_frames

        def invalidate_cached_frames():
            self.invalidate()
            return invalidate_frames()

        gdb.invalidate_cached_frames = invalidate_cached_frames
        gdb._execute_unwinders = self.__call__


if hasattr(gdb, "_execute_unwinders"):
    _UnwinderGate().install()

_Command("pttrace-setup", _setup)
_Command("pttrace-break", add_breakpoint)
_Command("pttrace-delete", _delete)
_Command("pttrace-mode", _mode)
_Command("pttrace-dump", lambda arg: dump_breakpoints())
_Command("pttrace-record-stop", _record_stop)
_Command("pttrace-status", _status)
_Command("pttrace-snapshot", _snapshot)
_Command("pttrace-rerecord", _rerecord)
_Command("pttrace-cfi-add", _cfi_add)
_Command("pttrace-cfi-drop", _cfi_drop)
gdb.events.breakpoint_modified.connect(_on_modified)
gdb.events.new_objfile.connect(lambda event: STATE.address_breakpoints and place_address_breakpoints())
for _event in ("new_objfile", "free_objfile", "clear_objfiles"):
    if getattr(gdb.events, _event, None) is not None:
        getattr(gdb.events, _event).connect(_clear_frame_caches)
gdb.events.exited.connect(_clear_all_caches)
