"""The kernels a library registers for its own operators (``TORCH_LIBRARY``/``TORCH_LIBRARY_IMPL``),
read from the code of the registration blocks (x86-64).

``TORCH_LIBRARY_IMPL(ns, CPU, m) { m.impl("op", &kernel); }`` compiles to a function
``TORCH_LIBRARY_IMPL_init_ns_CPU_<n>(torch::Library&)`` that loads the operator's name (a ``lea`` of a
string) and the kernel's address (a ``lea`` of the function, or a load of its GOT slot when the symbol
is exported) before calling ``Library::impl``. Every rip-relative 32-bit displacement in that function
whose target is a string, a function or a GOT slot of one is a reference; each function reference
belongs to the nearest string reference that names an operator. ``TORCH_LIBRARY(ns, m)`` blocks
(``TORCH_LIBRARY_init_ns``, ``m.def("schema", &kernel)``) register catch-all kernels the same way.
Kernels given as lambdas are named by their compiler-made function (``{lambda(...)#1}::_FUN``).
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from .elffile import SHT_NOBITS
from .elf_index import LibraryIndex
from .plt import EM_X86_64

_OP_STRING = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)?)(?:\.([A-Za-z0-9_]+))?(\(.*)?$", re.S)
_MAX_BLOCK = 1 << 20  # a registration block is small; a bigger "function" is not read


@dataclass(frozen=True)
class Registration:
    op: str  # the operator as the block names it: "scale_add" (or "ns::scale_add", "scale_add.out")
    key: str  # the dispatch key of the block ("CPU", "CompositeImplicitAutograd"), "CatchAll" for m.def
    block: str  # the registration function's name
    address: int  # the kernel function's st_value
    mangled: str


def _init_functions(index: LibraryIndex, namespace: str) -> list[tuple[str, str, int, int]]:
    """(name, key, address, size) of the library's registration blocks for ``namespace``."""
    out = []
    prefixes = ((f"TORCH_LIBRARY_IMPL_init_{namespace}_", "impl"), (f"TORCH_LIBRARY_init_{namespace}", "def"),
                (f"TORCH_LIBRARY_FRAGMENT_init_{namespace}_", "def"))
    raws = index.search([p for p, _ in prefixes], None, ("function",))
    for raw in raws:
        name = raw.demangled.split("(", 1)[0]
        for prefix, kind in prefixes:
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix):]
            if kind == "impl":
                key, _, uid = rest.rpartition("_")
                if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", key) or not uid.isdigit():
                    continue  # another namespace that starts with this one's name (ns_more_CPU_1)
            elif kind == "def" and rest and not rest.lstrip("_").isdigit():
                continue  # another namespace that starts with this one's name
            else:
                key = "CatchAll"
            if 0 < raw.size <= _MAX_BLOCK:
                out.append((name, key, raw.address, raw.size))
            break
    return out


def _section_of(elf, address: int):
    for sec in elf.section_list:
        if sec.addr and sec.addr <= address < sec.addr + sec.size and sec.type != SHT_NOBITS:
            return sec
    return None


def _c_string(elf, address: int, limit: int = 512) -> str | None:
    sec = _section_of(elf, address)
    if sec is None or sec.flags & 0x4:  # SHF_EXECINSTR: code, not a string
        return None
    start = sec.offset + address - sec.addr
    end = elf.mm.find(b"\0", start, min(start + limit, sec.offset + sec.size))
    if end <= start:
        return None
    try:
        return bytes(elf.mm[start:end]).decode("ascii")
    except UnicodeDecodeError:
        return None


def registrations(index: LibraryIndex, namespace: str) -> list[Registration]:
    """Every kernel the library's registration blocks for ``namespace`` register, with its operator."""
    elf = index.elf
    if elf.machine != EM_X86_64 or elf.elfclass != 64:
        return []
    got = index.plt._dynamic_index_of_slots()
    dynsym = index.tables.get(".dynsym")
    starts = _function_starts(index)
    out: list[Registration] = []
    for block, key, address, size in _init_functions(index, namespace):
        sec = _section_of(elf, address)
        if sec is None:
            continue
        code = bytes(elf.mm[sec.offset + address - sec.addr : sec.offset + address - sec.addr + size])
        strings: list[tuple[int, str]] = []
        functions: list[tuple[int, int, str]] = []
        for i in range(1, len(code) - 3):
            if code[i - 1] in (0xE8, 0xE9):
                continue  # a call or jump: the callee, not a reference
            disp = struct.unpack_from("<i", code, i)[0]
            target = address + i + 4 + disp
            if target in starts:
                functions.append((i, target, starts[target]))
                continue
            if target in got and dynsym is not None:
                idx = got[target]
                if idx < dynsym.count:
                    st_name, info, shndx, value, _ = dynsym.entry(idx)
                    if shndx != 0 and value in starts and info & 0xF == 2:  # defined here, STT_FUNC
                        functions.append((i, value, starts[value]))
                continue
            text = _c_string(elf, target)
            if text:
                m = _OP_STRING.match(text)
                if m:
                    strings.append((i, text))
        for pos, target, mangled in functions:
            if not strings:
                break
            near = min(strings, key=lambda s: abs(s[0] - pos))[1]
            m = _OP_STRING.match(near)
            assert m is not None  # strings holds only those that match
            out.append(Registration(m.group(1) + (f".{m.group(2)}" if m.group(2) else ""), key, block, target,
                                    mangled))
    return out


def _function_starts(index: LibraryIndex) -> dict[int, str]:
    """st_value -> mangled name of every function the library defines."""
    t = index.search_table
    if t is None:
        return {}
    infos, shndxs, values, _sizes = t.fields()
    out: dict[int, str] = {}
    for i, (info, shndx, value) in enumerate(zip(infos, shndxs, values)):
        if info & 0xF == 2 and shndx != 0 and value and value not in out:
            out[value] = t.name_at(t.entry(i)[0])
    return out
