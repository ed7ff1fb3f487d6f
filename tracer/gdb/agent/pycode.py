"""Python frames as recorded, from what ``tracer.pyruntime`` read of them: no gdb, so it is tested
outside it. Each (code object, instruction) is one frame record, shared by every hit that stops there.
"""
from __future__ import annotations

from tracer.session.records import CachedFrame

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


def frame_record(frame, sources: SourceLines) -> CachedFrame:
    """The session record of a ``tracer.pyruntime.PyFrame``, with its source line."""
    return CachedFrame({
        "kind": "python",
        "function": frame.function,
        "short": frame.function,
        "library": None,
        "address": None,
        "file": frame.file,
        "line": frame.line,
        "layer": "python",
        "dispatch_key": None,
        "source": sources.line(frame.file, frame.line),
    })
