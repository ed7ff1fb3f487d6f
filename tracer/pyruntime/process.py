"""Find a live process's CPython runtime without gdb: ``_PyRuntime`` from the symbol tables of its
executable or libpython (``tracer.symbols``), its memory through /proc/PID/mem.

Used by tests and tools outside gdb (the agent asks gdb for the same symbol). A stripped static
executable (Debian's /usr/bin/python3.11) still exports ``_PyRuntime`` in ``.dynsym``.
"""
from __future__ import annotations

import os
import re
import struct

from tracer.errors import SymbolError
from tracer.symbols import find_symbol

from .layout import LayoutError
from .reader import PythonRuntime

_VERSION_IN_NAME = re.compile(r"python3\.(\d+)")
ET_EXEC = 2


class ProcessMemory:
    """``read(address, size)`` over /proc/PID/mem (the process should be stopped for a consistent view)."""

    def __init__(self, pid: int):
        self.fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)

    def read(self, address: int, size: int) -> bytes:
        data = os.pread(self.fd, size, address)
        if len(data) != size:
            raise OSError(f"short read at {address:#x}")
        return data

    def close(self) -> None:
        os.close(self.fd)


def _mappings(pid: int) -> dict[str, int]:
    """Each mapped file's lowest mapped address with file offset 0."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or not parts[5].startswith("/") or int(parts[2], 16) != 0:
                continue
            path = parts[5].strip()
            start = int(parts[0].split("-")[0], 16)
            out[path] = min(start, out.get(path, start))
    return out


def _load_bias(path: str, mapped_at: int) -> int:
    with open(path, "rb") as fh:
        head = fh.read(18)
    return 0 if struct.unpack_from("<H", head, 16)[0] == ET_EXEC else mapped_at


def find_runtime(pid: int) -> tuple[int, int | None, str]:
    """(address of ``_PyRuntime``, CPython 3 minor version if known, the file defining it)."""
    maps = _mappings(pid)
    exe = os.path.realpath(f"/proc/{pid}/exe")
    candidates = [p for p in maps if "libpython3" in os.path.basename(p)] + [exe]
    for path in candidates:
        if path not in maps:
            continue
        try:
            found = [m for m in find_symbol("_PyRuntime", [path]) if m.kind == "object"]
        except SymbolError:
            continue
        if not found:
            continue
        bias = _load_bias(path, maps[path])
        version = _VERSION_IN_NAME.search(os.path.basename(path))
        minor = int(version.group(1)) if version else None
        hexversion = _py_version(pid, path, bias)
        if hexversion:
            minor = (hexversion >> 16) & 0xFF
        return bias + found[0].address, minor, path
    raise LayoutError(f"process {pid} has no _PyRuntime symbol: is it a CPython 3.10+ interpreter?")


def _py_version(pid: int, path: str, bias: int) -> int | None:
    """``Py_Version`` (PY_VERSION_HEX, exported since 3.11) read from the process."""
    try:
        found = [m for m in find_symbol("Py_Version", [path]) if m.kind == "object"]
        if not found:
            return None
        mem = ProcessMemory(pid)
        try:
            return struct.unpack("<I", mem.read(bias + found[0].address, 4))[0]
        finally:
            mem.close()
    except (SymbolError, OSError):
        return None


def open_runtime(pid: int) -> tuple[PythonRuntime, ProcessMemory]:
    """The runtime of a (stopped) process and the memory it reads; close the memory when done."""
    address, minor, _ = find_runtime(pid)
    mem = ProcessMemory(pid)
    try:
        return PythonRuntime(mem.read, address, minor), mem
    except BaseException:  # not handled here: the descriptor closed, the error passed on
        mem.close()
        raise
