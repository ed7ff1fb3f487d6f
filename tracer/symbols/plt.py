"""PLT stubs of an x86-64 library: the stub through which it calls an imported function, and the
imported function a stub address belongs to (``foo@plt``), read from the relocations and from the
``jmp *slot(%rip)`` of each stub."""
from __future__ import annotations

import struct

from .elffile import SHT_NOBITS, ElfFile
from .symtab import SymbolTable

EM_X86_64 = 62
R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT = 6, 7
_RELA_SIZE = 24
_PLT_SECTIONS = (".plt", ".plt.sec", ".plt.got")


class PltStubs:
    """The PLT of one library; ``dynsym`` is its dynamic symbol table (None: no stubs to name)."""

    def __init__(self, elf: ElfFile, dynsym: SymbolTable | None):
        self.elf = elf
        self.dynsym = dynsym if elf.machine == EM_X86_64 else None
        self._got_to_stub: dict[int, int] | None = None
        self._stub_to_got: dict[int, int] | None = None
        self._got_to_dynidx: dict[int, int] | None = None

    def _section(self, name: str):
        sec = self.elf.sections.get(name)
        return sec if sec is not None and sec.type != SHT_NOBITS and sec.size else None

    def stub_for(self, mangled: str) -> int | None:
        """Address of the stub through which this library calls the imported function ``mangled``
        (the symbol table's sorted names must be loaded)."""
        dyn = self.dynsym
        if dyn is None:
            return None
        so = dyn.str_offset
        for p in dyn.find_all(mangled.encode() + b"\0"):
            for idx in dyn.starting_in(p - so, p - so):
                if dyn.entry(idx)[2] != 0:
                    continue
                for relname, rtype in ((".rela.plt", R_X86_64_JUMP_SLOT), (".rela.dyn", R_X86_64_GLOB_DAT)):
                    got = self._got_slot(relname, idx, rtype)
                    if got is not None:
                        stub = self._stubs().get(got)
                        if stub is not None:
                            return stub
        return None

    def _got_slot(self, relname: str, dynidx: int, rtype: int) -> int | None:
        sec = self._section(relname)
        if sec is None or sec.entsize not in (0, _RELA_SIZE):
            return None
        mm = self.elf.mm
        pattern = struct.pack("<Q", (dynidx << 32) | rtype)
        end = sec.offset + sec.size
        pos = mm.find(pattern, sec.offset, end)
        while pos >= 0:
            if (pos - sec.offset) % _RELA_SIZE == 8:
                return struct.unpack_from("<Q", mm, pos - 8)[0]
            pos = mm.find(pattern, pos + 1, end)
        return None

    def _stubs(self) -> dict[int, int]:
        """GOT slot -> PLT stub address."""
        if self._got_to_stub is not None:
            return self._got_to_stub
        table: dict[int, int] = {}
        for name in _PLT_SECTIONS:
            sec = self._section(name)
            if sec is None:
                continue
            step = sec.entsize if sec.entsize in (8, 16) else 16
            data = bytes(self.elf.mm[sec.offset : sec.offset + sec.size])
            for off in range(0, len(data) - step + 1, step):
                j = data.find(b"\xff\x25", off, off + step)
                if j < 0 or j + 6 > len(data):
                    continue
                disp = struct.unpack_from("<i", data, j + 2)[0]
                target = sec.addr + j + 6 + disp
                table.setdefault(target, sec.addr + off)
        self._got_to_stub = table
        return table

    def stub_size(self, stub: int) -> int:
        for name in (".plt.sec", ".plt.got", ".plt"):
            sec = self.elf.sections.get(name)
            if sec is not None and sec.addr <= stub < sec.addr + sec.size:
                return sec.entsize if sec.entsize in (8, 16) else 16
        return 16

    def name_at(self, address: int) -> tuple[str, int] | None:
        """(imported name, stub address) if ``address`` is inside a PLT stub."""
        if self.dynsym is None:
            return None
        inside = None
        for name in _PLT_SECTIONS:
            sec = self.elf.sections.get(name)
            if sec is not None and sec.addr <= address < sec.addr + sec.size:
                inside = sec
        if inside is None:
            return None
        step = inside.entsize if inside.entsize in (8, 16) else 16
        stub = inside.addr + (address - inside.addr) // step * step
        if self._stub_to_got is None:
            self._stub_to_got = {s: g for g, s in self._stubs().items()}
        got = self._stub_to_got.get(stub)
        if got is None:
            return None
        idx = self._dynamic_index_of_slots().get(got)
        if idx is None or idx >= self.dynsym.count:
            return None
        return self.dynsym.name_at(self.dynsym.entry(idx)[0]), stub

    def _dynamic_index_of_slots(self) -> dict[int, int]:
        if self._got_to_dynidx is None:
            self._got_to_dynidx = {}
            for relname in (".rela.plt", ".rela.dyn"):
                sec = self._section(relname)
                if sec is None or sec.entsize != _RELA_SIZE:
                    continue
                raw = self.elf.mm[sec.offset : sec.offset + sec.size - sec.size % _RELA_SIZE]
                for r_offset, r_info, _ in struct.iter_unpack("<QQq", raw):
                    if r_info & 0xFFFFFFFF in (R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT):
                        self._got_to_dynidx.setdefault(r_offset, r_info >> 32)
        return self._got_to_dynidx
