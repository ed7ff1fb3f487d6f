"""CFI-only copies of shared libraries: the unwind tables gdb needs, without the symbols it is slow on.

gdb turns every ELF symbol of a library into a minimal symbol as it reads it (libtorch_cpu.so:
~650k symbols, ~2 s and ~500 MB). To unwind through a library it needs only ``.eh_frame``. A
CFI-only copy holds the library's ``.eh_frame`` and ``.eh_frame_hdr`` at their original addresses,
an empty (NOBITS) ``.text`` of the original address and size, and no symbol table at all; gdb given
it with ``add-symbol-file COPY -o LOAD_BASE`` unwinds through the library exactly as with its
symbols, and names none of its frames: pttrace names them from its own index (see
bench/RESULTS.md, "Where gdb spends its time on libtorch_cpu.so").

``cfi_copy(library)`` writes the copy once per library build (cached by build-id under
``$XDG_CACHE_HOME/pttrace/cfi/``) and returns its path. Standard library only (the section headers
and the build-id through tracer/elfparts.py, as the agent reads them).
"""
from __future__ import annotations

import hashlib
import mmap
import os
import struct
from pathlib import Path

from tracer import elfparts, settings
from tracer.elfparts import SHT_NOBITS
from tracer.errors import SymbolError

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
SHDR = struct.Struct("<IIQQQQIIQQ")
KEEP = (".eh_frame", ".eh_frame_hdr")
VERSION = 1  # of the copy's layout: part of the cache key


def _sections(data) -> tuple[tuple, elfparts.Sections]:
    """The ELF header's fields (the copy keeps some) and the section headers; the copy is written for
    64-bit little-endian files only."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SymbolError("not a 64-bit little-endian ELF file")
    found = elfparts.read_sections(data)
    if found is None:
        raise SymbolError("no section headers")
    return EHDR.unpack_from(data, 0), found


def write_cfi_only(data, out: str) -> int:
    """Write the CFI-only copy of the ELF image ``data`` (bytes or mmap) to ``out``; returns its size."""
    eh, found = _sections(data)
    by_name = {s.name: s for s in found.items}
    frame = by_name.get(".eh_frame")
    if frame is None or frame.type == SHT_NOBITS or not frame.size:
        raise SymbolError("no .eh_frame (no unwind tables to give gdb)")
    keep = [by_name[n] for n in KEEP if n in by_name]
    text = by_name.get(".text")
    names = [*(s.name for s in keep), ".text", ".shstrtab"]
    name_off, pos = {}, 1
    for n in names:
        name_off[n] = pos
        pos += len(n) + 1
    strtab = b"\0" + b"\0".join(n.encode() for n in names) + b"\0"
    body = bytearray()
    offset = EHDR.size
    headers = [SHDR.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    for s in keep:
        align = max(s.align, 1)
        body += b"\0" * ((-(offset + len(body))) % align)
        file_off = offset + len(body)
        body += data[s.offset:s.offset + s.size]
        headers.append(SHDR.pack(name_off[s.name], s.type, s.flags, s.addr, file_off, s.size, 0, 0, s.align,
                                 s.entsize))
    if text is not None:
        headers.append(SHDR.pack(name_off[".text"], SHT_NOBITS, text.flags, text.addr, offset + len(body),
                                 text.size, 0, 0, text.align, 0))
    str_off = offset + len(body)
    body += strtab
    headers.append(SHDR.pack(name_off[".shstrtab"], 3, 0, 0, str_off, len(strtab), 0, 0, 1, 0))
    body += b"\0" * ((-(offset + len(body))) % 8)
    shoff = offset + len(body)
    header = EHDR.pack(bytes(data[:16]), eh[1], eh[2], eh[3], 0, 0, shoff, eh[7], EHDR.size, 0, 0, SHDR.size,
                       len(headers), len(headers) - 1)
    tmp = f"{out}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(header)
        fh.write(body)
        fh.write(b"".join(headers))
    os.replace(tmp, out)  # readers never see a half-written copy
    return shoff + len(headers) * SHDR.size


def cache_dir() -> Path:
    return settings.cache_dir() / "cfi"


def cfi_copy(library: str) -> str:
    """The path of ``library``'s CFI-only copy, written on first use. Raises SymbolError when the
    library cannot be read or has no ``.eh_frame``, OSError when the cache cannot be written."""
    try:
        fh = open(library, "rb")
    except OSError as exc:
        raise SymbolError(f"{library}: {exc.strerror}") from None
    with fh:
        try:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise SymbolError(f"{library}: cannot map it ({exc})") from None
        try:
            _eh, found = _sections(data)
            ident = elfparts.build_id(data, found)
            if not ident:  # no build-id: the file's identity must do
                st = os.fstat(fh.fileno())
                ident = "nobuildid-" + hashlib.sha1(
                    f"{os.path.realpath(library)}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:20]
            out = cache_dir() / f"{os.path.basename(library)}.{ident}.v{VERSION}.cfi"
            if not out.is_file():
                out.parent.mkdir(parents=True, exist_ok=True)
                write_cfi_only(data, str(out))
            return str(out)
        except (struct.error, IndexError, ValueError, OverflowError) as exc:
            raise SymbolError(f"{library}: malformed ELF ({exc})") from None
        finally:
            data.close()
