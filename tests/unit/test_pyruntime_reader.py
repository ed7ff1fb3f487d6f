"""The Python-frame reader over memory it must not trust, and the _Py_DebugOffsets parser.

A small fake process in the 3.12 layout (runtime, interpreter, thread, frames with an entry shim,
code objects, strings) is built from the layout itself; then pointers are broken on purpose.
"""
from __future__ import annotations

import struct

import pytest

from tracer.pyruntime import layout as L
from tracer.pyruntime.reader import PythonRuntime


class FakeMemory:
    def __init__(self):
        self.blocks: dict[int, bytearray] = {}

    def block(self, addr: int, size: int = 0x400) -> bytearray:
        self.blocks[addr] = bytearray(size)
        return self.blocks[addr]

    def put(self, addr: int, fmt: str, value) -> None:
        for start, data in self.blocks.items():
            if start <= addr < start + len(data):
                struct.pack_into(fmt, data, addr - start, value)
                return
        raise KeyError(hex(addr))

    def read(self, addr: int, size: int) -> bytes:
        for start, data in self.blocks.items():
            if start <= addr and addr + size <= start + len(data):
                return bytes(data[addr - start:addr - start + size])
        raise OSError(f"unmapped {addr:#x}")


LAY = L.from_table(12)
RUNTIME, INTERP, TSTATE, CFRAME = 0x10000, 0x20000, 0x30000, 0x40000


def _str(mem: FakeMemory, addr: int, text: str) -> int:
    mem.block(addr, 0x200)
    mem.put(addr + LAY.u_length, "<Q", len(text))
    mem.put(addr + LAY.u_state, "<I", (1 << LAY.compact_bit) | (1 << LAY.ascii_bit) | (1 << LAY.kind_shift))
    mem.blocks[addr][LAY.u_ascii_size:LAY.u_ascii_size + len(text)] = text.encode()
    return addr


def _code(mem: FakeMemory, addr: int, file: str, name: str, first: int) -> int:
    mem.block(addr, 0x400)
    mem.put(addr + LAY.co_filename, "<Q", _str(mem, addr + 0x1000, file))
    mem.put(addr + LAY.co_qualname, "<Q", _str(mem, addr + 0x2000, name))
    mem.put(addr + LAY.co_firstlineno, "<i", first)
    table = addr + 0x3000
    mem.block(table, 0x100)
    entries = bytes([0x80 | (11 << 3) | 1, 0, 0] * 4)  # 4 entries of 2 units, each one line further
    mem.put(table + LAY.bytes_size, "<Q", len(entries))
    mem.blocks[table][LAY.bytes_data:LAY.bytes_data + len(entries)] = entries
    mem.put(addr + LAY.co_linetable, "<Q", table)
    return addr


def _frame(mem: FakeMemory, addr: int, code: int, unit: int, previous: int, owner: int = 0) -> int:
    mem.block(addr, 0x100)
    mem.put(addr + LAY.f_code, "<Q", code)
    mem.put(addr + LAY.f_instr, "<Q", code + LAY.co_code_adaptive + 2 * unit)
    mem.put(addr + LAY.f_previous, "<Q", previous)
    mem.put(addr + LAY.f_owner, "<B", owner)
    return addr


def fake_process():
    """Thread 42 runs f (line 12) called inline by g (line 12); g was called from C by h (line 21)."""
    mem = FakeMemory()
    mem.block(RUNTIME)
    mem.put(RUNTIME + LAY.interpreters_head, "<Q", INTERP)
    mem.block(INTERP)
    mem.put(INTERP + LAY.interp_threads_head, "<Q", TSTATE)
    mem.block(TSTATE)
    mem.put(TSTATE + LAY.ts_interp, "<Q", INTERP)
    mem.put(TSTATE + LAY.ts_native_thread_id, "<Q", 42)
    mem.put(TSTATE + LAY.ts_cframe, "<Q", CFRAME)
    mem.block(CFRAME)
    f, g, h = (_code(mem, 0x100000 * i, "/src/m.py", name, first)
               for i, name, first in ((1, "f", 10), (2, "C.g", 11), (3, "h", 20)))
    h_frame = _frame(mem, 0x50300, h, 0, 0)
    shim = _frame(mem, 0x50200, 0, 0, h_frame, owner=3)
    g_frame = _frame(mem, 0x50100, g, 1, shim)
    f_frame = _frame(mem, 0x50000, f, 2, g_frame)
    mem.put(CFRAME + LAY.cf_current, "<Q", f_frame)
    return mem, {"f": f_frame, "g": g_frame, "shim": shim, "h": h_frame}


def test_frames_grouped_by_c_eval_frame():
    mem, _ = fake_process()
    rt = PythonRuntime(mem.read, RUNTIME, 12)
    [ts] = rt.threads()
    assert ts.native_id == 42
    chain = rt.frames(ts.address)
    assert chain.complete and chain.error is None
    assert [[(f.function, f.line) for f in g] for g in chain.groups] == [[("f", 12), ("C.g", 12)], [("h", 21)]]


def test_a_chain_that_loops_stops_and_says_so():
    mem, frames = fake_process()
    mem.put(frames["g"] + LAY.f_previous, "<Q", frames["f"])
    chain = PythonRuntime(mem.read, RUNTIME, 12).frames(TSTATE)
    assert [f.function for f in chain.frames] == ["f", "C.g"]
    assert not chain.complete and "loops" in chain.error


def test_a_dangling_frame_pointer_keeps_what_was_read():
    mem, frames = fake_process()
    mem.put(frames["g"] + LAY.f_previous, "<Q", 0xDEAD0000)
    chain = PythonRuntime(mem.read, RUNTIME, 12).frames(TSTATE)
    assert [f.function for f in chain.frames] == ["f", "C.g"]
    assert not chain.complete and "cannot read the Python frame at 0xdead0000" == chain.error


def test_garbage_code_object_stops_the_chain():
    mem, frames = fake_process()
    mem.put(frames["g"] + LAY.f_code, "<Q", 0xBAD000)
    chain = PythonRuntime(mem.read, RUNTIME, 12).frames(TSTATE)
    assert [f.function for f in chain.frames] == ["f"]
    assert "code object at 0xbad000" in chain.error


def test_absurd_string_length_is_not_read():
    mem, _ = fake_process()
    mem.put(0x100000 + 0x2000 + LAY.u_length, "<Q", 1 << 40)
    chain = PythonRuntime(mem.read, RUNTIME, 12).frames(TSTATE)
    assert chain.frames[0].function is None and chain.frames[0].file == "/src/m.py"


class FaultyMemory(FakeMemory):
    """Reads at ``fault`` raise ``error`` (another kind of failure than an unmapped address)."""

    def __init__(self, mem: FakeMemory, fault: int, error: Exception):
        self.blocks, self.fault, self.error = mem.blocks, fault, error

    def read(self, addr: int, size: int) -> bytes:
        if addr == self.fault:
            raise self.error
        return super().read(addr, size)


class GdbMemoryError(RuntimeError):
    """Stands for gdb.MemoryError: what another read callback raises."""


def test_the_read_errors_given_stop_a_chain_and_nothing_else_is_hidden():
    mem, frames = fake_process()
    faulty = FaultyMemory(mem, frames["g"], GdbMemoryError("Cannot access memory"))
    chain = PythonRuntime(faulty.read, RUNTIME, 12, read_errors=(GdbMemoryError,)).frames(TSTATE)
    assert [f.function for f in chain.frames] == ["f"] and "cannot read the Python frame" in chain.error
    # an error the reader was not told of is a bug (in the callback or here): it is raised, not a short stack
    runtime = PythonRuntime(FaultyMemory(mem, frames["g"], AttributeError("a bug")).read, RUNTIME, 12)
    with pytest.raises(AttributeError):
        runtime.frames(TSTATE)


def test_max_frames_cuts_the_chain():
    mem, _ = fake_process()
    chain = PythonRuntime(mem.read, RUNTIME, 12).frames(TSTATE, max_frames=1)
    assert [f.function for f in chain.frames] == ["f"] and not chain.complete


def test_a_wrong_version_is_refused():
    mem, _ = fake_process()
    keep = {o: bytes(mem.blocks[INTERP][o:o + 8]) for o in (LAY.interp_next, LAY.interp_id, LAY.interp_threads_head)}
    mem.blocks[INTERP][:] = b"\x41" * len(mem.blocks[INTERP])  # what a live interpreter holds elsewhere
    for off, raw in keep.items():
        mem.blocks[INTERP][off:off + 8] = raw
    with pytest.raises(L.LayoutError, match="does not match CPython 3.11"):
        PythonRuntime(mem.read, RUNTIME, 11)
    with pytest.raises(L.LayoutError, match="3.9 is not supported"):
        PythonRuntime(mem.read, RUNTIME, 9)
    with pytest.raises(L.LayoutError, match="version is not known"):
        PythonRuntime(mem.read, RUNTIME, None)
    with pytest.raises(L.LayoutError, match="cannot read"):
        PythonRuntime(mem.read, 0xDEAD0000, 12)


def _debug_offsets(hexversion: int, free_threaded: int = 0) -> bytes:
    """Each uint64 after the header holds its own index, so a parsed field tells where it was read."""
    minor = (hexversion >> 16) & 0xFF
    n = (L.debug_offsets_size(minor) - 24) // 8
    return L.COOKIE + struct.pack("<QQ", hexversion, free_threaded) + struct.pack(f"<{n}Q", *range(n))


def test_debug_offsets_313_and_314_fields():
    lay13 = L.from_debug_offsets(_debug_offsets(0x030D00F0))
    # 3.13: runtime_state 3, interpreter_state 13, thread_state 9 fields, then interpreter_frame
    assert (lay13.interpreters_head, lay13.interp_threads_head, lay13.ts_frame) == (2, 6, 20)
    assert (lay13.f_previous, lay13.f_code, lay13.f_instr, lay13.f_owner) == (26, 27, 28, 30)
    assert lay13.shim_owners == {3} and lay13.code_tag_mask == ~0
    lay14 = L.from_debug_offsets(_debug_offsets(0x030E00F0))
    # 3.14: threads_main after threads_head, two more interpreter fields, two more frame fields
    assert (lay14.interp_threads_head, lay14.interp_next, lay14.ts_frame) == (6, 5, 23)
    assert (lay14.f_previous, lay14.f_code, lay14.f_owner) == (29, 30, 33)
    assert (lay14.co_filename, lay14.co_code_adaptive) == (37, 45)
    assert lay14.shim_owners == {3, 4} and lay14.code_tag_mask == ~1


def test_debug_offsets_refusals():
    with pytest.raises(L.LayoutError, match="3.15 is not supported"):
        L.from_debug_offsets(L.COOKIE + struct.pack("<QQ", 0x030F00A0, 0) + bytes(2000))
    with pytest.raises(L.LayoutError, match="free-threaded"):
        L.from_debug_offsets(_debug_offsets(0x030D00F0, free_threaded=1))
    with pytest.raises(L.LayoutError, match="no 'xdebugpy' cookie"):
        L.from_debug_offsets(b"\0" * 600)
    with pytest.raises(L.LayoutError, match="read whole"):
        L.from_debug_offsets(_debug_offsets(0x030D00F0)[:100])


def test_a_runtime_without_threads_is_not_running_yet():
    mem, _ = fake_process()
    mem.put(INTERP + LAY.interp_threads_head, "<Q", 0)
    with pytest.raises(L.NotRunning):
        PythonRuntime(mem.read, RUNTIME, 12)
    mem.put(RUNTIME + LAY.interpreters_head, "<Q", 0)
    with pytest.raises(L.NotRunning):
        PythonRuntime(mem.read, RUNTIME, 12)
