"""The DispatchKeySet a dispatcher hop was called with, read at its entry from the register or stack slot
its signature puts it in (``tracer.dispatch.keyset_abi``), or why it was not read.

No gdb import: it reads through the frame and memory reader it is given, so it is tested outside gdb.
Where the key set is depends only on the function (and its library's debug information), so it is
worked out once per function; a hit costs one register read.
"""
from __future__ import annotations

import re

from tracer.dispatch import keyset_abi, native_functions
from tracer.gdb.agent.state import CACHES

_U64 = 0xFFFFFFFFFFFFFFFF
_where_cache: dict[tuple[str, str | None], keyset_abi.KeysetArg | None] = {}
_returns_cache: dict[str | None, object] = {}


def entry_keyset(frame, name: str | None, library: str | None = None,
                 read_memory=None) -> tuple[int | None, str | None]:
    """(raw key set, None); (None, why it was not read); or (None, None) if the function takes none.

    Only valid at the function's first instruction (a breakpoint on its address), before its prologue
    moves the arguments: so only for the frame a breakpoint stopped in."""
    if frame is None or not name or keyset_abi.KEYSET not in name:
        return None, None
    debug = _debug_argument(frame)
    if debug is not None:
        return debug
    key = (name, library)
    if key in _where_cache:
        arg = _where_cache[key]
    else:
        arg = _where_cache[key] = _where(frame, name, library)
    if arg is None:
        return None, None
    try:
        if arg.register:
            return int(frame.read_register(arg.register)) & _U64, None
        if arg.stack and read_memory is not None:
            rsp = int(frame.read_register("rsp")) & _U64
            return int.from_bytes(bytes(read_memory(rsp + arg.stack, 8)), "little"), None
    except (RuntimeError, ValueError, OSError) as exc:  # gdb.error and gdb.MemoryError are RuntimeErrors
        return None, f"gdb could not read it: {exc}"
    return None, arg.why or "it is passed on the stack, which was not read"


def _where(frame, name: str, library: str | None) -> keyset_abi.KeysetArg | None:
    sig = keyset_abi.signature_from_name(name, _op_returns(library))
    if sig is None:
        return None
    arg = keyset_abi.locate(sig)
    if arg is not None and arg.register is None and arg.stack is None:
        # The name does not tell: the library's debug information may (this, the return type).
        debug = _debug_signature(frame)
        if debug is not None:
            arg = keyset_abi.locate(debug) or arg
    return arg


def _debug_argument(frame) -> tuple[int | None, str | None] | None:
    """Past the prologue of a function with debug information (gdb's ``break NAME`` stops there), the
    argument is where DWARF says, not in its entry register: gdb reads it by name. None elsewhere."""
    pc_of = getattr(frame, "pc", None)
    pc = pc_of() if pc_of is not None else None
    if pc is not None and pc in CACHES.plain_entry:
        return None  # asking gdb for the block would make gdb's frame #0 (regs.py): ~0.3 ms of its CPU a hit
    try:
        block = frame.block()
    except RuntimeError:  # no debug information for this pc
        block = None
    while block is not None and block.function is None:
        block = block.superblock
    if block is None or frame.pc() == block.start:
        if pc is not None:
            CACHES.plain_entry.add(pc)
        return None  # at the first instruction: the entry registers are right, DWARF's slots not yet
    for symbol in block:
        if not symbol.is_argument or _type_name(symbol.type) != keyset_abi.KEYSET:
            continue
        try:
            return int(frame.read_var(symbol)["repr_"]) & _U64, None
        except (RuntimeError, ValueError) as exc:
            return None, f"gdb could not read {symbol.name}: {exc}"
    return None


def _debug_signature(frame) -> keyset_abi.Signature | None:
    """The signature gdb knows from DWARF (a debug build: the user's extension, say); None without it."""
    try:
        symbol = frame.function()
        if symbol is None:
            return None
        ftype = symbol.type
        fields = ftype.fields()
        target = ftype.target()
    except (RuntimeError, AttributeError, TypeError):
        return None
    has_this = bool(fields) and bool(getattr(fields[0], "artificial", False))
    params = tuple(_type_name(f.type) for f in fields[1 if has_this else 0:])
    returns = _type_name(target) if target is not None else "void"
    return keyset_abi.Signature(params, has_this, returns)


def _type_name(gtype) -> str:
    """gdb spells ``const at::Tensor &``; the ABI rules read ``at::Tensor const&``-style names."""
    try:
        text = str(gtype.strip_typedefs())
    except (RuntimeError, AttributeError):
        text = str(gtype)
    text = re.sub(r"\b(?:class|struct|union|enum) ", "", text).replace(" &", "&").replace(" *", "*")
    if text.startswith("const "):
        text = text[len("const "):]
        if text.endswith(("&", "*")):
            text = text[:-1] + " const" + text[-1]
    return text


def _op_returns(library: str | None):
    """The C++ return types of the operators of the torch ``library`` belongs to, by the names its generated
    code gives them (``native_functions.yaml`` beside that torch); None if there is no such file."""
    if library not in _returns_cache:
        path = native_functions.yaml_path([library]) if library else None
        try:
            table = native_functions.cached_return_types(str(path)) if path else None
        except OSError:
            table = None
        _returns_cache[library] = table.get if table else None
    return _returns_cache[library]
