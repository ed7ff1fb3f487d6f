"""A ``pttrace where NAME`` answer kept whole, checked against the files it came from before it is reused.

A warm ``where`` answered from the per-library query memos still opened every library's index (its modules,
their dataclasses and pathlib: ~30 ms of a ~85 ms run, whose target is 0.08 s). The answer of a name over a
list of libraries depends only on those files and on the separate debug files looked for beside them, so it
is kept with each file's identity (device, inode, size, modification and change times; None for a debug file
that was looked for and absent) and reused only while every one of them is unchanged. This module imports no
more than ``os``, ``marshal`` and ``zlib``; what it keeps is made on the slow path, which has the index open.
"""
from __future__ import annotations

import marshal
import os
import zlib

from tracer import settings

FORMAT = 2  # this file's layout (2: a library's facts without its path)
INDEX_FORMAT = 4  # the index's matching rules: tracer/symbols/cache.py's FORMAT (a unit test keeps them equal)
SLOTS = 256  # answers kept: one a slot, the latest wins, so the directory never grows past this
_MAGIC = b"PTWHERE\x00"


def _identity(path: str) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _key(query: str, libraries: list[str]) -> tuple:
    return (FORMAT, INDEX_FORMAT, query, tuple(libraries), settings.debug_dirs())


def _file(key: tuple) -> str:
    slot = zlib.crc32(repr(key).encode("utf-8", "surrogateescape")) % SLOTS
    return os.path.join(settings.cache_root(), "where", f"{slot:02x}.answer")


def recall(query: str, libraries: list[str]):
    """The answer kept for ``query`` over these libraries, or None when there is none or any of its files
    changed (a torn or foreign file reads as none)."""
    key = _key(query, libraries)
    try:
        with open(_file(key), "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    if raw[:8] != _MAGIC or len(raw) < 12 or zlib.crc32(raw[12:]) != int.from_bytes(raw[8:12], "little"):
        return None
    try:
        stored, watched, answer = marshal.loads(raw[12:])
    except (ValueError, EOFError, TypeError):
        return None
    if stored != key:
        return None
    for path, identity in watched:
        if _identity(path) != identity:
            return None
    return answer


def watched_files(libraries: list[str]) -> list[str]:
    """Every file an answer over these libraries was read from or looked for: each library, and each
    place its separate debug file (DWARF, or a stripped library's ``.symtab``) is looked for."""
    from tracer import elfparts

    from .debugfile import debug_dirs
    from .elf_index import LibraryIndex

    dirs = debug_dirs()
    out: list[str] = []
    for lib in libraries:
        elf = LibraryIndex.open(lib).elf
        out.append(lib)
        if elf.build_id and len(elf.build_id) > 2:
            out += [elfparts.build_id_file(d, elf.build_id) for d in dirs]
        if elf.debuglink:
            out += elfparts.debuglink_candidates(os.path.dirname(elf.path), elf.debuglink[0], dirs)
    return out


def remember(query: str, libraries: list[str], answer) -> None:
    """Keep ``answer`` (anything ``marshal`` takes) for ``query`` over these libraries; a cache that cannot
    be written is only slower next time."""
    key = _key(query, libraries)
    payload = marshal.dumps((key, tuple((p, _identity(p)) for p in watched_files(libraries)), answer))
    settings.write_cache_bytes(_file(key), _MAGIC + zlib.crc32(payload).to_bytes(4, "little") + payload, ".where-")
