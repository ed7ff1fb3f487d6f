"""The unwind rule at an address, read from a library's ``.eh_frame`` through its ``.eh_frame_hdr`` index.

gdb reads the whole ``.eh_frame`` of a library the first time it unwinds a frame there, every FDE of it
decoded and sorted: libtorch_cpu.so's 17 MB (~335k FDEs) cost ~70-90 ms of gdb's CPU at the first hit of
a hot breakpoint, more than the rest of that hit (bench/RESULTS.md, "Speed round 3"). The linker's
``.eh_frame_hdr`` is a sorted table of (function start, FDE): one FDE is found by a binary search and
decoded alone, which is all a walk through a few of the library's frames needs.

``EhFrame(path).rule(address, exact)`` gives the row of the CFI table for that address: how to compute
the frame's CFA, and where its caller's registers were saved. Only what GCC and Clang emit for x86-64
code is interpreted (register + offset CFAs, registers saved at CFA offsets or unchanged); anything else
(a DWARF expression, a 64-bit FDE, an encoding not met in practice) answers None, and the caller leaves
that frame to gdb. Standard library only: the agent inside gdb uses it.
"""
from __future__ import annotations

import mmap
import struct
from typing import NamedTuple

from tracer import elfparts
from tracer.symbols.leb128 import sleb, uleb

# DW_EH_PE pointer encodings (LSB, "Exception Frame Header" and the DWARF spec).
_ABSPTR, _ULEB, _UDATA2, _UDATA4, _UDATA8, _SLEB, _SDATA2, _SDATA4, _SDATA8 = 0, 1, 2, 3, 4, 9, 10, 11, 12
_PCREL, _DATAREL = 0x10, 0x30
_OMIT = 0xFF
_FIXED = {_ABSPTR: "<Q", _UDATA2: "<H", _UDATA4: "<I", _UDATA8: "<Q", _SDATA2: "<h", _SDATA4: "<i",
          _SDATA8: "<q"}
RA = 16  # x86-64's return-address column
SP = 7
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")


class Unsupported(Exception):
    """An FDE or CIE this reader does not interpret: the frame is left to gdb."""


class Rule(NamedTuple):
    """One row of the CFI table: CFA = register ``cfa_reg`` + ``cfa_offset``; ``saved``: DWARF register ->
    offset from the CFA where the caller's value was saved (every other register is unchanged)."""

    cfa_reg: int
    cfa_offset: int
    saved: tuple  # ((register, offset from the CFA), ...), the return address (16) among them
    start: int  # the FDE's first address (the function's), for gdb's frame id


class _Cie(NamedTuple):
    code_align: int
    data_align: int
    ra: int
    fde_enc: int
    augmented: bool  # "z": FDEs carry an augmentation-data length
    initial: bytes  # the initial instructions


class EhFrame:
    """A library's ``.eh_frame`` through its ``.eh_frame_hdr``, mapped read-only. Addresses are the
    library's own (its virtual addresses: a load base is the caller's to subtract)."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as fh:
            self._data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        found = elfparts.read_sections(self._data)
        if found is None or not found.is64 or found.order != "<":
            self._data.close()
            raise Unsupported("not a 64-bit little-endian ELF file")
        frame, hdr, text = found.named(".eh_frame"), found.named(".eh_frame_hdr"), found.named(".text")
        if frame is None or hdr is None:
            self._data.close()
            raise Unsupported("no .eh_frame or .eh_frame_hdr")
        self._text = (text.addr, text.addr + text.size) if text is not None else (0, 0)
        self._frame_addr, self._frame_off = frame.addr, frame.offset
        h = hdr.offset
        version, ptr_enc, count_enc, table_enc = self._data[h:h + 4]
        if version != 1 or table_enc != (_DATAREL | _SDATA4) or count_enc != _UDATA4:
            raise Unsupported(f".eh_frame_hdr encoding {version}/{count_enc:#x}/{table_enc:#x}")
        pos = h + 4 + struct.calcsize(_FIXED.get(ptr_enc & 0x0F, "<i"))
        self._count = _U32.unpack_from(self._data, pos)[0]
        self._hdr_addr = hdr.addr
        table = pos + 4
        # (start, FDE) pairs of signed 32-bit offsets from .eh_frame_hdr: a view of every other word.
        self._view = memoryview(self._data)[table:table + 8 * self._count]
        self._table = self._view.cast("i") if len(self._view) == 8 * self._count else None
        self._cies: dict[int, _Cie] = {}

    def text_range(self) -> tuple[int, int]:
        """The library's ``.text``, [start, end) (a CFI-only copy keeps its address and size)."""
        return self._text

    def close(self) -> None:
        if self._table is not None:
            self._table.release()
        self._view.release()
        self._table = None
        self._data.close()

    def rule(self, address: int, exact: bool = True) -> Rule | None:
        """The row for ``address`` (``exact``: the frame stopped there; otherwise it is a return address,
        and the row is that of the call before it, as gdb looks it up); None when no FDE covers it."""
        where = address if exact else address - 1
        fde = self._find(where)
        if fde is None:
            return None
        return self._row(fde, where)

    def covers(self, address: int) -> bool:
        """Whether an FDE describes the code at ``address``."""
        fde = self._find(address)
        if fde is None:
            return False
        cie = self._cie(fde + 4 - _U32.unpack_from(self._data, fde + 4)[0])
        start, pos = self._pointer(cie.fde_enc, fde + 8)
        size, _ = self._pointer(cie.fde_enc & 0x0F, pos)
        return start <= address < start + size

    def next_start(self, address: int) -> int | None:
        """Where the first FDE above ``address`` starts; None when none does."""
        table = self._table
        if table is None:
            return None
        lo = self._above(table, address)
        return self._hdr_addr + table[2 * lo] if lo < self._count else None

    def _above(self, table, address: int) -> int:
        """The index of the header's first FDE that starts above ``address`` (binary search of ``table``)."""
        rel = address - self._hdr_addr
        lo, hi = 0, self._count
        while lo < hi:
            mid = (lo + hi) // 2
            if table[2 * mid] <= rel:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _find(self, address: int) -> int | None:
        """The file offset of the FDE whose range may hold ``address`` (binary search of the header)."""
        table = self._table
        if table is None or not self._count:
            return None
        lo = self._above(table, address)
        if lo == 0:
            return None
        return self._hdr_addr + table[2 * (lo - 1) + 1] - self._frame_addr + self._frame_off

    def _cie(self, off: int) -> _Cie:
        cie = self._cies.get(off)
        if cie is not None:
            return cie
        data = self._data
        length = _U32.unpack_from(data, off)[0]
        if length == 0xFFFFFFFF:
            raise Unsupported("64-bit CIE")
        end = off + 4 + length
        pos = off + 8
        version = data[pos]
        pos += 1
        aug_end = data.find(b"\0", pos)
        aug = bytes(data[pos:aug_end]).decode("ascii", "replace")
        pos = aug_end + 1
        if "eh" in aug:
            raise Unsupported("CIE augmentation 'eh'")
        code_align, pos = uleb(data, pos)
        data_align, pos = sleb(data, pos)
        if version == 1:
            ra = data[pos]
            pos += 1
        else:
            ra, pos = uleb(data, pos)
        fde_enc = _ABSPTR
        if aug.startswith("z"):
            aug_len, pos = uleb(data, pos)
            body_end = pos + aug_len
            for c in aug[1:]:  # the augmentation data, in the order of its letters
                if c == "R":
                    fde_enc = data[pos]
                    pos += 1
                elif c == "L":
                    pos += 1
                elif c == "P":
                    enc = data[pos]
                    fmt = _FIXED.get(enc & 0x0F)
                    if fmt is None or enc & 0x70 == 0x50:  # aligned: never met; indirect is skipped alike
                        raise Unsupported(f"personality encoding {enc:#x}")
                    pos += 1 + struct.calcsize(fmt)
                elif c not in "SB":
                    raise Unsupported(f"CIE augmentation {aug!r}")
            pos = body_end
        elif aug:
            raise Unsupported(f"CIE augmentation {aug!r}")
        cie = self._cies[off] = _Cie(code_align, data_align, ra, fde_enc, aug.startswith("z"), bytes(data[pos:end]))
        return cie

    def _pointer(self, enc: int, pos: int) -> tuple[int, int]:
        """A pointer of .eh_frame at file offset ``pos``, in the library's addresses."""
        fmt = _FIXED.get(enc & 0x0F)
        if fmt is None or enc & 0x80 or enc & 0x70 not in (0, _PCREL):
            raise Unsupported(f"pointer encoding {enc:#x}")
        value = struct.unpack_from(fmt, self._data, pos)[0]
        if enc & 0x70 == _PCREL:
            value += pos - self._frame_off + self._frame_addr
        return value, pos + struct.calcsize(fmt)

    def _row(self, off: int, address: int) -> Rule | None:
        data = self._data
        length = _U32.unpack_from(data, off)[0]
        if length == 0xFFFFFFFF:
            raise Unsupported("64-bit FDE")
        end = off + 4 + length
        cie_delta = _U32.unpack_from(data, off + 4)[0]
        cie = self._cie(off + 4 - cie_delta)
        start, pos = self._pointer(cie.fde_enc, off + 8)
        size, pos = self._pointer(cie.fde_enc & 0x0F, pos)
        if not start <= address < start + size:
            return None  # a gap between functions (or code without unwind tables)
        if cie.augmented:
            aug_len, pos = uleb(data, pos)
            pos += aug_len
        state = _Machine(cie)
        state.run(cie.initial, start, None)
        state.initial = dict(state.regs)
        state.run(bytes(data[pos:end]), start, address)
        saved = tuple(sorted((r, v) for r, v in state.regs.items() if v is not None))
        if not any(r == RA for r, _ in saved):
            return None  # the return address is not saved: the outermost frame, gdb's to say
        return Rule(state.cfa_reg, state.cfa_offset, saved, start)


class _Machine:
    """The CFA instructions of one CIE and FDE, run up to an address (DWARF 5, 6.4.2)."""

    def __init__(self, cie: _Cie) -> None:
        self.cie = cie
        self.cfa_reg = SP
        self.cfa_offset = 0
        self.regs: dict[int, int | None] = {}  # register -> offset from the CFA; None: unchanged
        self.initial: dict[int, int | None] = {}
        self.stack: list = []

    def run(self, code: bytes, loc: int, until: int | None) -> None:
        """Run ``code`` from address ``loc``; stop before the first row that starts past ``until``."""
        cie = self.cie
        pos, n = 0, len(code)
        while pos < n:
            op = code[pos]
            pos += 1
            high, low = op >> 6, op & 0x3F
            delta = None
            if high == 1:
                delta = low
            elif high == 2:
                value, pos = uleb(code, pos)
                self.regs[low] = value * cie.data_align
            elif high == 3:
                self.regs[low] = self.initial.get(low)
            elif op == 0x00:
                pass
            elif op in (0x02, 0x03, 0x04):
                size = {0x02: 1, 0x03: 2, 0x04: 4}[op]
                delta = int.from_bytes(code[pos:pos + size], "little")
                pos += size
            elif op in (0x05, 0x11):  # offset_extended(_sf)
                reg, pos = uleb(code, pos)
                value, pos = (uleb if op == 0x05 else sleb)(code, pos)
                self.regs[reg] = value * cie.data_align
            elif op == 0x06:  # restore_extended
                reg, pos = uleb(code, pos)
                self.regs[reg] = self.initial.get(reg)
            elif op == 0x08:  # same_value
                reg, pos = uleb(code, pos)
                self.regs[reg] = None
            elif op == 0x0A:
                self.stack.append((dict(self.regs), self.cfa_reg, self.cfa_offset))
            elif op == 0x0B:
                if not self.stack:
                    raise Unsupported("restore_state without remember_state")
                # The CFA rule comes back with the registers' (as gdb and GCC's unwinder do).
                self.regs, self.cfa_reg, self.cfa_offset = self.stack.pop()
            elif op in (0x0C, 0x12):  # def_cfa(_sf)
                self.cfa_reg, pos = uleb(code, pos)
                value, pos = (uleb if op == 0x0C else sleb)(code, pos)
                self.cfa_offset = value if op == 0x0C else value * cie.data_align
            elif op == 0x0D:
                self.cfa_reg, pos = uleb(code, pos)
            elif op in (0x0E, 0x13):  # def_cfa_offset(_sf)
                value, pos = (uleb if op == 0x0E else sleb)(code, pos)
                self.cfa_offset = value if op == 0x0E else value * cie.data_align
            elif op == 0x2E:  # GNU_args_size: no effect on the rule
                _, pos = uleb(code, pos)
            else:  # expressions, val_offset, register, undefined, set_loc, vendor ones
                raise Unsupported(f"CFA instruction {op:#x}")
            if delta is not None:
                loc += delta * cie.code_align
                if until is not None and loc > until:
                    return
