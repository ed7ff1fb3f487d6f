"""Separate debug files kept with their DWARF sections decompressed, for gdb.

Debian's debug packages (libc6-dbg) compress every ``.debug_*`` section (zlib, ``SHF_COMPRESSED``), and gdb
inflates them each time it reads the library: libc's at the target's first library event (gdb's thread library)
and the dynamic linker's at pttrace's first library stop, while the target waits. With copies decompressed by
``objcopy --decompress-debug-sections``, gdb's CPU to a sigmoid first hit was 0.488 s against 0.538 s (medians of 8
alternating runs, load 4-6). pttrace keeps such copies in its cache (``DIRECTORY``, laid out as gdb looks:
``.build-id/xx/yyyy.debug``), made once by the run that first reads the library (a thread, which the run's exit
waits for), and lists that directory first in gdb's ``debug-file-directory`` (tracer/gdb/spawn.py). Same build-id,
same DWARF: gdb names the same frames with the same file:line.
"""
from __future__ import annotations

import logging
import mmap
import os
import subprocess
import threading

from tracer import elfparts, startenv

log = logging.getLogger("pttrace.symbols")
SHF_COMPRESSED = 0x800
DIRECTORY = "debug-files"  # under pttrace's cache directory (tracer/startenv.py), read by spawn.py too
OBJCOPY_TIMEOUT = 120.0
# A larger debug file is left as it is: its copy would hold the run's exit (objcopy, ~0.1 s for libc6-dbg's 4 MB
# libc file) and the cache's disk for a library few runs read at once.
MAX_COMPRESSED = 64 << 20


def directory() -> str:
    return os.path.join(startenv.cache_root(), DIRECTORY)


def compressed_debug_file(library: str, debug_dir: str = elfparts.USR_LIB_DEBUG) -> tuple[str, str] | None:
    """(build-id, path) of ``library``'s debug file under ``debug_dir`` when its DWARF sections are compressed;
    None when it has none there, or nothing compressed."""
    ident = elfparts.file_build_id(library)
    if not ident or len(ident) <= 2:
        return None
    path = elfparts.build_id_file(debug_dir, ident)
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ) as data:
            sections = elfparts.read_sections(data)
    except (OSError, ValueError):
        return None
    if sections is None or os.path.getsize(path) > MAX_COMPRESSED:
        return None
    if any(s.name.startswith(".debug_") and s.flags & SHF_COMPRESSED for s in sections.items):
        return ident, path
    return None


def keep_decompressed(library: str, out_dir: str | None = None) -> str | None:
    """The decompressed copy of ``library``'s debug file, made if missing; None when there is none to make (no
    compressed debug file, no objcopy) or it could not be made (said in the log: gdb reads the compressed one)."""
    out_dir = out_dir or directory()
    ident = elfparts.file_build_id(library)
    if not ident or len(ident) <= 2:
        return None
    out = elfparts.build_id_file(out_dir, ident)
    if os.path.exists(out):
        return out
    import shutil  # here, on the worker thread: its import (bz2, lzma) is ~3 ms of a library stop otherwise

    found = compressed_debug_file(library)
    objcopy = shutil.which("objcopy")
    if found is None or objcopy is None:
        return None
    tmp = f"{out}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(os.path.dirname(out), exist_ok=True)
        done = subprocess.run([objcopy, "--decompress-debug-sections", found[1], tmp], capture_output=True,
                              timeout=OBJCOPY_TIMEOUT, stdin=subprocess.DEVNULL)
        if done.returncode != 0 or elfparts.file_build_id(tmp) != ident:
            log.info("no decompressed copy of %s: objcopy said %s", found[1], done.stderr[-300:])
            return None
        os.replace(tmp, out)
        return out
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("no decompressed copy of %s: %s", found[1], exc)
        return None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


_pending: list[str] = []
_lock = threading.Lock()
_worker: list[threading.Thread | None] = [None]


def keep_decompressed_later(libraries: list[str]) -> None:
    """``keep_decompressed`` for each, on one thread (started here when none runs: a library stop waits for no more
    than the list's append). Not a daemon: a copy half made is never kept, and the run's exit waits for one being
    made (once per library build)."""
    if not libraries:
        return
    with _lock:
        _pending.extend(libraries)
        if _worker[0] is None:
            worker = threading.Thread(target=_work, name="plain-debug-files", daemon=False)
            _worker[0] = worker
            worker.start()


def _work() -> None:
    while True:
        with _lock:
            if not _pending:
                _worker[0] = None
                return
            library = _pending.pop(0)
        keep_decompressed(library)
