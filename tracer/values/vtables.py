"""Naming C++ objects by their vtables: an autograd Node's class (``SigmoidBackward0``) from the first
word of the object, through pttrace's symbol index (``vtable for torch::autograd::generated::X``).

``node_vtables`` reads the libraries' symbol tables (tracer.symbols: outside gdb only); the
``Symbolizer`` it feeds is plain data and the standard library, so the gdb agent can be handed one.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

# Itanium C++ ABI: an object's vtable pointer points past the offset-to-top and typeinfo words.
VPTR_SKIP = 16
NODE_PREFIXES = ("_ZTVN5torch8autograd",)  # vtable for torch::autograd::...
CACHE_FORMAT = "2"  # of the cached tables; a change of what they hold changes it (2: kept by build-id)


def node_vtables(libraries: list[str], cache_dir: Path | None = None) -> dict[str, dict[int, str]]:
    """library path -> {file-relative address a vtable pointer holds: ``vtable for X``} for the autograd
    classes each library defines (800 in libtorch_cpu 2.13; 0.2-0.3 s of CPU with a warm index, at every
    start of a recording: kept in ``cache_dir``, by the libraries' build-ids (else paths, sizes and times), ~1 ms
    then)."""
    idents = _identities(libraries)
    path = _cache_path(idents, cache_dir)
    if path is not None and idents is not None:
        try:
            data = json.loads(path.read_text())
            # Kept by each library's identity (its build-id): the same build installed elsewhere reads them too.
            return {real: {int(k): v for k, v in data[ident].items()} for real, ident in idents.items() if ident in data}
        except (OSError, ValueError, TypeError, AttributeError, KeyError):
            pass
    out = _search(libraries)
    if path is not None and idents is not None:
        from tracer import settings

        kept = {idents[real]: {str(k): v for k, v in t.items()} for real, t in out.items() if real in idents}
        settings.write_cache_file(path, json.dumps(kept), ".vtables-")
    return out


def _identities(libraries: list[str]) -> dict[str, str] | None:
    """real path -> identity (tracer.elfparts.file_identity) of each library; None if one cannot be read."""
    from tracer.elfparts import file_identity

    out = {}
    for lib in libraries:
        ident = file_identity(lib)
        if ident is None:
            return None
        out[os.path.realpath(lib)] = ident
    return out


def _cache_path(idents: dict[str, str] | None, cache_dir: Path | None) -> Path | None:
    if cache_dir is None or idents is None:
        return None
    parts = [CACHE_FORMAT, *sorted(idents.values())]
    return cache_dir / "values" / f"vtables-{hashlib.sha1(chr(0).join(parts).encode()).hexdigest()}.json"


def _search(libraries: list[str]) -> dict[str, dict[int, str]]:
    from tracer.symbols import search_symbols

    out: dict[str, dict[int, str]] = {}
    for m in search_symbols(list(NODE_PREFIXES), libraries, kinds=("object",), special=True):
        if m.name.startswith("vtable for "):
            out.setdefault(os.path.realpath(m.library), {})[m.address + VPTR_SKIP] = m.name
    return out


@dataclass
class Symbolizer:
    """``symbolize(address)``: the vtable a runtime vtable pointer points into, or None."""

    tables: dict[str, dict[int, str]]
    bases: dict[str, int] = field(default_factory=dict)  # library path -> load address

    def __call__(self, address: int) -> str | None:
        for path, base in self.bases.items():
            name = self.tables.get(path, {}).get(address - base)
            if name is not None:
                return name
        return None


def load_bases(pid: int) -> dict[str, int]:
    """Each mapped file's load address (its mapping at file offset 0), from ``/proc/PID/maps``."""
    bases: dict[str, int] = {}
    with open(f"/proc/{pid}/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            if len(parts) == 6 and int(parts[2], 16) == 0 and parts[5].startswith("/"):
                path = os.path.realpath(parts[5].strip())
                start = int(parts[0].split("-")[0], 16)
                bases[path] = min(start, bases.get(path, start))
    return bases
