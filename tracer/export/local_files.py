"""Which local file may be shown as a frame's source: the one safety check every reader goes through.

Sessions are files people share, and their frames name paths. Showing a source excerpt reads a file
on *this* machine into a terminal or into notes that are shared on, so a crafted session naming
``/etc/shadow``, ``/proc/self/environ``, ``~/.ssh/id_rsa`` or ``../../etc/passwd`` must get nothing.
A file is shown for a frame only when it is plausibly the source that frame names:

- a Python frame: a ``.py`` file whose line ``frame.line`` says what the recording says it ran
  (``frame.source``); without a recorded line there is nothing to check it against, so nothing is read;
- a native frame: a C/C++/CUDA source or header that the frame's library's DWARF line tables name
  (the library on this machine, asked through ``SourceTrust.dwarf_files``), or one under a directory
  the user gave (``--source-dir``, ``SourceTrust.dirs``);
- in every case: a regular file of readable UTF-8 text (no NUL byte), not under /proc, /sys or /dev,
  through no symlink to something that fails these checks, and a relative path never leaves the
  directory it is relative to through ``..``.
Otherwise a reader shows the recorded text or nothing. Lines come back with control characters
spelled out (``escape.visible``): a source file is shown, never obeyed.
"""
from __future__ import annotations

import functools
import os
import stat
from dataclasses import dataclass
from typing import Callable, Collection

from tracer.text.escape import visible
from tracer.session.model import Frame

MAX_FILE_BYTES = 16 * 1024 * 1024
PYTHON_SUFFIXES = frozenset({".py", ".pyw"})
NATIVE_SUFFIXES = frozenset({".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".h++", ".cu",
                             ".cuh", ".inl", ".ipp", ".tcc", ".m", ".mm"})
_SYSTEM_TREES = ("/proc/", "/sys/", "/dev/")


@dataclass(frozen=True)
class SourceTrust:
    """What vouches for a native frame's file: directories the user named, and the library's DWARF.

    ``dwarf_files(library)`` gives the (normalised) file names the library's line tables hold on this
    machine, empty when it has none; None means no DWARF is consulted. ``dwarf_files_at(library,
    offset)``, the names of the one unit holding that file offset: asked instead for a frame recorded
    with its offset (a big debug build's frames; reading every unit's tables would take minutes).
    """

    dirs: tuple[str, ...] = ()
    dwarf_files: Callable[[str], Collection[str]] | None = None
    dwarf_files_at: Callable[[str, int], Collection[str]] | None = None


NO_TRUST = SourceTrust()


def _under(path: str, dirs: Collection[str]) -> bool:
    for d in dirs:
        root = os.path.realpath(d).rstrip(os.sep) + os.sep
        if path.startswith(root):
            return True
    return False


def _suffix_ok(path: str, suffixes: frozenset[str]) -> bool:
    return os.path.splitext(path)[1].lower() in suffixes


def source_lines(frame: Frame, path: str | os.PathLike, trust: SourceTrust = NO_TRUST) -> tuple[str, ...] | None:
    """The lines of ``path`` if it may be shown as ``frame``'s source, else None (see the module doc).

    ``path`` is where a reader found the file the frame names (the recorded path, or that path under
    the session's working directory, a moved checkout, this interpreter's site-packages).
    """
    recorded = frame.file
    if not recorded or recorded.startswith("<") or not frame.line or frame.line < 1:
        return None
    if not os.path.isabs(recorded) and ".." in recorded.split("/"):
        return None  # relative to the session's cwd, but leaving it
    path = os.fspath(path)
    real = os.path.realpath(path)
    if real.startswith(_SYSTEM_TREES) or os.path.abspath(path).startswith(_SYSTEM_TREES):
        return None
    python = frame.kind == "python"
    suffixes = PYTHON_SUFFIXES if python else NATIVE_SUFFIXES
    if not (_suffix_ok(path, suffixes) and _suffix_ok(real, suffixes)):
        return None
    if python:
        if not frame.source or not frame.source.strip():
            return None
    elif not os.path.isfile(real):
        return None  # most recorded native paths are not here: tell before asking the DWARF (it costs)
    elif not (_under(real, trust.dirs) or _named_by_dwarf(frame, path, real, trust)):
        return None
    lines = read_text(real)
    if lines is None:
        return None
    if python and (frame.line is None or frame.line > len(lines)
                   or lines[frame.line - 1].strip() != visible((frame.source or "").strip())):
        return None
    return lines


def _named_by_dwarf(frame: Frame, path: str, real: str, trust: SourceTrust) -> bool:
    if not frame.library:
        return False
    if frame.offset is not None and trust.dwarf_files_at is not None:
        names = trust.dwarf_files_at(frame.library, frame.offset)
    elif trust.dwarf_files is not None:
        names = trust.dwarf_files(frame.library)
    else:
        return False
    if not names:
        return False
    return ((frame.file is not None and os.path.normpath(frame.file) in names) or os.path.normpath(path) in names
            or real in names)


def read_text(path: str | os.PathLike) -> tuple[str, ...] | None:
    """A regular file's lines if it is UTF-8 text without NUL bytes, each made safe to print. For a
    path a session names, only after ``source_lines`` said yes (it calls this); pttrace's own finds
    (the definition index of the installed torch or of ``--source-dir``) are read with it directly."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
        return None
    return _read_text(os.fspath(path), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=32)
def _read_text(path: str, mtime_ns: int, size: int) -> tuple[str, ...] | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_FILE_BYTES or b"\0" in data:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return tuple(visible(line) for line in text.splitlines())
