"""Read a CPython process's threads and Python frames from its memory, with no debug information.

One reader over a ``read(address, size) -> bytes`` callback (gdb's inferior memory, /proc/PID/mem):
``_PyRuntime`` -> interpreters -> thread states -> each thread's frame chain -> code objects.

Frame kinds, newest first along ``previous`` (``f_back`` in 3.10):
- 3.10: ``PyFrameObject``s; each one is run by its own C-level ``_PyEval_EvalFrameDefault``.
- 3.11: ``_PyInterpreterFrame``s; ``is_entry`` marks the first frame a C-level eval frame ran (older
  frames belong to older eval frames).
- 3.12+: the same, and each C-level eval frame pushes an entry *shim* frame (owner
  ``FRAME_OWNED_BY_CSTACK``; 3.14 ``FRAME_OWNED_BY_INTERPRETER``) below its first frame: a boundary,
  not a Python frame.
So a thread's frames come out as groups, one per C-level eval frame, innermost first: what the native
stack's ``_PyEval_EvalFrameDefault`` frames interleave with.

Every byte read is untrusted: pointers may dangle, loops may cycle, lengths may be garbage. Reads are
bounded, a chain stops at the first unreadable frame (``FrameChain.error`` says why) and nothing
is guessed. No gdb here (tests drive it over /proc/PID/mem).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable

from . import layout as _layout
from .layout import Layout, LayoutError, NotRunning
from .lines import line_at, ranges_for

Read = Callable[[int, int], bytes]  # raises one of the errors given with it when the memory cannot be read
# What reading untrusted bytes raises: a buffer too short, a field or length out of range.
PARSE_ERRORS: tuple[type[Exception], ...] = (struct.error, ValueError, IndexError, OverflowError)

MAX_FRAMES = 4096  # a chain longer than this is cut (FrameChain.complete False)
MAX_THREADS = 4096
MAX_INTERPRETERS = 64
MAX_STRING = 1 << 16  # characters of a file or function name
MAX_LINETABLE = 1 << 22
_CODE_CACHE_MAX = 1 << 16


def _u64(raw: bytes, off: int) -> int:
    return struct.unpack_from("<Q", raw, off)[0]


@dataclass(frozen=True)
class ThreadState:
    """One of the target's Python thread states, read from its memory."""

    address: int
    interp_id: int  # -1: not known (read alone, by thread_state)
    thread_id: int  # pthread_t (gdb's thread handle)
    native_id: int | None  # the LWP; None on 3.10, which does not keep it
    frame_ref: int = 0  # its newest frame (3.11/3.12: its _PyCFrame, which points at it)


@dataclass(frozen=True, eq=False)  # one object per (code, instruction): compared and hashed by identity
class PyFrame:
    """One Python frame of a call path."""

    file: str | None
    line: int | None
    function: str | None  # qualified name (3.11+), the code's name on 3.10
    code: int  # the code object's address


@dataclass
class FrameChain:
    """A thread's Python frames, one group per C-level eval frame, innermost group and frame first."""

    groups: list = field(default_factory=list)
    complete: bool = True  # False: cut at max_frames, or stopped at an unreadable frame
    error: str | None = None  # why the chain stopped early

    @property
    def frames(self) -> list:
        return [f for g in self.groups for f in g]


@dataclass
class _Code:
    """What a code object gives its frames, read once a code object."""

    file: str | None
    function: str | None
    first: int
    ranges: list
    start: int  # address of the first instruction (3.11+), 0 on 3.10
    ident: bytes | None  # for exec'd code: its name and table pointers, to notice a reused address


class PythonRuntime:
    """The CPython runtime of one process, found at ``runtime_address`` (the ``_PyRuntime`` symbol).

    ``minor``: the CPython 3 minor version when known from elsewhere (a file name, ``Py_Version``);
    3.13+ say it themselves in ``_Py_DebugOffsets``, which wins. ``read_errors``: what ``read`` raises
    when the memory cannot be read (/proc/PID/mem: OSError; gdb: gdb.error). Raises LayoutError (one
    sentence) when the version is unsupported or the memory does not look like that version's runtime."""

    def __init__(self, read: Read, runtime_address: int, minor: int | None = None,
                 read_errors: tuple[type[Exception], ...] = (OSError,)):
        self.read = read
        self.errors = tuple(read_errors) + PARSE_ERRORS  # what a read of the target and its parsing raise
        self.address = runtime_address
        self.layout = self._find_layout(minor)
        self._codes: dict[int, _Code] = {}
        self._frames: dict[tuple[int, int], PyFrame] = {}
        self._frame_span = self._span((self.layout.f_previous, 8), (self.layout.f_code, 8),
                                      (self.layout.f_lasti, 4), (self.layout.f_instr, 8), (self.layout.f_owner, 1),
                                      (self.layout.f_is_entry, 1))
        lay = self.layout
        self._code_span = self._span((lay.co_filename, 8), (lay.co_name, 8), (lay.co_qualname, 8),
                                     (lay.co_firstlineno, 4), (lay.co_linetable, 8))
        self._ts_span = self._span((lay.ts_next, 8), (lay.ts_interp, 8), (lay.ts_thread_id, 8),
                                   (lay.ts_native_thread_id, 8), (lay.ts_frame, 8), (lay.ts_cframe, 8))

    @staticmethod
    def _span(*fields) -> int:
        return max(off + size for off, size in fields if off is not None)

    def _find_layout(self, minor: int | None) -> Layout:
        try:
            head = self.read(self.address, 16)
        except self.errors:
            raise LayoutError(f"cannot read the interpreter's _PyRuntime at {self.address:#x}") from None
        hexversion = _layout.version_of_debug_offsets(head)
        if hexversion is not None:
            found = (hexversion >> 16) & 0xFF
            try:
                raw = self.read(self.address, _layout.debug_offsets_size(found))
            except self.errors:
                raise LayoutError("cannot read CPython's debug offsets at the start of _PyRuntime") from None
            return _layout.from_debug_offsets(raw)
        if minor is None:
            raise LayoutError("the CPython version is not known (no Py_Version symbol, no version in its file name)")
        if minor >= 13:
            raise LayoutError(f"CPython 3.{minor}'s _PyRuntime has no debug offsets: not a CPython runtime")
        lay = _layout.from_table(minor)
        self._check(lay)
        return lay

    def _check(self, lay: Layout) -> None:
        """The main interpreter must be interpreter 0 and own its newest thread: else the version is wrong.
        (Read once a thread runs Python: the runtime of a process still starting up has none.)"""
        ts = 0
        try:
            interp = _u64(self.read(self.address + lay.interpreters_head, 8), 0)
            for _ in range(MAX_INTERPRETERS):
                nxt = _u64(self.read(interp + lay.interp_next, 8), 0) if interp else 0
                if not nxt:
                    break
                interp = nxt  # the main interpreter is the last one on the list
            ok = not interp or _u64(self.read(interp + lay.interp_id, 8), 0) == 0
            ts = _u64(self.read(interp + lay.interp_threads_head, 8), 0) if ok and interp else 0
            ok = ok and (not ts or _u64(self.read(ts + lay.ts_interp, 8), 0) == interp)
        except self.errors:
            ok = False
        if not ok:
            raise LayoutError(f"the interpreter's memory does not match CPython 3.{lay.minor}'s layout")
        if not ts:
            raise NotRunning("the CPython runtime has no thread yet")

    # -- interpreters and threads ------------------------------------------------------------------
    def interpreters(self) -> list[int]:
        out: list[int] = []
        try:
            interp = _u64(self.read(self.address + self.layout.interpreters_head, 8), 0)
            while interp and len(out) < MAX_INTERPRETERS and interp not in out:
                out.append(interp)
                interp = _u64(self.read(interp + self.layout.interp_next, 8), 0)
        except self.errors:
            pass
        return out

    def threads(self) -> list[ThreadState]:
        """Every thread state of every interpreter (newest thread first, as CPython links them)."""
        lay = self.layout
        out: list[ThreadState] = []
        seen: set[int] = set()
        for interp in self.interpreters():
            try:
                interp_id = _u64(self.read(interp + lay.interp_id, 8), 0)
                ts = _u64(self.read(interp + lay.interp_threads_head, 8), 0)
                while ts and ts not in seen and len(seen) < MAX_THREADS:
                    seen.add(ts)
                    state, ts = self._thread_state(ts, interp_id)
                    out.append(state)
            except self.errors:
                continue
        return out

    def thread_state(self, tstate: int) -> ThreadState | None:
        """The thread state at ``tstate`` (one read; None if unreadable): to check a cached one still is
        that thread's."""
        try:
            return self._thread_state(tstate, -1)[0]
        except self.errors:
            return None

    def _thread_state(self, ts: int, interp_id: int) -> tuple[ThreadState, int]:
        lay = self.layout
        raw = self.read(ts, self._ts_span)
        native = _u64(raw, lay.ts_native_thread_id) if lay.ts_native_thread_id is not None else None
        ref_at = lay.ts_cframe if lay.ts_cframe is not None else lay.ts_frame
        assert ref_at is not None, "every layout has tstate.cframe (3.11/3.12) or tstate.frame"
        ref = _u64(raw, ref_at)
        return ThreadState(ts, interp_id, _u64(raw, lay.ts_thread_id), native, ref), _u64(raw, lay.ts_next)

    def current_frame(self, state: ThreadState) -> int:
        """The address of the thread's newest frame (0: it runs no Python code)."""
        if self.layout.ts_cframe is not None:
            assert self.layout.cf_current is not None, "a layout with tstate.cframe has cframe.current_frame"
            return _u64(self.read(state.frame_ref + self.layout.cf_current, 8), 0) if state.frame_ref else 0
        return state.frame_ref

    # -- frames --------------------------------------------------------------------------------------
    def frames(self, tstate: int | ThreadState, max_frames: int = MAX_FRAMES) -> FrameChain:
        """The frames of a thread (its state's address, or the ThreadState just read of it)."""
        try:
            state = tstate if isinstance(tstate, ThreadState) else self._thread_state(tstate, -1)[0]
            first = self.current_frame(state)
        except self.errors:
            where = tstate.address if isinstance(tstate, ThreadState) else tstate
            return FrameChain(complete=False, error=f"cannot read the thread state at {where:#x}")
        return self.frames_from(first, max_frames)

    def frames_from(self, frame: int, max_frames: int = MAX_FRAMES) -> FrameChain:
        """The frame chain from ``frame`` (a PyFrameObject on 3.10, a _PyInterpreterFrame after)."""
        lay = self.layout
        chain = FrameChain()
        group: list[PyFrame] = []
        seen: set[int] = set()
        count = 0
        while frame:
            if frame in seen:
                chain.complete, chain.error = False, f"the frame chain loops at {frame:#x}"
                break
            if count >= max_frames:
                chain.complete = False
                break
            seen.add(frame)
            try:
                raw = self.read(frame, self._frame_span)
            except self.errors:
                chain.complete, chain.error = False, f"cannot read the Python frame at {frame:#x}"
                break
            previous = _u64(raw, lay.f_previous)
            if lay.f_owner is not None and raw[lay.f_owner] in lay.shim_owners:
                if group:  # the entry shim of a C-level eval frame: its group is complete
                    chain.groups.append(group)
                    group = []
                frame = previous
                continue
            code = _u64(raw, lay.f_code) & lay.code_tag_mask
            if lay.f_lasti is not None:  # lay.frame_objects
                where = struct.unpack_from("<i", raw, lay.f_lasti)[0]
            else:
                assert lay.f_instr is not None, "3.11+ frames have an instruction pointer"
                where = _u64(raw, lay.f_instr)
            py = self._frame(code, where)
            if py is None:
                chain.complete, chain.error = False, f"cannot read the code object at {code:#x}"
                break
            group.append(py)
            count += 1
            if lay.frame_objects or (lay.f_is_entry is not None and raw[lay.f_is_entry]):
                chain.groups.append(group)
                group = []
            frame = previous
        if group:
            chain.groups.append(group)
        return chain

    def _frame(self, code_addr: int, where: int) -> PyFrame | None:
        """The Python frame running ``code_addr`` at ``where`` (3.10: f_lasti; 3.11+: the instruction
        pointer). The same code at the same instruction is the same frame: read once."""
        key = (code_addr, where)
        info = self._code(code_addr)
        if info is None:
            return None
        cached = self._frames.get(key)
        if cached is not None:
            return cached
        units = where if self.layout.frame_objects else (where - info.start) // 2
        line = line_at(info.ranges, units) if units >= 0 else info.first
        if len(self._frames) >= _CODE_CACHE_MAX:
            self._frames.clear()
        py = self._frames[key] = PyFrame(info.file, line, info.function, code_addr)
        return py

    def _ident(self, code_addr: int) -> bytes:
        lay = self.layout
        raw = self.read(code_addr, self._code_span)
        return b"".join(raw[o:o + 8] for o in (lay.co_filename, lay.co_name, lay.co_linetable))

    def _code(self, code_addr: int) -> _Code | None:
        info = self._codes.get(code_addr)
        if info is not None:
            if info.ident is None:
                return info
            # exec'd code (<string>, fx's <eval_with_key>) can die and another take its address.
            try:
                if self._ident(code_addr) == info.ident:
                    return info
            except self.errors:
                return None
            del self._codes[code_addr]
            for key in [k for k in self._frames if k[0] == code_addr]:
                del self._frames[key]
        if not code_addr:
            return None
        lay = self.layout
        try:
            raw = self.read(code_addr, self._code_span)
            file = self.read_str(_u64(raw, lay.co_filename))
            name = self.read_str(_u64(raw, lay.co_qualname if lay.co_qualname is not None else lay.co_name))
            first = struct.unpack_from("<i", raw, lay.co_firstlineno)[0]
            table = self.read_bytes(_u64(raw, lay.co_linetable))
        except self.errors:
            return None
        if file is None and name is None:
            return None
        start = code_addr + lay.co_code_adaptive if lay.co_code_adaptive is not None else 0
        ident = None
        if file and file.startswith("<") and not file.startswith("<frozen "):
            ident = b"".join(raw[o:o + 8] for o in (lay.co_filename, lay.co_name, lay.co_linetable))
        info = _Code(file, name, first, ranges_for(lay.minor, table or b"", first), start, ident)
        if len(self._codes) >= _CODE_CACHE_MAX:
            self._codes.clear()
            self._frames.clear()
        self._codes[code_addr] = info
        return info

    def code_names(self, code_addr: int, limit: int = 4096) -> list[str] | None:
        """The names a code object loads (``co_names``: globals, attributes), None when unreadable.
        Dynamo's code for a frame it compiled loads its graph as a global named ``__compiled_fn_N_…``."""
        lay = self.layout
        if lay.co_names is None or not code_addr:
            return None
        try:
            names = _u64(self.read(code_addr + lay.co_names, 8), 0)
            if not names:
                return None
            size = _u64(self.read(names + lay.tuple_size, 8), 0)
            if size > limit:
                return None
            raw = self.read(names + lay.tuple_items, 8 * size) if size else b""
        except self.errors:
            return None
        return [s for s in (self.read_str(_u64(raw, 8 * i)) for i in range(size)) if s is not None]

    # -- objects -------------------------------------------------------------------------------------
    def read_str(self, addr: int) -> str | None:
        """A compact str object's text (every identifier and file name is one); None otherwise."""
        if not addr:
            return None
        lay = self.layout
        try:
            raw = self.read(addr, lay.u_state + 4)
            length = _u64(raw, lay.u_length)
            state = struct.unpack_from("<I", raw, lay.u_state)[0]
            if length > MAX_STRING or not (state >> lay.compact_bit) & 1:
                return None
            if (state >> lay.ascii_bit) & 1:
                return self.read(addr + lay.u_ascii_size, length).decode("ascii", "replace")
            kind = (state >> lay.kind_shift) & 7
            codec = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}.get(kind)
            if codec is None:
                return None
            return self.read(addr + lay.u_compact_size, length * kind).decode(codec, "replace")
        except self.errors:
            return None

    def str_length(self, addr: int) -> int | None:
        """A str object's length in characters, from its header alone (one read); None if unreadable."""
        if not addr:
            return None
        try:
            return _u64(self.read(addr, self.layout.u_length + 8), self.layout.u_length)
        except self.errors:
            return None

    def read_bytes(self, addr: int) -> bytes | None:
        if not addr:
            return None
        lay = self.layout
        try:
            size = _u64(self.read(addr + lay.bytes_size, 8), 0)
            if size > MAX_LINETABLE:
                return None
            return bytes(self.read(addr + lay.bytes_data, size)) if size else b""
        except self.errors:
            return None
