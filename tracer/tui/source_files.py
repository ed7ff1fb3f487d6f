"""Finding a recorded frame's source file on this machine, and reading a window of it.

A session may come from another checkout or another machine, so a recorded path is tried as is,
then relative to the current directory (when it was under the recording's cwd), then under this
interpreter's site-packages (same torch, different prefix). Each candidate goes through
``local_files.source_lines``, the one check of what may be shown: a Python file whose line says what
the recording says (a file that says something else is not shown), a native source its library's
DWARF names here or under the source directory (``--source-dir``, ``$PTTRACE_SOURCE_DIR``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tracer.export.local_files import SourceTrust, read_text, source_lines
from tracer.export.source import relocated
from tracer.session.model import Frame

_CPP_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh", ".inl", ".ipp", ".tcc"}


@dataclass
class Located:
    path: Path | None  # the file on this machine, None when no file here may be shown for the frame
    moved_from: str | None = None  # the recorded path, when the file was found elsewhere


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


def _dwarf_file_names(library: str):
    # Imported when a native file is here to be vouched for: tracer.symbols costs 0.2 s to import,
    # too much for the first key press that shows a frame.
    from tracer.symbols.source_names import dwarf_file_names

    return dwarf_file_names(library)


def _dwarf_files_at(library: str, offset: int):
    from tracer.symbols.source_names import dwarf_files_at

    return dwarf_files_at(library, offset)


def default_trust() -> SourceTrust:
    """The source directory (``--source-dir``, ``$PTTRACE_SOURCE_DIR``), and the libraries' DWARF here."""
    from tracer import settings

    source_dir = settings.current().source_dir
    return SourceTrust(dirs=(source_dir,) if source_dir else (), dwarf_files=_dwarf_file_names,
                       dwarf_files_at=_dwarf_files_at)


def may_show(frame: Frame, path: str | os.PathLike, trust: SourceTrust | None = None) -> bool:
    return source_lines(frame, path, trust if trust is not None else default_trust()) is not None


def present(frame: Frame, cwd: str | None = None) -> bool:
    """Whether a file the frame names is here at all (for telling "not here" from "not shown")."""
    if not frame.file or frame.file.startswith("<"):
        return False
    return any(os.path.isfile(candidate) for candidate, _ in _candidates(frame.file, cwd))


def locate(frame: Frame, cwd: str | None = None, trust: SourceTrust | None = None) -> Located:
    """Where this frame's file is here, if anywhere it may be shown from."""
    if not frame.file or frame.file.startswith("<"):
        return Located(None)
    trust = trust if trust is not None else default_trust()
    for candidate, elsewhere in _candidates(frame.file, cwd):
        if may_show(frame, candidate, trust):
            moved = frame.file if elsewhere and str(candidate) != frame.file else None
            return Located(candidate, moved)
    return Located(None)


def read_lines(path: Path) -> tuple[str, ...] | None:
    """A located file's lines (UTF-8 text, made safe to print); see ``local_files.read_text``."""
    return read_text(path)


def window(total: int, line: int, height: int) -> tuple[int, int]:
    """First and last line numbers (1-based, inclusive) of a ``height``-line window around ``line``."""
    height = max(1, height)
    start = max(1, line - height // 2)
    end = min(total, start + height - 1)
    start = max(1, min(start, end - height + 1))
    return start, end
