"""Write a "CFI-only" copy of a shared library: an ELF file holding nothing but the library's unwind
tables (``.eh_frame``, ``.eh_frame_hdr``) at their original addresses, and an empty (NOBITS)
``.text`` of the original address and size. No symbol table at all.

    python bench/cfi_only.py LIB OUT

gdb given this file (``add-symbol-file OUT -o LOAD_BASE``) instead of the library's own symbols
unwinds through the library exactly as with its full symbols, in ~0.05 s instead of 2-4 s and
~25 MB instead of ~500 MB for libtorch_cpu.so (see bench/RESULTS.md, "Where gdb spends its time on
libtorch_cpu.so"): what it cannot do is name the frames, which pttrace does from its own index.
The copy is written by ``tracer/symbols/cfi.py``, the code pttrace itself runs; this is its command
line for the benchmarks (bench/libtorch_cpu_probe.py, bench/cfi_demo_gdb.py).
"""
from __future__ import annotations

import mmap
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracer.symbols import cfi  # noqa: E402

KEEP = cfi.KEEP


def _sections(data):
    return cfi._sections(data)


def write_cfi_only(lib: str, out: str) -> dict:
    """Write the CFI-only copy of ``lib`` to ``out``; returns the size written and the sections kept."""
    with open(lib, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        size = cfi.write_cfi_only(data, out)
        kept = [s.name for s in cfi._sections(data)[1].items if s.name in KEEP]
    return {"bytes": size, "sections": kept}


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    info = write_cfi_only(sys.argv[1], sys.argv[2])
    print(f"{sys.argv[2]}: {info['bytes'] / 1e6:.1f} MB ({', '.join(info['sections'])}, .text as NOBITS)")
