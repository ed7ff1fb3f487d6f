"""CPython's frames, read from the target: the one reader of the interpreter-frame chain.

CPython 3.11 runs Python frames as ``_PyInterpreterFrame``s linked by ``previous``, several per C-level
``_PyEval_EvalFrameDefault`` call: the outermost one a C call runs has ``is_entry`` set. A thread's
innermost one is ``tstate->cframe->current_frame``; an eval frame's is its local ``frame`` (or
``cframe.current_frame`` where that is optimized out). Field offsets come from the interpreter's
debug info. Every read is untrusted: what cannot be read is left out, never guessed.

Where a second reader plugs in: the stack walk asks only ``FRAMES.available()``,
``FRAMES.eval_frame(gdb_frame)`` and ``FRAMES.thread_groups(lwp, thread_key, stack, count)``; all three
end in ``chain(iframe, groups, strict)``, the walk of the ``previous`` links. A reader of another layout
(3.12+, or no debug info, issue #13) replaces ``_FrameFields`` (where a frame's code, instruction,
previous and entry flag are) and ``_RuntimeLayout`` (thread state -> innermost frame), or the whole
object, keeping those three calls.
"""
from __future__ import annotations

import sys

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.log import LOG
from tracer.gdb.agent.pycode import UNKNOWN, CodeInfo, SourceLines, exec_code, frame_record
from tracer.gdb.agent.session import OUT
from tracer.gdb.agent.state import CACHES, STATE

_ORDER = sys.byteorder  # the target's, as gdb debugs native processes only here
_MAX_THREADS = 4096
_MAX_INTERPRETERS = 64
_MAX_STR = 1 << 16
_MAX_BYTES = 1 << 22

_types: dict = {}


def _type(name: str):
    t = _types.get(name)
    if t is None:
        t = gdb.lookup_type(name)
        _types[name] = t
    return t


def _u64(raw: bytes, off: int) -> int:
    return int.from_bytes(raw[off:off + 8], _ORDER)


def _read_str(obj) -> str | None:
    """Read a str object's text from the target (compact ASCII and compact UCS1/2/4)."""
    try:
        addr = int(obj)
        if not addr:
            return None
        ascii_t = _type("PyASCIIObject")
        a = obj.cast(ascii_t.pointer()).dereference()
        length = int(a["length"])
        if length < 0 or length > _MAX_STR:
            return None
        state = a["state"]
        if not int(state["compact"]):
            return None
        kind = int(state["kind"])
        inf = gdb.selected_inferior()
        if int(state["ascii"]):
            return bytes(inf.read_memory(addr + ascii_t.sizeof, length)).decode("ascii", "replace")
        raw = bytes(inf.read_memory(addr + _type("PyCompactUnicodeObject").sizeof, length * kind))
    except READ_ERRORS:
        return None
    enc = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}.get(kind)
    return raw.decode(enc, "replace") if enc else None


def _read_bytes(obj) -> bytes | None:
    try:
        b = obj.cast(_type("PyBytesObject").pointer()).dereference()
        size = int(b["ob_base"]["ob_size"])
        if size < 0 or size > _MAX_BYTES:
            return None
        return bytes(gdb.selected_inferior().read_memory(b["ob_sval"].address, size))
    except READ_ERRORS:
        return None


class _FrameFields:
    """Where ``_PyInterpreterFrame`` keeps the four fields read per frame: one memory read a frame
    instead of a gdb.Value per field; read through gdb.Values when the debug info does not say."""

    def __init__(self) -> None:
        self.layout = None  # (size, offsets and sizes of f_code, prev_instr, previous, is_entry); False: by value

    def reader(self):
        """A function: frame address -> (code address, instruction address, previous, is_entry)."""
        if self.layout is None:
            try:
                t = _type("_PyInterpreterFrame")
                fields = {f.name: f for f in t.fields()}
                spots = []
                for name in ("f_code", "prev_instr", "previous", "is_entry"):
                    f = fields[name]
                    if f.bitpos % 8 or f.bitsize or f.type.sizeof not in (1, 2, 4, 8):
                        raise ValueError(name)
                    spots.append((f.bitpos // 8, f.type.sizeof))
                self.layout = (t.sizeof, spots)
            except (KeyError, TypeError, *READ_ERRORS):
                self.layout = False
        if not self.layout:
            return _fields_by_value
        size, ((o_code, s_code), (o_instr, s_instr), (o_prev, s_prev), (o_entry, s_entry)) = self.layout
        read = gdb.selected_inferior().read_memory
        order = _ORDER

        def fields(addr: int) -> tuple[int, int, int, int]:
            raw = bytes(read(addr, size))
            return (int.from_bytes(raw[o_code:o_code + s_code], order),
                    int.from_bytes(raw[o_instr:o_instr + s_instr], order),
                    int.from_bytes(raw[o_prev:o_prev + s_prev], order),
                    int.from_bytes(raw[o_entry:o_entry + s_entry], order))
        return fields


def _fields_by_value(addr: int) -> tuple[int, int, int, int]:
    f = gdb.Value(addr).cast(_type("_PyInterpreterFrame").pointer()).dereference()
    return int(f["f_code"]), int(f["prev_instr"]), int(f["previous"]), int(f["is_entry"])


class _RuntimeLayout:
    """Offsets of the fields read to find a thread's current Python frame, from the interpreter's debug
    info (``CACHES.runtime``: the address of ``_PyRuntime`` changes with the target); False if any is
    missing (then hits are walked by gdb, as without reuse)."""

    @staticmethod
    def get():
        if CACHES.runtime is None:
            try:
                CACHES.runtime = _RuntimeLayout._read()
            except (KeyError, TypeError, *READ_ERRORS) as exc:
                LOG.info("thread states are not readable (%s): every hit is walked by gdb", exc)
                CACHES.runtime = False
        return CACHES.runtime

    @staticmethod
    def _read() -> dict:
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
        return spots


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


class CPythonFrames:
    def __init__(self) -> None:
        self.ok: bool | None = None  # None: not checked yet; False: the interpreter has no debug info
        self.fields = _FrameFields()
        self.sources = SourceLines()
        self._ident_spots = None  # offsets of co_filename, co_qualname, co_linetable in PyCodeObject, or False

    def available(self) -> bool:
        if self.ok is None:
            try:
                _type("_PyInterpreterFrame")
                _type("PyASCIIObject")
                self.ok = True
            except READ_ERRORS:
                self.ok = False
                OUT.warn("the Python interpreter has no debug information (or is not CPython 3.11+): "
                         "Python frames are not shown, native frames are")
        return self.ok

    # --- code objects ---------------------------------------------------------------------------
    def _code_ident(self, addr: int) -> bytes | None:
        """The raw pointers a code object holds to its file name, name and line table (one memory read)."""
        if self._ident_spots is None:
            try:
                fields = {f.name: f for f in _type("PyCodeObject").fields()}
                self._ident_spots = [(fields[n].bitpos // 8, 8) for n in ("co_filename", "co_qualname", "co_linetable")]
            except (KeyError, TypeError, *READ_ERRORS):
                self._ident_spots = False
        if not self._ident_spots:
            return None
        end = max(o + n for o, n in self._ident_spots)
        try:
            raw = bytes(gdb.selected_inferior().read_memory(addr, end))
        except READ_ERRORS:
            return None
        return b"".join(raw[o:o + n] for o, n in self._ident_spots)

    def _code_info(self, addr: int) -> CodeInfo | None:
        info = CACHES.code.get(addr)
        if info is not None:
            return info
        try:
            c = gdb.Value(addr).cast(_type("PyCodeObject").pointer()).dereference()
            filename = _read_str(c["co_filename"])
            name = _read_str(c["co_qualname"]) or _read_str(c["co_name"])
            first = int(c["co_firstlineno"])
            table = _read_bytes(c["co_linetable"]) or b""
            start = int(c["co_code_adaptive"].address)
        except READ_ERRORS:
            return None
        ident = self._code_ident(addr) if exec_code(filename) else None
        info = CACHES.code[addr] = CodeInfo.read(filename, name, first, start, table, ident)
        return info

    def _still_same_code(self, addr: int) -> bool:
        """False if the code object cached at ``addr`` was replaced by another; forgets it then.
        Only exec'd code is checked (cheap: one read)."""
        info = CACHES.code.get(addr)
        if info is None or info.ident is None or self._code_ident(addr) == info.ident:
            return True
        del CACHES.code[addr]
        for key in [k for k in CACHES.py_frames if k[0] == addr]:
            del CACHES.py_frames[key]
        return False

    def _frame(self, code_addr: int, instr: int) -> dict:
        # Same code object, same instruction: the same frame (its line and source are read once).
        key = (code_addr, instr)
        cached = CACHES.py_frames.get(key) if self._still_same_code(code_addr) else None
        if cached is not None:
            return cached
        info = self._code_info(code_addr)
        if info is None:
            return dict(UNKNOWN)
        cached = CACHES.py_frames[key] = frame_record(info, instr, self.sources)
        return cached

    # --- the chain --------------------------------------------------------------------------------
    def chain(self, iframe: int, groups: int, strict: bool) -> list[list[dict]] | None:
        """The Python frames from the interpreter frame at ``iframe`` outwards, innermost first, cut
        after each entry frame into at most ``groups`` groups (one per C eval frame). ``strict``: None
        unless all of them were read (else what was read, or None if nothing)."""
        fields = self.fields.reader()
        out: list[list[dict]] = []
        group: list[dict] = []
        budget = STATE.max_depth
        addr = iframe
        try:
            while len(out) < groups:
                if not addr or budget <= 0:
                    if strict:
                        return None  # fewer activations than eval frames, or deeper than recorded
                    break
                budget -= 1
                code_addr, instr, previous, entry = fields(addr)
                group.append(self._frame(code_addr, instr))
                if entry:
                    out.append(group)
                    group = []
                addr = previous
        except READ_ERRORS:
            if strict:
                return None
        if group:
            out.append(group)
        return out or None

    def eval_frame(self, frame) -> list[dict] | None:
        """The Python frames one C-level eval frame runs, innermost first; None if unreadable."""
        try:
            addr = int(self._current_iframe(frame))
        except READ_ERRORS:
            return None
        groups = self.chain(addr, 1, strict=False)
        return groups[0] if groups else None

    @staticmethod
    def _current_iframe(frame):
        pc = frame.pc()
        if CACHES.frame_var.get(pc) != "cframe":
            iframe = frame.read_var("frame")
            if not iframe.is_optimized_out:
                CACHES.frame_var[pc] = "frame"
                return iframe
            CACHES.frame_var[pc] = "cframe"  # optimized out at this pc: it is so at every stop here
        return frame.read_var("cframe")["current_frame"]

    def thread_groups(self, lwp: int, thread_key: int, stack: tuple[int, bytes], count: int) -> list | None:
        """The Python frames of the ``count`` innermost eval frames of a thread, from its thread state,
        innermost first; None unless all were read and the thread runs Python on this stack (``stack``:
        its lowest address and the bytes read from there up to the outermost return address)."""
        rt = _RuntimeLayout.get()
        if not rt or not lwp:
            return None
        read = gdb.selected_inferior().read_memory
        lo, size = rt["ts_lo"], rt["ts_size"]
        stack_lo, mem = stack
        stack_hi = stack_lo + len(mem)
        cframe = None
        try:
            for attempt in (0, 1):
                ts = CACHES.tstates.get(thread_key) if attempt == 0 else None
                if ts is None:
                    if attempt == 0:
                        continue
                    ts = _find_tstate(rt, lwp, read)
                    if ts is None:
                        return None
                    if len(CACHES.tstates) >= _MAX_THREADS:
                        CACHES.tstates.clear()
                    CACHES.tstates[thread_key] = ts
                raw = bytes(read(ts + lo, size))
                cframe = _u64(raw, rt["ts_cframe"] - lo)
                # Its own thread's, and running Python on this stack: the innermost eval frame's
                # _PyCFrame is a local of that frame, between the innermost frame and the outermost
                # return address.
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
        except READ_ERRORS:
            return None
        return self.chain(addr, count, strict=True)


FRAMES = CPythonFrames()
