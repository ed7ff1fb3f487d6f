"""The arguments of the function a hit stopped in, read at its first instruction from where its signature
puts them (``tracer.dispatch.arg_abi``), and turned into values by type (``argvalues.py``).

No gdb import: it reads through the frame and memory reader it is given, so it is tested outside gdb.
Where each argument is depends only on the function, so a function's plan is worked out once (its
demangled name, the operator header that names its parameters and gives its return type, its library's
native_functions.yaml); a hit then costs a register read per argument and the memory reads of its values.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from tracer.dispatch import arg_abi, declarations, keyset_abi, op_headers
from tracer.gdb.agent import argvalues
from tracer.gdb.agent.keyset import _debug_signature, _op_returns, _type_name

_U64 = 0xFFFFFFFFFFFFFFFF
_OPS = re.compile(r"^at::_ops::(\w+)::(call|redispatch)\(")
# Kernels named after their operator: the generated autograd/tracing kernels and the backends' wrappers.
_KERNEL = re.compile(r"^(?:torch::autograd::VariableType|torch::ADInplaceOrView|torch::TraceType|"
                     r"at::functionalization)::(?:\(anonymous namespace\)::)?(\w+)\(|"
                     r"^at::(?:\(anonymous namespace\)::)*wrapper_[A-Za-z0-9]+_(\w+)\(")
MAX_ARGS = 32  # a function with more parameters than this has its first MAX_ARGS read
# Where a parameter's name comes from (an argument's ``named_by``); without one it is unnamed.
NAMED_BY_SCHEMA = "schema"  # the operator's ATen/ops/<op>_ops.h (the schema's names, as torchgen wrote them)
NAMED_BY_DECLARATION = "declaration"  # the function's own declaration in torch/include (declarations.py)
NAMED_BY_DWARF = "DWARF"  # a debug build's debug information


@dataclass(frozen=True)
class Plan:
    """A function's parameters: where each is at its entry, and its name where a header gives it."""

    locations: tuple[arg_abi.ArgLocation, ...]
    names: tuple[str | None, ...]
    op: str | None = None  # ``at::_ops::<op>::call``/``redispatch``: the operator's struct name
    why: str | None = None  # no plan: why (the name has no parameter list)
    named_by: tuple[str | None, ...] = ()  # where each name comes from: NAMED_BY_*


_plans: dict[tuple[str, str | None], Plan] = {}


def plan(frame, name: str, library: str | None) -> Plan:
    """The plan of function ``name`` in ``library``, worked out at its first hit."""
    key = (name, library)
    found = _plans.get(key)
    if found is None:
        found = _plans[key] = _make_plan(frame, name, library)
    return found


def _make_plan(frame, name: str, library: str | None) -> Plan:
    sig = keyset_abi.signature_from_name(name, _op_returns(library))
    if sig is None:
        return Plan((), (), why="its name has no parameter list")
    names: tuple[str | None, ...] = (None,) * len(sig.params)
    named_by: tuple[str | None, ...] = names
    m = _OPS.match(name)
    op = m.group(1) if m else None
    ops_dir = op_headers.include_dir(library)
    declared = None
    if m:
        declared = op_headers.signature(ops_dir, m.group(1), m.group(2))
    else:
        k = _KERNEL.match(name)
        if k:
            declared = op_headers.matching(ops_dir, _tokens(k.group(1) or k.group(2)), sig.params)
    if declared is not None:
        has_this = False if m or sig.has_this is None else sig.has_this
        sig = keyset_abi.Signature(sig.params, has_this, sig.returns or op_headers.demangled(declared.returns))
        if len(declared.names) == len(sig.params):
            names, named_by = declared.names, (NAMED_BY_SCHEMA,) * len(sig.params)
    elif _ADAPTER.match(name):
        names, named_by = _adapter_names(ops_dir, name, sig.params)
    elif _BINDING.match(name) and len(sig.params) in (2, 3):
        sig = keyset_abi.Signature(sig.params, False, sig.returns or "_object*")
        names, named_by = ("self_", "args", "kwargs")[: len(sig.params)], (_BINDING_DECL,) * len(sig.params)
    else:
        own = declarations.find(ops_dir, name.split("(", 1)[0], sig.params)
        if own is not None:
            has_this = own.member if sig.has_this is None else sig.has_this
            sig = keyset_abi.Signature(sig.params, has_this, sig.returns or op_headers.demangled(own.returns))
            names, named_by = own.names, (f"{NAMED_BY_DECLARATION} {own.where}",) * len(sig.params)
    locations = keyset_abi.arguments(sig)
    if any(loc.how is None for loc in locations):
        debug = _debug_signature(frame)  # a debug build: DWARF knows `this` and the return type
        if debug is not None and len(debug.params) == len(sig.params):
            locations = keyset_abi.arguments(debug)
    if not all(names):
        dwarf = _debug_names(frame)
        if dwarf is not None and len(dwarf) == len(sig.params):  # the names no other source gave
            named_by = tuple(b if n else NAMED_BY_DWARF for n, b in zip(names, named_by))
            names = tuple(n or d for n, d in zip(names, dwarf))
    return Plan(tuple(locations[:MAX_ARGS]), names[:MAX_ARGS], op, named_by=named_by[:MAX_ARGS])


# torchgen's Python bindings of torch.* and Tensor methods: every one is declared ``static PyObject *
# NAME(PyObject* self_, PyObject* args[, PyObject* kwargs])`` (gen_python_functions.py, the templates).
_BINDING = re.compile(r"^torch::autograd::(?:\(anonymous namespace\)::)?THPVariable_\w+\(_object\*(?:, _object\*)*\)$")
_BINDING_DECL = f"{NAMED_BY_DECLARATION} torchgen/packaged/autograd/gen_python_functions.py"


def _tokens(token: str) -> list[str]:
    """The ``at::_ops`` structs a kernel named after its operator may be of: torchgen's wrappers put the
    overload first (``wrapper_CPU_memory_format_empty``: ``empty_memory_format``)."""
    bare = token.lstrip("_")
    out = [token, token.replace("_out", "", 1), bare]
    out += [bare[i + 1:] + "_" + bare[:i] for i, ch in enumerate(bare) if ch == "_" and 0 < i < len(bare) - 1]
    return list(dict.fromkeys(out))


# The boxing adapter of an unboxed kernel: ``call(OperatorKernel* functor, DispatchKeySet dispatchKeySet,
# ParameterTypes... args)`` (make_boxed_from_unboxed_functor.h), its pack the wrapped kernel's operator's.
_ADAPTER = re.compile(r"^c10::impl::wrap_kernel_functor_unboxed_<(?:.*?&([A-Za-z_][\w:() ]*?)>)?")
_ADAPTER_HEAD = ("c10::OperatorKernel*", "c10::DispatchKeySet")
_ADAPTER_DECL = f"{NAMED_BY_DECLARATION} ATen/core/boxing/impl/make_boxed_from_unboxed_functor.h"


def _adapter_names(ops_dir, name: str, params: tuple[str, ...]) -> tuple[tuple, tuple]:
    """A boxing adapter's parameter names: its own two from its template's declaration, the rest from the
    schema of the operator whose kernel it wraps (unnamed where the kernel is not named after one)."""
    names: list[str | None] = [None] * len(params)
    named_by: list[str | None] = [None] * len(params)
    if params[:2] != _ADAPTER_HEAD:
        return tuple(names), tuple(named_by)
    names[:2], named_by[:2] = ["functor", "dispatchKeySet"], [_ADAPTER_DECL] * 2
    wrapped = _ADAPTER.match(name)
    k = _KERNEL.match(wrapped.group(1).strip() + "(") if wrapped and wrapped.group(1) else None
    declared = op_headers.matching(ops_dir, _tokens(k.group(1) or k.group(2)), params[2:]) if k else None
    if declared is not None and len(declared.names) == len(params) - 2:
        names[2:], named_by[2:] = list(declared.names), [NAMED_BY_SCHEMA] * (len(params) - 2)
    return tuple(names), tuple(named_by)


def _debug_names(frame) -> tuple[str | None, ...] | None:
    """The parameters' names from a debug build's DWARF (``this`` left out); None without it."""
    try:
        block = frame.block()
        function = frame.function()
    except RuntimeError:  # no debug information for this pc
        return None
    want = function.name if function is not None else None
    while block is not None and (block.function is None or (want is not None and block.function.name != want)):
        block = block.superblock
    if block is None:
        return None
    names = tuple(s.name for s in block if s.is_argument and s.name != "this")
    return names or None


def read_entry(frame, name: str | None, library: str | None, read_memory) -> list[dict] | None:
    """The arguments at the function's first instruction: one dict each (``argvalues`` describes the
    shape); None when the function's name gives no parameters. Only valid for the frame a breakpoint
    stopped in, before its prologue moves them."""
    if frame is None or not name:
        return None
    p = plan(frame, name, library)
    if p.why is not None:
        return None
    mem = argvalues.Memory(read_memory)
    out = []
    for loc, head, by_layout in _parts(p):
        arg: dict = dict(head)
        if loc.how is None:
            arg["unreadable"] = loc.why
        else:
            try:
                data, address = _raw(frame, loc, mem)
                if by_layout:
                    arg.update(argvalues.from_values(loc.type, _as_passed(data, address), read_memory))
                else:
                    arg.update(argvalues.describe(loc.object_type, data, address, mem))
            except argvalues.Unreadable as exc:
                arg["unreadable"] = str(exc)
            except (RuntimeError, ValueError, OSError, OverflowError) as exc:  # gdb.error is a RuntimeError
                arg["unreadable"] = f"gdb could not read it: {exc}"
        out.append(arg)
    return out


def entry_key(frame, name: str | None, library: str | None) -> tuple | None:
    """What ``read_entry``'s result depends on besides the memory its readers read: the function and the
    words of every register its arguments came in (and the stack pointer, when one is on the stack).
    None when there is nothing to read, or a register cannot be."""
    if frame is None or not name:
        return None
    p = plan(frame, name, library)
    if p.why is not None:
        return None
    registers = _registers_of.get(id(p))
    if registers is None or registers[0] is not p:
        names = [r for loc in p.locations if loc.how is not None for r in loc.registers]
        if any(loc.how is not None and not loc.registers for loc in p.locations):
            names.append("rsp")
        registers = _registers_of[id(p)] = (p, tuple(dict.fromkeys(names)))
    words = getattr(frame, "words", None)  # frame #0 read with one ptrace call (regs.StopFrame): no gdb call
    found = words(registers[1]) if words is not None else None
    if found is not None:
        return (name, library) + found
    try:
        return (name, library) + tuple(_word(frame, r) for r in registers[1])
    except (RuntimeError, ValueError, OverflowError):  # gdb.error is a RuntimeError
        return None


_registers_of: dict[int, tuple] = {}
_parts_of: dict[int, tuple] = {}


def _parts(p: Plan) -> tuple:
    """Per parameter: its location, the fields of its record that do not change between hits, and whether
    tracer.values reads it; worked out at a function's first hit (each hit repeats the same work)."""
    found = _parts_of.get(id(p))
    if found is None or found[0] is not p:
        parts = []
        for i, (loc, arg_name) in enumerate(zip(p.locations, p.names)):
            head = {"type": loc.type, "where": loc.where}
            if arg_name:
                head["name"] = arg_name
                named_by = p.named_by[i] if i < len(p.named_by) else None
                if named_by:
                    head["named_by"] = named_by
            parts.append((loc, head, loc.how is not None and argvalues.needs_layout(loc.object_type)))
        found = _parts_of[id(p)] = (p, tuple(parts))
    return found[1]


def _word(frame, register: str) -> int:
    if register.startswith("xmm"):
        return int(frame.read_register(register)["v2_int64"][0]) & _U64
    return int(frame.read_register(register)) & _U64


def _raw(frame, loc: arg_abi.ArgLocation, mem: "argvalues.Memory") -> tuple[bytes | None, int | None]:
    """(the object's bytes, None) when it travels by value; (None, its address) otherwise."""
    if loc.registers:
        words = [_word(frame, r) for r in loc.registers]
    else:
        rsp = _word(frame, "rsp")
        if loc.how == "stack":
            return None, rsp + (loc.stack or 0)
        count = 1 if loc.how == "address" else max(1, (loc.size + 7) // 8)
        words = list(struct.unpack(f"<{count}Q", mem.read(rsp + (loc.stack or 0), 8 * count)))
    if loc.how == "address":
        return None, words[0]
    return b"".join(w.to_bytes(8, "little") for w in words), None


def _as_passed(data: bytes | None, address: int | None):
    """The value as ``tracer.values.describe`` takes it: an address, a register's word, or two words."""
    if data is None:
        return address
    words = struct.unpack(f"<{len(data) // 8}Q", data[: len(data) // 8 * 8])
    return words[0] if len(words) == 1 else tuple(words)


def read_debug(frame) -> list[dict] | None:
    """An outer frame's arguments where its library has DWARF (a debug build), as gdb's ``bt`` shows them:
    by name and type through the frame's symbols; ``unreadable`` where DWARF says it was optimised out.
    None without debug information for the frame's pc."""
    try:
        block = frame.block()
        function = frame.function()
    except RuntimeError:
        return None
    # The frame's own function's block (a pc in inlined code has the inlined function's blocks inside it).
    want = function.name if function is not None else None  # gdb's Symbols compare by identity: by name
    while block is not None and (block.function is None or (want is not None and block.function.name != want)):
        block = block.superblock
    if block is None:
        return None
    out = []
    for symbol in block:
        if not symbol.is_argument:
            continue
        arg = {"name": symbol.name, "type": _type_name(symbol.type), "where": "DWARF", "named_by": NAMED_BY_DWARF}
        try:
            value = frame.read_var(symbol)
            if getattr(value, "is_optimized_out", False):
                arg["unreadable"] = "not available (optimised out)"
            else:
                arg.update(argvalues.describe_gdb_value(value, arg["type"]))
        except (RuntimeError, ValueError) as exc:
            arg["unreadable"] = f"not available ({exc})"
        out.append(arg)
        if len(out) >= MAX_ARGS:
            break
    return out
