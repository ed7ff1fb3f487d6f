"""``pttrace-tensor EXPR`` (``tensor EXPR`` at the TUI's gdb prompt): a tensor's metadata from the target's
memory by pttrace's reader (tracer/values), never by calling into the target.

EXPR is a gdb expression: an ``at::Tensor`` (``a``), a reference or pointer to one, or its address
(``0x7ffd...``, ``$rsi``, as a ``const at::Tensor&`` argument is passed)."""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

_MASK = (1 << 64) - 1
_REFS = (gdb.TYPE_CODE_REF, getattr(gdb, "TYPE_CODE_RVALUE_REF", -1))


def tensor_address(value) -> int:
    code = value.type.strip_typedefs().code
    if code in _REFS:
        return int(value.referenced_value().address) & _MASK
    if code in (gdb.TYPE_CODE_PTR, gdb.TYPE_CODE_INT):
        return int(value) & _MASK
    if value.address is not None:
        return int(value.address) & _MASK
    raise gdb.GdbError("that value is not in memory: give an at::Tensor, a pointer to one or its address")


def tensor(arg: str) -> None:
    expr = arg.strip()
    if not expr:
        raise gdb.GdbError("usage: tensor EXPR (an at::Tensor, a reference or pointer to one, or its address)")
    try:
        from tracer.values.agent import agent_tensor_text
    except ImportError:
        raise gdb.GdbError("pttrace's tensor reader (tracer.values) is not available") from None
    address = tensor_address(gdb.parse_and_eval(expr))
    text = agent_tensor_text(address, lambda at, n: bytes(gdb.selected_inferior().read_memory(at, n)))
    gdb.write(f"at::Tensor at 0x{address:x}: {text}\n")


class TensorCommand(gdb.Command):
    def __init__(self) -> None:
        super().__init__("pttrace-tensor", gdb.COMMAND_DATA)

    def invoke(self, arg, from_tty):
        tensor(arg)


def install() -> None:
    TensorCommand()
