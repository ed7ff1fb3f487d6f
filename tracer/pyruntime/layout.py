"""Where CPython keeps what a debugger reads, per version: one ``Layout`` of offsets.

3.10-3.12: from ``tables.py`` (generated from debug builds' DWARF by scripts/gen_pyruntime_layouts.py).
3.13+: from ``_Py_DebugOffsets``, the table the interpreter itself keeps at the start of ``_PyRuntime``
(cookie ``xdebugpy``, ``PY_VERSION_HEX``, then sections of uint64 offsets whose fields differ per minor
version: ``_DEBUG_SECTIONS`` lists them; a new version is a new entry there).
Pure data and parsing: no gdb, no I/O.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .tables import LAYOUTS

COOKIE = b"xdebugpy"
OLDEST, NEWEST = 10, 14  # supported minor versions of CPython 3


class LayoutError(Exception):
    """The interpreter's layout is unknown or does not look like CPython's: one sentence."""


class NotRunning(LayoutError):
    """The runtime has no interpreter or no thread yet (a process still starting, or finalizing)."""


@dataclass(frozen=True)
class Layout:
    """Byte offsets of the fields the reader follows (None: the version has no such field)."""

    minor: int
    interpreters_head: int  # in _PyRuntimeState
    interp_next: int
    interp_id: int
    interp_threads_head: int
    interp_modules: int  # sys.modules (a dict)
    ts_next: int
    ts_interp: int
    ts_thread_id: int  # pthread_t
    ts_native_thread_id: int | None  # the LWP (3.11+)
    ts_frame: int | None  # PyThreadState.frame (3.10) or .current_frame (3.13+)
    ts_cframe: int | None  # 3.11/3.12: PyThreadState.cframe, then _PyCFrame.current_frame
    cf_current: int | None
    f_previous: int
    f_code: int
    f_lasti: int | None  # 3.10 PyFrameObject: index of the last instruction, in code units
    f_instr: int | None  # 3.11+: pointer to the current (3.13+) or last begun (3.11/3.12) instruction
    f_owner: int | None
    f_is_entry: int | None  # 3.11: this frame is the first its C-level eval frame ran
    co_filename: int
    co_name: int
    co_qualname: int | None
    co_firstlineno: int
    co_linetable: int
    co_code_adaptive: int | None
    bytes_size: int
    bytes_data: int
    u_length: int
    u_state: int
    u_ascii_size: int
    u_compact_size: int
    kind_shift: int = 2
    compact_bit: int = 5
    ascii_bit: int = 6
    # Frame owners marking a C-level eval frame's entry shim (3.12+): the frames above it are that
    # eval frame's, the ones below an older eval frame's.
    shim_owners: frozenset = frozenset()
    code_tag_mask: int = ~0  # 3.14 tags f_executable (a _PyStackRef) in its low bit
    co_names: int | None = None  # the names a code object loads (dynamo's __compiled_fn_N among them)
    tuple_size: int = 16  # PyTupleObject's ob_size and ob_item (3.10-3.14; 3.13+ say so themselves)
    tuple_items: int = 24

    @property
    def frame_objects(self) -> bool:
        """3.10: a chain of PyFrameObjects, one C-level eval frame each."""
        return self.f_lasti is not None


def from_table(minor: int) -> Layout:
    """The layout of CPython 3.``minor`` for 3.10-3.12 (raises LayoutError for another)."""
    t = LAYOUTS.get(f"3.{minor}")
    if t is None:
        raise LayoutError(f"CPython 3.{minor} is not supported: pttrace reads 3.{OLDEST} to 3.{NEWEST}")

    table: dict[str, Any] = t

    def off(name: str) -> int | None:
        v = table.get(name)
        return v[0] if v is not None else None

    def need(name: str) -> int:
        """A field every supported version has (the table of that version lacking it is a bug of ours)."""
        v = off(name)
        if v is None:
            raise LayoutError(f"CPython 3.{minor}: pttrace's table has no offset of {name}")
        return v

    state_kind = table["unicode.state.kind"][0]
    return Layout(
        minor=minor, interpreters_head=need("runtime.interpreters_head"), interp_next=need("interp.next"),
        interp_id=need("interp.id"), interp_threads_head=need("interp.threads_head"),
        interp_modules=need("interp.modules"), ts_next=need("tstate.next"),
        ts_interp=need("tstate.interp"), ts_thread_id=need("tstate.thread_id"),
        ts_native_thread_id=off("tstate.native_thread_id"), ts_frame=off("tstate.frame"),
        ts_cframe=off("tstate.cframe"), cf_current=off("cframe.current_frame"), f_previous=need("frame.previous"),
        f_code=need("frame.code"), f_lasti=off("frame.lasti"), f_instr=off("frame.instr"), f_owner=off("frame.owner"),
        f_is_entry=off("frame.is_entry"), co_filename=need("code.filename"), co_name=need("code.name"),
        co_qualname=off("code.qualname"), co_firstlineno=need("code.firstlineno"),
        co_linetable=need("code.linetable"), co_code_adaptive=off("code.code_adaptive"),
        bytes_size=need("bytes.size"), bytes_data=need("bytes.data"),
        u_length=need("unicode.length"), u_state=need("unicode.state"), u_ascii_size=table["unicode.ascii_size"],
        u_compact_size=table["unicode.compact_size"], kind_shift=state_kind,
        compact_bit=table["unicode.state.compact"][0], ascii_bit=table["unicode.state.ascii"][0],
        shim_owners=frozenset([table["owner.cstack"]]) if "owner.cstack" in table else frozenset(),
        co_names=off("code.names"), tuple_size=off("tuple.size") or 16, tuple_items=off("tuple.items") or 24,
    )


# _Py_DebugOffsets after cookie, version and free_threaded: (section, fields), each field a uint64.
_SECTIONS_313 = (
    ("runtime_state", ("size", "finalizing", "interpreters_head")),
    ("interpreter_state", ("size", "id", "next", "threads_head", "gc", "imports_modules", "sysdict", "builtins",
                           "ceval_gil", "gil_runtime_state", "gil_runtime_state_enabled",
                           "gil_runtime_state_locked", "gil_runtime_state_holder")),
    ("thread_state", ("size", "prev", "next", "interp", "current_frame", "thread_id", "native_thread_id",
                      "datastack_chunk", "status")),
    ("interpreter_frame", ("size", "previous", "executable", "instr_ptr", "localsplus", "owner")),
    ("code_object", ("size", "filename", "name", "qualname", "linetable", "firstlineno", "argcount",
                     "localsplusnames", "localspluskinds", "co_code_adaptive")),
    ("pyobject", ("size", "ob_type")),
    ("type_object", ("size", "tp_name", "tp_repr", "tp_flags")),
    ("tuple_object", ("size", "ob_item", "ob_size")),
    ("list_object", ("size", "ob_item", "ob_size")),
    ("dict_object", ("size", "ma_keys", "ma_values")),
    ("float_object", ("size", "ob_fval")),
    ("long_object", ("size", "lv_tag", "ob_digit")),
    ("bytes_object", ("size", "ob_size", "ob_sval")),
    ("unicode_object", ("size", "state", "length", "asciiobject_size")),
)
# 3.14 (from CPython's Include/internal/pycore_debug_offsets.h; not yet run here): fields added in the
# middle of interpreter_state, interpreter_frame and code_object, and a set_object section.
_SECTIONS_314 = tuple(
    (name, {"interpreter_state": fields[:4] + ("threads_main",) + fields[4:]
            + ("code_object_generation", "tlbc_generation"),
            "interpreter_frame": fields + ("stackpointer", "tlbc_index"),
            "code_object": fields + ("co_tlbc",)}.get(name, fields))
    for name, fields in _SECTIONS_313[:9]
) + (("set_object", ("size", "used", "table", "mask")),) + _SECTIONS_313[9:]
_DEBUG_SECTIONS = {13: _SECTIONS_313, 14: _SECTIONS_314}
_HEADER = 24  # cookie, version, free_threaded


def debug_offsets_size(minor: int) -> int:
    """Bytes of ``_Py_DebugOffsets`` the parser reads for this version (enough for any version known)."""
    return _HEADER + 8 * sum(len(f) for _, f in _DEBUG_SECTIONS.get(minor, _SECTIONS_314))


def version_of_debug_offsets(raw: bytes) -> int | None:
    """PY_VERSION_HEX from a ``_Py_DebugOffsets`` header, None if ``raw`` has no cookie (3.12 and older)."""
    if len(raw) < 16 or raw[:8] != COOKIE:
        return None
    return struct.unpack_from("<Q", raw, 8)[0]


def from_debug_offsets(raw: bytes) -> Layout:
    """The layout a 3.13+ interpreter describes in ``_Py_DebugOffsets`` (the start of ``_PyRuntime``)."""
    hexversion = version_of_debug_offsets(raw)
    if hexversion is None:
        raise LayoutError("_PyRuntime does not start with CPython's debug offsets (no 'xdebugpy' cookie)")
    major, minor = hexversion >> 24, (hexversion >> 16) & 0xFF
    sections = _DEBUG_SECTIONS.get(minor) if major == 3 else None
    if sections is None:
        raise LayoutError(f"CPython {major}.{minor} is not supported: pttrace reads 3.{OLDEST} to 3.{NEWEST}")
    if len(raw) < debug_offsets_size(minor):
        raise LayoutError("CPython's debug offsets could not be read whole")
    if struct.unpack_from("<Q", raw, 16)[0]:
        raise LayoutError(f"free-threaded CPython 3.{minor} is not supported: use the default (GIL) build")
    d: dict[str, int] = {}
    pos = _HEADER
    for section, fields in sections:
        for field in fields:
            d[f"{section}.{field}"] = struct.unpack_from("<Q", raw, pos)[0]
            pos += 8
    ascii_size = d["unicode_object.asciiobject_size"]
    return Layout(
        minor=minor, interpreters_head=d["runtime_state.interpreters_head"],
        interp_next=d["interpreter_state.next"], interp_id=d["interpreter_state.id"],
        interp_threads_head=d["interpreter_state.threads_head"], interp_modules=d["interpreter_state.imports_modules"], ts_next=d["thread_state.next"],
        ts_interp=d["thread_state.interp"], ts_thread_id=d["thread_state.thread_id"],
        ts_native_thread_id=d["thread_state.native_thread_id"], ts_frame=d["thread_state.current_frame"],
        ts_cframe=None, cf_current=None, f_previous=d["interpreter_frame.previous"],
        f_code=d["interpreter_frame.executable"], f_lasti=None, f_instr=d["interpreter_frame.instr_ptr"],
        f_owner=d["interpreter_frame.owner"], f_is_entry=None, co_filename=d["code_object.filename"],
        co_name=d["code_object.name"], co_qualname=d["code_object.qualname"],
        co_firstlineno=d["code_object.firstlineno"], co_linetable=d["code_object.linetable"],
        co_code_adaptive=d["code_object.co_code_adaptive"], bytes_size=d["bytes_object.ob_size"],
        bytes_data=d["bytes_object.ob_sval"], u_length=d["unicode_object.length"], u_state=d["unicode_object.state"],
        u_ascii_size=ascii_size, u_compact_size=ascii_size + 16,  # + utf8_length, utf8 (3.12+)
        # 3.13: FRAME_OWNED_BY_CSTACK = 3; 3.14: FRAME_OWNED_BY_INTERPRETER = 3 (its entry frame), CSTACK = 4.
        shim_owners=frozenset([3]) if minor == 13 else frozenset([3, 4]),
        code_tag_mask=~1 if minor >= 14 else ~0,
        # _Py_DebugOffsets has no co_names: it follows PyObject_VAR_HEAD and co_consts (_PyCode_DEF, 3.11-3.14;
        # 32 in pyenv 3.13.0's DWARF, as in 3.11's and 3.12's).
        co_names=32, tuple_size=d["tuple_object.ob_size"], tuple_items=d["tuple_object.ob_item"],
    )
