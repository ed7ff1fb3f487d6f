"""What a hop carried: argument values read from the target's memory, never by calling into it.

``layout.establish`` finds where one torch build keeps each field (a probe + the wheel's headers,
cached by build-id); the readers take ``read_memory(address, length) -> bytes``, that layout and an
address, and give a value or ``Unreadable(why)``. Standard library only: the gdb agent imports it.
"""
from .layout import LayoutUnknown, TorchLayout
from .memory import ProcMemory, Unreadable
from .tensor import TensorValue, UndefinedTensor, read_tensor, read_thp_variable

__all__ = ["LayoutUnknown", "TorchLayout", "ProcMemory", "Unreadable", "TensorValue", "UndefinedTensor",
           "read_tensor", "read_thp_variable"]
