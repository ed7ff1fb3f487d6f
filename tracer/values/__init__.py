"""What a hop carried: argument values read from the target's memory, never by calling into it.

``layout.establish`` finds where one torch build keeps each field (a probe + the wheel's headers,
cached by build-id); the readers take ``read_memory(address, length) -> bytes``, that layout and an
address, and give a value or ``Unreadable(why)``. ``describe`` goes from a C++ parameter type to the
right reader (its docstring says where each type is passed); ``agent`` is the same for the gdb agent,
with the layout installed once. Every value has ``to_dict()`` (JSON) and ``text()`` (one line).
Standard library only: the gdb agent imports it.

The names below are imported from their modules when first asked for (PEP 562): a process that needs
only ``layout`` or ``memory`` (pttrace's recorder, for TorchScript's frame layout) does not import the
readers of every value type (~20-30 ms of CPU at each ``pttrace run``, measured with ``-X importtime``).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent import agent_tensor, agent_value, install
    from .describe import Opaque, Plain, describe
    from .layout import LayoutUnknown, TorchLayout
    from .memory import ProcMemory, Unreadable
    from .objects import NoneValue, ScalarValue, TensorList
    from .tensor import TensorValue, UndefinedTensor, read_tensor, read_tensor_impl, read_thp_variable

_WHERE = {
    "agent_tensor": "agent", "agent_value": "agent", "install": "agent",
    "Opaque": "describe", "Plain": "describe", "describe": "describe",
    "LayoutUnknown": "layout", "TorchLayout": "layout",
    "ProcMemory": "memory", "Unreadable": "memory",
    "NoneValue": "objects", "ScalarValue": "objects", "TensorList": "objects",
    "TensorValue": "tensor", "UndefinedTensor": "tensor", "read_tensor": "tensor", "read_tensor_impl": "tensor",
    "read_thp_variable": "tensor",
}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
