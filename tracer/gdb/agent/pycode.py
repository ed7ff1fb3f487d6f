"""Python frames as recorded, from what was read of a code object: no gdb, so it is tested outside it.

A code object is read once (``CodeInfo``); each (code object, instruction) is one frame record,
shared by every hit that stops there.
"""
from __future__ import annotations

from dataclasses import dataclass

from tracer.gdb.linetable import line_at, line_ranges
from tracer.records import CachedFrame

MAX_SOURCE = 400  # characters of a source line kept


@dataclass
class CodeInfo:
    file: str | None
    function: str | None
    first: int  # co_firstlineno
    start: int  # address of the first instruction (co_code_adaptive)
    ranges: list  # linetable.line_ranges of co_linetable
    # exec'd code only: the raw pointers to its file name, name and line table, to notice another code
    # object taking its address (None: file-backed code, which lives as long as its module).
    ident: bytes | None = None

    @classmethod
    def read(cls, file: str | None, function: str | None, first: int, start: int, linetable: bytes,
             ident: bytes | None = None) -> "CodeInfo":
        return cls(file, function, first, start, line_ranges(linetable, first), ident)

    def line(self, instr: int) -> int | None:
        """The line of the instruction at address ``instr`` (its first line if before the first one)."""
        unit = (instr - self.start) // 2  # code units are 2 bytes
        return line_at(self.ranges, unit) if unit >= 0 else self.first


def exec_code(filename: str | None) -> bool:
    """Code compiled from a string (<string>, fx's <eval_with_key>): it can die and another code object
    take its address, so its identity is checked at each use."""
    return bool(filename) and filename.startswith("<") and not filename.startswith("<frozen ")


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


UNKNOWN = {"kind": "python", "function": None, "short": None, "library": None, "address": None,
           "file": None, "line": None, "layer": "python", "dispatch_key": None, "source": None}


def frame_record(info: CodeInfo, instr: int, sources: SourceLines) -> CachedFrame:
    line = info.line(instr)
    return CachedFrame({
        "kind": "python",
        "function": info.function,
        "short": info.function,
        "library": None,
        "address": None,
        "file": info.file,
        "line": line,
        "layer": "python",
        "dispatch_key": None,
        "source": sources.line(info.file, line),
    })
