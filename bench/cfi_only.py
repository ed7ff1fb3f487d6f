"""Write a "CFI-only" copy of a shared library: an ELF file holding nothing but the library's unwind
tables (``.eh_frame``, ``.eh_frame_hdr``) at their original addresses, and an empty (NOBITS)
``.text`` of the original address and size. No symbol table at all.

    python bench/cfi_only.py LIB OUT

gdb given this file (``add-symbol-file OUT -o LOAD_BASE``) instead of the library's own symbols
unwinds through the library exactly as with its full symbols, in ~0.05 s instead of 2-4 s and
~25 MB instead of ~500 MB for libtorch_cpu.so (see bench/RESULTS.md, "Where gdb spends its time on
libtorch_cpu.so"): what it cannot do is name the frames, which pttrace can from its own index.
Standard library only (usable from gdb's Python too).
"""
from __future__ import annotations

import struct
import sys

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
SHDR = struct.Struct("<IIQQQQIIQQ")
SHT_NOBITS = 8
KEEP = (".eh_frame", ".eh_frame_hdr")


def _sections(data: bytes) -> tuple[tuple, list[dict]]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    eh = EHDR.unpack_from(data, 0)
    shoff, shentsize, shnum, shstrndx = eh[6], eh[11], eh[12], eh[13]
    raw = [SHDR.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
    stroff = raw[shstrndx][4]
    out = []
    for s in raw:
        end = data.index(b"\0", stroff + s[0])
        out.append({"name": data[stroff + s[0]:end].decode(), "type": s[1], "flags": s[2], "addr": s[3],
                    "offset": s[4], "size": s[5], "link": s[6], "info": s[7], "align": s[8], "entsize": s[9]})
    return eh, out


def write_cfi_only(lib: str, out: str) -> dict:
    """Write the CFI-only copy of ``lib`` to ``out``; returns the sizes written."""
    with open(lib, "rb") as fh:
        data = fh.read()
    eh, secs = _sections(data)
    by_name = {s["name"]: s for s in secs}
    if ".eh_frame" not in by_name:
        raise ValueError(f"{lib} has no .eh_frame")
    keep = [by_name[n] for n in KEEP if n in by_name]
    text = by_name.get(".text")
    names = b"\0" + b"\0".join(n.encode() for n in [*(s["name"] for s in keep), ".text", ".shstrtab"]) + b"\0"
    name_off = {}
    pos = 1
    for n in [*(s["name"] for s in keep), ".text", ".shstrtab"]:
        name_off[n] = pos
        pos += len(n) + 1
    body = bytearray()
    offset = EHDR.size
    headers = [SHDR.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    for s in keep:
        align = max(s["align"], 1)
        pad = (-(offset + len(body))) % align
        body += b"\0" * pad
        file_off = offset + len(body)
        body += data[s["offset"]:s["offset"] + s["size"]]
        headers.append(SHDR.pack(name_off[s["name"]], s["type"], s["flags"], s["addr"], file_off, s["size"], 0, 0,
                                 s["align"], s["entsize"]))
    if text is not None:
        headers.append(SHDR.pack(name_off[".text"], SHT_NOBITS, text["flags"], text["addr"], offset + len(body),
                                 text["size"], 0, 0, text["align"], 0))
    str_off = offset + len(body)
    body += names
    headers.append(SHDR.pack(name_off[".shstrtab"], 3, 0, 0, str_off, len(names), 0, 0, 1, 0))
    pad = (-(offset + len(body))) % 8
    body += b"\0" * pad
    shoff = offset + len(body)
    ident = data[:16]
    header = EHDR.pack(ident, eh[1], eh[2], eh[3], 0, 0, shoff, eh[7], EHDR.size, 0, 0, SHDR.size, len(headers),
                       len(headers) - 1)
    with open(out, "wb") as fh:
        fh.write(header)
        fh.write(body)
        fh.write(b"".join(headers))
    return {"bytes": shoff + len(headers) * SHDR.size, "sections": [s["name"] for s in keep]}


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    info = write_cfi_only(sys.argv[1], sys.argv[2])
    print(f"{sys.argv[2]}: {info['bytes'] / 1e6:.1f} MB ({', '.join(info['sections'])}, .text as NOBITS)")
