"""The few parts of an ELF file that both sides of pttrace read: section headers, the GNU build-id
note, the ``.gnu_debuglink`` and where a separate debug file of a library is looked for.

Standard library only, and outside ``tracer.symbols`` (whose package imports pyelftools): the agent
inside gdb reads them too, as each library loads (gdb/agent/libstops.py), where gdb's Python has none
of pttrace's dependencies. tracer/symbols reads the same with them (cfi.py, debugfile.py, elffile.py),
so that the two sides cannot disagree on a library.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

SHT_SYMTAB = 2
SHT_NOTE = 7
SHT_NOBITS = 8
NT_GNU_BUILD_ID = 3
USR_LIB_DEBUG = "/usr/lib/debug"


@dataclass(frozen=True)
class Section:
    """One ELF section header."""

    name: str  # undecodable bytes kept as surrogates (surrogateescape)
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    align: int
    entsize: int


@dataclass(frozen=True)
class Sections:
    """An ELF file's section headers, with the byte order its other structures are read in."""

    order: str  # "<" or ">"
    is64: bool
    items: tuple[Section, ...]

    def named(self, name: str) -> Section | None:
        return next((s for s in self.items if s.name == name), None)


def read_sections(data) -> Sections | None:
    """The section headers of the ELF image ``data`` (bytes or mmap), 32- or 64-bit, either byte order;
    None when it is not ELF or its header table lies outside the file."""
    if data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return None
    order = "<" if data[5] == 1 else ">"
    is64 = data[4] == 2
    if is64:
        shoff, = struct.unpack_from(order + "Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x3A)
        # name, type, flags, addr, offset, size, link, info, addralign, entsize
        entry = struct.Struct(order + "IIQQQQIIQQ")
    else:
        shoff, = struct.unpack_from(order + "I", data, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(order + "HHH", data, 0x2E)
        entry = struct.Struct(order + "IIIIIIIIII")
    if not shoff or shentsize < entry.size or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        return None
    raw = [entry.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    names_at = raw[shstrndx][4]
    items = []
    for name, sh_type, flags, addr, offset, size, _link, _info, align, entsize in raw:
        end = data.find(b"\0", names_at + name)
        text = bytes(data[names_at + name:end]).decode("utf-8", "surrogateescape") if end >= 0 else ""
        items.append(Section(text, sh_type, flags, addr, offset, size, align, entsize))
    return Sections(order, is64, tuple(items))


def build_id(data, sections: Sections, limit: int = 1 << 16) -> str | None:
    """The GNU build-id (hex) from the file's note sections (each of at most ``limit`` bytes), or None."""
    head = struct.Struct(sections.order + "III")
    for sec in sections.items:
        if sec.type != SHT_NOTE or sec.size > limit:
            continue
        pos, end = sec.offset, min(sec.offset + sec.size, len(data))
        while pos + head.size <= end:
            namesz, descsz, ntype = head.unpack_from(data, pos)
            name_at = pos + head.size
            desc_at = name_at + ((namesz + 3) & ~3)
            if desc_at + descsz > end:
                break
            if ntype == NT_GNU_BUILD_ID and bytes(data[name_at:name_at + namesz]).rstrip(b"\0") == b"GNU":
                return bytes(data[desc_at:desc_at + descsz]).hex()
            pos = desc_at + ((descsz + 3) & ~3)
    return None


def debuglink(data, sections: Sections) -> tuple[str, int] | None:
    """(file name, crc32) from ``.gnu_debuglink``, or None."""
    sec = sections.named(".gnu_debuglink")
    if sec is None or sec.type == SHT_NOBITS or sec.size < 8:
        return None
    raw = bytes(data[sec.offset:sec.offset + sec.size])
    end = raw.find(b"\0")
    crc_at = (end + 4) & ~3
    if end <= 0 or crc_at + 4 > len(raw):
        return None
    return raw[:end].decode("utf-8", "surrogateescape"), struct.unpack_from(sections.order + "I", raw, crc_at)[0]


def build_id_file(directory: str, ident: str) -> str:
    """Where a debug directory keeps the debug file of build-id ``ident`` (as gdb looks)."""
    return os.path.join(directory, ".build-id", ident[:2], ident[2:] + ".debug")


def debuglink_candidates(library_dir: str, name: str, debug_dirs) -> list[str]:
    """Where the ``.gnu_debuglink`` file ``name`` of a library in ``library_dir`` is looked for, as gdb
    does: beside it, in its ``.debug``, and under each debug directory. A hostile name (a "/", "..", a
    NUL) names nothing: a link may only name a file beside the library."""
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        return []
    return [os.path.join(library_dir, name), os.path.join(library_dir, ".debug", name),
            *(os.path.join(d, library_dir.lstrip("/"), name) for d in debug_dirs)]


def file_build_id(path: str) -> str | None:
    """The GNU build-id of an ELF file from its program headers' notes (first 64 KiB); None if none. No section
    headers are read: ~0.1 ms for libtorch_cpu.so, which keeps them at its end."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return None
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return None  # only 64-bit little-endian
    phoff, = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + 56 > len(head):
            break
        ptype, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", head, at)
        if ptype != 4 or offset + filesz > len(head):  # PT_NOTE
            continue
        pos = offset
        while pos + 12 <= offset + filesz:
            namesz, descsz, ntype = struct.unpack_from("<III", head, pos)
            desc = pos + 12 + ((namesz + 3) & ~3)
            if ntype == 3 and head[pos + 12 : pos + 12 + namesz].rstrip(b"\0") == b"GNU":
                return head[desc : desc + descsz].hex()
            pos = desc + ((descsz + 3) & ~3)
    return None


def file_identity(path: str) -> str | None:
    """What a cache of facts about a library's content is keyed by: its build-id and size when it has one,
    else its real path, size and modification time; None if it cannot be read. A reinstall (a new venv,
    ``pip install --force-reinstall``) writes the same bytes with new times and paths: keyed by build-id, what
    was learnt of them is kept (torch's operator facts: a child interpreter importing torch, ~1.3-1.6 s of a
    first run's wall time at load 3, 2026-11-27)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    ident = file_build_id(path)
    if ident:
        return f"b:{ident}:{st.st_size}"
    return f"p:{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"
