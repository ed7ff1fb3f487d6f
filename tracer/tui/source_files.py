"""Finding a recorded frame's source file on this machine, and reading a window of it.

A session may come from another checkout or another machine, so a recorded path is tried as is,
then relative to the current directory (when it was under the recording's cwd), then under this
interpreter's site-packages (same torch, different prefix). A Python frame carries the text of
its line: if the file found here says something else at that line, it is flagged as changed.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from tracer.export.source import relocated
from tracer.model import Frame

MAX_FILE_BYTES = 8 * 1024 * 1024
_CPP_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".inl", ".ipp", ".tcc"}


@dataclass
class Located:
    path: Path | None  # the file on this machine, None when it is not here
    moved_from: str | None = None  # the recorded path, when the file was found elsewhere
    changed: bool = False  # the line's text differs from what was recorded


def language(file: str | None) -> str:
    suffix = os.path.splitext(file or "")[1].lower()
    if suffix in (".py", ".pyi"):
        return "python"
    if suffix in _CPP_SUFFIXES:
        return "cpp"
    return "text"


def _candidates(file: str, cwd: str | None) -> list[tuple[Path, bool]]:
    """Where the file may be, each with whether finding it there means it moved."""
    p = Path(file)
    here = [(p, False)] if p.is_absolute() else ([(Path(cwd) / p, False)] if cwd else []) + [(Path.cwd() / p, bool(cwd))]
    return here + [(Path(c), True) for c in relocated(file, cwd)]


def locate(frame: Frame, cwd: str | None = None) -> Located:
    """Where this frame's file is here, if anywhere."""
    if not frame.file or frame.file.startswith("<"):
        return Located(None)
    for candidate, elsewhere in _candidates(frame.file, cwd):
        try:
            if not candidate.is_file():
                continue
        except OSError:
            continue
        moved = frame.file if elsewhere and str(candidate) != frame.file else None
        changed = False
        if frame.kind == "python" and frame.source and frame.line:
            here = line_text(candidate, frame.line)
            changed = here is None or here.strip() != frame.source.strip()
            if changed and moved is not None:
                continue  # a stranger's file that does not match: keep looking
        return Located(candidate, moved, changed)
    return Located(None)


@functools.lru_cache(maxsize=32)
def _read_lines(path: str, mtime_ns: int) -> tuple[str, ...] | None:
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return None
        with open(path, "r", encoding="utf-8", errors="replace") as fh:
            return tuple(fh.read().splitlines())
    except OSError:
        return None


def read_lines(path: Path) -> tuple[str, ...] | None:
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    return _read_lines(str(path), mtime)


def line_text(path: Path, line: int) -> str | None:
    lines = read_lines(path)
    if lines is None or not 1 <= line <= len(lines):
        return None
    return lines[line - 1]


def window(total: int, line: int, height: int) -> tuple[int, int]:
    """First and last line numbers (1-based, inclusive) of a ``height``-line window around ``line``."""
    height = max(1, height)
    start = max(1, line - height // 2)
    end = min(total, start + height - 1)
    start = max(1, min(start, end - height + 1))
    return start, end
