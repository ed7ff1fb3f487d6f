"""Frames in the libraries gdb has as unwind tables only (CFI-only copies), unwound by the agent.

gdb decodes and sorts a library's whole ``.eh_frame`` the first time it unwinds a frame there:
libtorch_cpu.so's ~335k FDEs cost 70-90 ms of gdb's CPU at a hot breakpoint's first hit, and
libtorch_python.so's ~8 ms, for the two or three frames a hit has there (measured in pttrace's gdb at
the first hit of ``at::_ops::add_Tensor::call``: ``gdb.newest_frame()`` 74-97 ms, 7-8 ms with this frame
claimed by a Python unwinder). This unwinder finds the one FDE through the library's ``.eh_frame_hdr``
(tracer.symbols.ehframe) and gives gdb the frame's id and its caller's registers, as gdb's DWARF
unwinder would from the same table: the return address and the registers the row says were saved, the
stack pointer at the CFA, every other general register unchanged.

It claims a frame only when it reads its row with certainty: in a CFI-only copy's ``.text``, an x86-64
target, a row without DWARF expressions, and (for a caller's frame) the same row at the return address
and just before it, so a frame a signal interrupted is never read with the wrong one. Anything else is
left to gdb's own unwinder, which then reads that library's table as before. Only walks use it: a hot hit
whose stack is reused (stack.py) unwinds nothing.
"""
from __future__ import annotations

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent import native
from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.log import LOG
from tracer.gdb.agent.state import STATE
from tracer.symbols.ehframe import RA, SP, EhFrame, Unsupported

# DWARF register numbers of x86-64 (the psABI's table) and gdb's names for them.
_NAMES = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
          "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")
_X86_64 = "i386:x86-64"
_MAX_RULES = 1 << 16


class FrameId:
    """What ``create_unwind_info`` takes (gdb.Values): the frame's CFA, and the code address gdb's DWARF unwinder
    gives a frame in a library without symbols, 0; so a frame has the same id whichever unwinder read it, and
    ``finish`` or ``next`` started at one stop recognise it at the next."""

    __slots__ = ("sp", "pc")

    def __init__(self, sp, pc) -> None:
        self.sp = sp
        self.pc = pc


class CfiUnwinder:
    """Unwinds the frames of STATE.cfi_libs' libraries from their copies' ``.eh_frame_hdr``."""

    def __init__(self) -> None:
        self.on = True
        self._tables: dict[str, EhFrame | None] = {}  # copy -> its table (None: not readable)
        self._text: dict[str, tuple[int, int]] = {}  # copy -> its .text's (start, end), library addresses
        self._bases: dict[tuple[int, str], int | None] = {}  # (pid, library) -> where it is mapped there
        self._rules: dict[tuple[str, int, bool], object] = {}  # (library, address, exact) -> Rule or None
        self.claimed = 0  # frames unwound here (tests, benchmarks)

    def forget(self) -> None:
        """The libraries changed (a copy added or dropped, a process gone): map them again."""
        self._bases.clear()

    def __call__(self, pending_frame):
        if not self.on or not STATE.cfi_libs:
            return None
        try:
            return self._unwind(pending_frame)
        except (Unsupported, *READ_ERRORS) as exc:
            LOG.debug("frame left to gdb's unwinder: %s", exc)
            return None

    def _unwind(self, pf):
        if pf.architecture().name() != _X86_64:
            return None
        pc = int(pf.read_register("rip"))
        lib = gdb.solib_name(pc)
        entry = STATE.cfi_libs.get(lib) if lib else None
        if entry is None:
            return None
        copy = entry[0]
        table = self._table(copy)
        if table is None:
            return None
        base = self._base(lib)
        if base is None:
            return None
        address = pc - base
        lo, hi = self._text[copy]
        if not lo <= address < hi:
            return None
        exact = pf.level() == 0
        rule = self._rule(table, lib, address, exact)
        if rule is None:
            return None
        return self._info(pf, rule)

    def _rule(self, table: EhFrame, lib: str, address: int, exact: bool):
        key = (lib, address, exact)
        if key in self._rules:
            return self._rules[key]
        rule = table.rule(address, exact=True)
        if rule is not None and not exact and table.rule(address, exact=False) != rule:
            # A return address where a new row (or function) starts: a frame a signal interrupted is read
            # at its pc, one that called at pc - 1. Which this is, gdb knows from the frame below.
            rule = None
        if len(self._rules) >= _MAX_RULES:
            self._rules.clear()
        self._rules[key] = rule
        return rule

    def _info(self, pf, rule):
        if rule.cfa_reg >= len(_NAMES):
            return None
        cfa = (int(pf.read_register(_NAMES[rule.cfa_reg])) + rule.cfa_offset) & 0xFFFFFFFFFFFFFFFF
        saved = dict(rule.saved)
        offsets = list(saved.values())
        lo = min(offsets)
        raw = bytes(gdb.selected_inferior().read_memory(cfa + lo, max(offsets) - lo + 8))
        values = {reg: int.from_bytes(raw[off - lo:off - lo + 8], "little") for reg, off in saved.items()}
        info = pf.create_unwind_info(FrameId(gdb.Value(cfa), gdb.Value(0)))
        info.add_saved_register("rip", gdb.Value(values[RA]))
        info.add_saved_register("rsp", gdb.Value(cfa))
        for reg, name in enumerate(_NAMES):
            if reg == SP:
                continue
            if reg in values:
                info.add_saved_register(name, gdb.Value(values[reg]))
            else:  # not saved: the caller's is this frame's (gdb's DWARF unwinder does the same)
                info.add_saved_register(name, pf.read_register(name))
        self.claimed += 1
        return info

    def _table(self, copy: str) -> EhFrame | None:
        if copy not in self._tables:
            try:
                table = EhFrame(copy)
                self._text[copy] = table.text_range()
            except (OSError, ValueError, Unsupported) as exc:
                LOG.info("%s: its frames are left to gdb's unwinder (%s)", copy, exc)
                table = None
            self._tables[copy] = table
        return self._tables[copy]

    def _base(self, lib: str) -> int | None:
        """Where ``lib`` is mapped in the stopped process (its file offset 0), read from /proc once."""
        pid = gdb.selected_inferior().pid
        key = (pid, lib)
        if key not in self._bases:
            self._bases[key] = native.mapped_base(lib)
        return self._bases[key]


CFI = CfiUnwinder()
