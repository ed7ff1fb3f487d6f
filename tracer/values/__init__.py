"""What a hop carried: argument values read from the target's memory, never by calling into it.

``layout.establish`` finds where one torch build keeps each field (a probe + the wheel's headers,
cached by build-id); the readers take ``read_memory(address, length) -> bytes``, that layout and an
address, and give a value or ``Unreadable(why)``. ``describe`` goes from a C++ parameter type to the
right reader (its docstring says where each type is passed); ``agent`` is the same for the gdb agent,
with the layout installed once. Every value has ``to_dict()`` (JSON) and ``text()`` (one line).
Standard library only: the gdb agent imports it.
"""
from .agent import agent_tensor, agent_value, install
from .describe import Opaque, Plain, describe
from .layout import LayoutUnknown, TorchLayout
from .memory import ProcMemory, Unreadable
from .objects import NoneValue, ScalarValue, TensorList
from .tensor import TensorValue, UndefinedTensor, read_tensor, read_tensor_impl, read_thp_variable

__all__ = ["LayoutUnknown", "TorchLayout", "ProcMemory", "Unreadable", "TensorValue", "UndefinedTensor",
           "ScalarValue", "TensorList", "NoneValue", "Plain", "Opaque", "describe", "read_tensor",
           "read_tensor_impl", "read_thp_variable", "agent_tensor", "agent_value", "install"]
