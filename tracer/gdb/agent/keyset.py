"""The DispatchKeySet a dispatcher hop was called with, read from the stopped frame's registers.

No gdb import: it reads through the frame object it is given, so it is tested outside gdb.
"""
from __future__ import annotations

_U64 = 0xFFFFFFFFFFFFFFFF
_NEAR = 1 << 24  # an address this close to the stack pointer is on the caller's stack


def entry_keyset(frame, name: str | None) -> int | None:
    """The key set a function taking ``c10::DispatchKeySet`` first was called with, read at its entry.

    It is the first argument (a 64-bit value in rdi on x86-64) of ``redispatch`` and of the kernels
    that take one; only valid at the function's first instructions, so only for the stopped frame.
    A function returning a class by value (at::Tensor) gets the address of the return slot, on the
    caller's stack, as a hidden first argument: the key set then comes in rsi.
    """
    if frame is None or not name or "(c10::DispatchKeySet" not in name:
        return None
    try:
        rdi = int(frame.read_register("rdi")) & _U64
        rsp = int(frame.read_register("rsp")) & _U64
        if abs(rdi - rsp) < _NEAR:
            return int(frame.read_register("rsi")) & _U64
        return rdi
    except (RuntimeError, ValueError):  # gdb.error is a RuntimeError: a register gdb cannot read here
        return None
