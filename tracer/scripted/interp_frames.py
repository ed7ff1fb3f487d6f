"""What TorchScript's interpreter is running, read from the target's memory with an ``InterpreterLayout``
(interp_layout.py): per interpreter frame the scripted function, and the graph node at its ``pc`` with
its op kind, file and line, and the inlined callees that node came from (outermost call first). Not wired
to the recorder yet; tests/integration/test_torchscript_memory.py drives it in gdb on the real wheel.

Lines come from the ``Source``'s own ``line_starting_offsets_`` (no file is read). Where the interpreter
keeps its frames inside the private ``InterpreterStateImpl`` is not in any header: ``frames_offset``
finds the one ``std::vector<Frame>`` whose every element points at code whose ``pc`` is inside its
instructions, and says so when none or several do. Standard library only (runs inside the gdb agent).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tracer.values.memory import BadValue, Memory

MAX_FRAMES = 256  # nested scripted calls on one interpreter; more is not a vector of frames
MAX_INLINED = 64
MAX_TEXT = 4096
SCAN = 512  # bytes of InterpreterStateImpl searched for the frames (208 in torch 2.13.0)


@dataclass
class Place:
    """One source place of a TorchScript frame, read from the interpreter's memory."""

    function: str | None
    file: str | None
    line: int | None


@dataclass
class Level:
    """One interpreter frame: its function, and where its current node is (``inlined``: the calls,
    outermost first, that inlining replaced by this node; the node's own place is last)."""

    function: str | None
    node: str | None  # "aten::relu"; None when the kind is not a builtin symbol
    node_kind: int | None
    places: list[Place] = field(default_factory=list)
    why: str | None = None  # what was not read
    code: int | None = None  # its CodeImpl: the graph it runs (interp_graph.py)


def tls_state(mem: Memory, layout, load_base: int, fs_base: int) -> int:
    """The thread's ``tls_int_state_ptr_`` (0 outside the interpreter): DTV[modid] + offset."""
    if layout.tls_modid_slot is None or layout.tls_offset is None:
        raise BadValue("the interpreter's thread-local state was not found in libtorch_cpu.so")
    modid = mem.u64(load_base + layout.tls_modid_slot)
    if not 0 < modid < 1 << 20:
        raise BadValue(f"libtorch_cpu's TLS module id reads {modid}")
    dtv = mem.pointer(fs_base + 8, "the thread's DTV")
    block = mem.u64(dtv + 16 * modid)
    if block in (0, (1 << 64) - 1):
        raise BadValue("this thread has no TLS block for libtorch_cpu")
    return mem.pointer(block + layout.tls_offset, "tls_int_state_ptr_", null=True)


def read_string(mem: Memory, address: int) -> str:
    data, size = mem.pointer(address, "a string's data"), mem.u64(address + 8)
    if size > MAX_TEXT:
        raise BadValue(f"a string of {size} bytes")
    return mem.bytes(data, size).decode("utf-8", "replace") if size else ""


def read_vector(mem: Memory, address: int, item: int, limit: int) -> tuple[int, int]:
    begin, end, cap = mem.u64(address), mem.u64(address + 8), mem.u64(address + 16)
    if not begin <= end <= cap or (end - begin) % item or (end - begin) // item > limit:
        raise BadValue("not a vector")
    return begin, (end - begin) // item


def _frame_code(mem: Memory, o: dict, frame: int) -> tuple[int, int]:
    code = mem.pointer(frame + o["frame_code"], "a frame's code")
    pc = mem.u64(frame + o["frame_pc"])
    begin, n = read_vector(mem, code + o["code_sources"], 8, 1 << 24)
    if pc >= n:
        raise BadValue(f"pc {pc} is past the {n} instructions")
    return code, mem.pointer(begin + 8 * pc, "the instruction's node")


def frames_offset(mem: Memory, layout, state: int) -> int:
    """Where this build's InterpreterStateImpl keeps its ``std::vector<Frame>``: the one offset whose
    vector's frames all point at code with their pc inside it."""
    o = layout.offsets
    found = []
    for off in range(0, SCAN, 8):
        try:
            begin, n = read_vector(mem, state + off, o["frame_size"], MAX_FRAMES)
            if n == 0:
                continue
            for k in range(n):
                _frame_code(mem, o, begin + k * o["frame_size"])
        except BadValue:
            continue
        found.append(off)
    if len(found) != 1:
        raise BadValue(f"the interpreter's frames were not found ({len(found)} candidates in its state)")
    return found[0]


def read_place(mem: Memory, o: dict, source_range: int, function: str | None) -> Place:
    source = mem.pointer(source_range + o["range_source"], "the source range's source")
    start = mem.u64(source_range + o["range_start"])
    begin, n = read_vector(mem, source + o["source_line_starts"], 8, 1 << 22)
    starts = mem.words(begin, n, signed=False) if n else ()
    index = sum(1 for s in starts if s <= start) - 1
    first = mem.u64(source + o["source_first_line"])
    file: str | None
    try:
        file = read_string(mem, source + o["source_filename"])  # std::optional<std::string>: engaged after it
        if not mem.u8(source + o["source_filename"] + 32):
            file = None
    except BadValue:
        file = None
    return Place(function, file, first + max(index, 0))


def read_level(mem: Memory, layout, frame: int) -> Level:
    o = layout.offsets
    try:
        code, node = _frame_code(mem, o, frame)
        function = read_string(mem, code + o["code_name"]) or None
    except BadValue as exc:
        return Level(None, None, None, why=f"its code: {exc}")
    kind = mem.u32(node + o["node_kind"])
    level = Level(function, layout.symbol(kind), kind, code=code)
    try:
        inlined: list[Place] = []
        cs_engaged = mem.u8(node + o["node_callstack"] + 8)
        cs = mem.pointer(node + o["node_callstack"], "the node's call stack", null=True) if cs_engaged else 0
        caller = function
        while cs and len(inlined) < MAX_INLINED:
            callee = read_string(mem, cs + o["call_name"]) or None
            inlined.append(read_place(mem, o, cs + o["call_range"], caller))  # the call site, in its caller
            caller = callee
            engaged = mem.u8(cs + o["call_callee"] + 8)
            cs = mem.pointer(cs + o["call_callee"], "an inlined callee", null=True) if engaged else 0
        if not mem.u8(node + o["node_range"] + o["range_size"]):
            level.why = ("the graph node has no source range (torch.jit.trace gives a node one from the Python "
                         "line that traced it; a node made otherwise has none)")
            level.places = inlined
            return level
        level.places = [*inlined, read_place(mem, o, node + o["node_range"], caller)]
    except BadValue as exc:
        level.why = f"its source: {exc}"
    return level


def read_levels(mem: Memory, layout, state: int, offset: int) -> list[Level]:
    """Every frame of the interpreter, outermost first."""
    o = layout.offsets
    begin, n = read_vector(mem, state + offset, o["frame_size"], MAX_FRAMES)
    return [read_level(mem, layout, begin + k * o["frame_size"]) for k in range(n)]
