"""The Python frame dynamo ran compiled code in place of: marked with the graph that ran ("graph 1").

dynamo's frame hook runs a replacement for the frame's code (``dynamo_eval_custom_code`` in
libtorch_python), which loads the compiled graph as a global named ``__compiled_fn_N_<uuid>``; so the
Python frame right inside ``dynamo_eval_custom_code`` gets the N of each such name its code loads
(read from the code object's ``co_names`` in memory, once per frame record). Only frames a libtorch_python
frame starts are read (its frames are named after the hit, from pttrace's index, so the agent does not know
which one is ``dynamo_eval_custom_code``): reading every frame's names would cost a read per name at
every new frame.
"""
from __future__ import annotations

from tracer.gdb.agent.pycode import compiled_graphs
from tracer.gdb.agent.state import CACHES

EVAL_CUSTOM_CODE = "dynamo_eval_custom_code"
_MAX = 4096
_marked: dict[int, tuple] = {}  # id(record) -> (record, its marked copy or None): records are shared, so copied


def mark_compiled(frames: list) -> None:
    """Replace, in ``frames`` (outermost first), the Python frame dynamo ran compiled code in by a copy
    that says which graph."""
    for i in range(len(frames) - 1):
        f = frames[i]
        if f["kind"] != "native" or not _may_be_dynamo(f):
            continue
        inner = frames[i + 1]
        if inner["kind"] != "python" or "compiled" in inner:
            continue
        marked = _marked_copy(inner)
        if marked is not None:
            frames[i + 1] = marked


def _may_be_dynamo(frame) -> bool:
    """``dynamo_eval_custom_code``, or a libtorch_python frame gdb left for pttrace's index to name (its
    unwind tables only: the name comes later, in a fill record): a few such frames start Python code."""
    name = frame.get("function")
    if name is not None:
        return name == EVAL_CUSTOM_CODE
    return (frame.get("library") or "").endswith("/libtorch_python.so")


def _marked_copy(record):
    entry = _marked.get(id(record))
    if entry is not None and entry[0] is record:
        return entry[1]
    code = getattr(record, "code", 0)
    runtime = CACHES.py_runtime
    compiled = compiled_graphs(runtime.code_names(code)) if runtime and code else None
    marked = None
    if compiled:
        marked = type(record)(record)
        marked.code = code
        marked["compiled"] = compiled
    if len(_marked) >= _MAX:
        _marked.clear()
    _marked[id(record)] = (record, marked)
    return marked
