"""Python frames as recorded, from what ``tracer.pyruntime`` read of them: no gdb, so it is tested
outside it. Each (code object, instruction) is one frame record, shared by every hit that stops there.
"""
from __future__ import annotations

import re

from tracer.dispatch.classify import python_layer
from tracer.session.records import CachedFrame

_COMPILED_FN = re.compile(r"__compiled_fn_(\d+)(?:_|$)")

MAX_SOURCE = 400  # characters of a source line kept


class SourceLines:
    """Source lines of the files Python frames point at, each file read once."""

    def __init__(self) -> None:
        self._files: dict[str, list[str]] = {}

    def line(self, path: str | None, line: int | None) -> str | None:
        if not path or not line:
            return None
        lines = self._files.get(path)
        if lines is None:
            try:
                with open(path, "r", encoding="utf-8", errors="replace") as fh:
                    lines = fh.read().splitlines()
            except OSError:
                lines = []
            self._files[path] = lines
        if 0 < line <= len(lines):
            return lines[line - 1].strip()[:MAX_SOURCE]
        return None


def compiled_graphs(names: list[str] | None) -> str | None:
    """``graph 1`` for code that loads ``__compiled_fn_1_<uuid>``: dynamo's replacement for a frame it
    compiled, which runs that graph in the frame's place (names from ``PythonRuntime.code_names``)."""
    found = list(dict.fromkeys(m.group(1) for m in map(_COMPILED_FN.match, names or ()) if m))
    if not found:
        return None
    return ("graph " if len(found) == 1 else "graphs ") + ", ".join(found)


class PyFrameRecord(CachedFrame):
    """A Python frame's record, knowing the code object it ran (not written: for ``compiled.py``)."""

    __slots__ = ("code",)
    code: int  # the code object's address (0: not known)


def frame_record(frame, sources: SourceLines, names: list[str] | None = None) -> CachedFrame:
    """The session record of a ``tracer.pyruntime.PyFrame``, with its source line; ``names``: the names
    its code loads (for the compiled graph dynamo runs in its place)."""
    record = PyFrameRecord({
        "kind": "python",
        "function": frame.function,
        "short": frame.function,
        "library": None,
        "address": None,
        "file": frame.file,
        "line": frame.line,
        "layer": python_layer(frame.file),
        "dispatch_key": None,
        "source": sources.line(frame.file, frame.line),
    })
    record.code = getattr(frame, "code", 0)
    compiled = compiled_graphs(names)
    if compiled:
        record["compiled"] = compiled
    return record
