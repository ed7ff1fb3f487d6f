"""CPython's threads and Python frames read from a process's memory, 3.10 to 3.13 (3.14-ready), with or
without debug information.

- ``reader.PythonRuntime(read, runtime_address, minor, read_errors)``: over a ``read(address, size) ->
  bytes`` callback that raises one of ``read_errors`` where memory is unreadable; ``threads()`` -> ``ThreadState``s, ``frames(tstate)`` -> ``FrameChain`` (one group of
  ``PyFrame``s per C-level eval frame, innermost first). Raises ``LayoutError`` (one sentence).
- ``objects.ThreadNames(runtime).names()`` -> {thread ident: ``threading`` name} (``threading._active``
  read through dicts and instance attributes; no code runs in the process).
- ``layout``: the offsets per version (``tables.py`` for 3.10-3.12, ``_Py_DebugOffsets`` for 3.13+).
- ``process``: find ``_PyRuntime`` in a live process and read /proc/PID/mem (outside gdb; it imports
  ``tracer.symbols``, so the gdb agent does not import it).
Only the standard library here otherwise: the agent imports this package inside gdb.
"""
from .layout import LayoutError, NotRunning
from .reader import FrameChain, PyFrame, PythonRuntime, ThreadState

__all__ = ["FrameChain", "LayoutError", "NotRunning", "PyFrame", "PythonRuntime", "ThreadState"]
