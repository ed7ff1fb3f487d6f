"""Frame #0 of a breakpoint's stop without gdb's frame: its registers read with one ``PTRACE_GETREGS``.

A hot hit needs frame #0's pc and sp (the whole-stack reuse's key) and the argument registers, and no
more of gdb's frame when the rest of its call path is reused. ``gdb.newest_frame()`` makes gdb find frame
#0's unwinder and id at every stop: measured in a bare ``stop()`` on 2,000 hits of ``torch.add``
(bench/hot_add.py under plain gdb 13.1, load 5-7), gdb's CPU a hit was 0.30-0.36 ms returning
False, 0.61-0.66 ms after ``newest_frame()`` and four ``read_register``, 0.45-0.51 ms with five
``parse_and_eval('$reg')``, and 0.34-0.36 ms with one ``PTRACE_GETREGS`` through ctypes (gdb is the
thread's tracer: its Python runs on the thread that attached). ``StopFrame`` answers ``pc()`` and the
general registers from that read and turns into gdb's frame (``real()``) for anything else.

Only on x86-64 Linux, for an x86-64 target; elsewhere, or when the call fails, ``stop_frame()`` is gdb's
frame. Whenever gdb's frame is made for a StopFrame, its pc and sp are compared with the ones read: a
difference turns the direct read off for the rest of the run (logged), so a kernel or gdb that disagrees
costs the speed, never a wrong record.
"""
from __future__ import annotations

import os  # os.uname, not platform: its import (9 regex compiles) was ~3 ms of the agent's, before `-exec-run`
import struct
from typing import Any

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.log import LOG

_PTRACE_GETREGS = 12
# struct user_regs_struct (sys/user.h, x86-64): the index of each register in the 27 words.
_INDEX = {name: i for i, name in enumerate((
    "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi", "rdi",
    "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs"))}
_INDEX.update(pc=_INDEX["rip"], sp=_INDEX["rsp"])
_SIGNED = {"r15", "r14", "r13", "r12", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi", "rdi"}
_WORDS = 27
_UNPACK = struct.Struct(f"<{_WORDS}Q").unpack_from  # the 27 words at once: tuple(buffer) made an int a word


class _Ptrace:
    """libc's ptrace, loaded at the first stop (None: not this machine, or it failed once)."""

    def __init__(self) -> None:
        self.call: Any = None
        self.buffer: Any = None
        self.tried = False
        self.on = True  # False once a read disagreed with gdb, or failed
        self.arch: dict[int, bool] = {}  # inferior number -> its architecture is x86-64

    def load(self) -> bool:
        if not self.tried:
            self.tried = True
            uname = os.uname()
            if uname.sysname != "Linux" or uname.machine != "x86_64":
                self.on = False
                return False
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                fn = libc.ptrace
                fn.restype = ctypes.c_long
                fn.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
                self.call, self.buffer = fn, (ctypes.c_ulonglong * _WORDS)()
            except (OSError, AttributeError) as exc:
                LOG.info("no direct register reads: %s", exc)
                self.on = False
        return self.on

    def x86_64(self, inferior) -> bool:
        known = self.arch.get(inferior.num)
        if known is None:
            try:
                known = inferior.architecture().name() == "i386:x86-64"
            except (AttributeError, *READ_ERRORS):
                known = False
            self.arch[inferior.num] = known
        return known


_PT = _Ptrace()
_AT: dict[tuple, tuple] = {}  # register names -> their indexes in the read (() when one is not there)


class StopFrame:
    """Frame #0 of the thread stopped at a breakpoint: ``pc()`` and ``read_register`` of the general
    registers from one ptrace read, anything else from gdb's frame, made when first asked for. A register
    comes back as an int (what callers make of gdb's ``Value``: signed for the general registers, as gdb
    types them, unsigned for pc, sp, rbp and the segment bases)."""

    __slots__ = ("_regs", "_real", "_used")

    def __init__(self, regs: tuple) -> None:
        self._regs = regs
        self._real = None
        self._used: set[int] = set()  # the indexes of the registers read (repeat.py keys a repeat on them)

    def pc(self) -> int:
        self._used.add(16)
        return self._regs[16]

    def read_register(self, name: str):
        i = _INDEX.get(name)
        if i is None:
            return self.real().read_register(name)
        self._used.add(i)
        v = self._regs[i]
        return v - (1 << 64) if name in _SIGNED and v >= 1 << 63 else v

    def words(self, names: tuple) -> tuple | None:
        """These general registers as unsigned words (what ``arguments.entry_key`` keys on), from the read
        alone; None when one of them is not a general register."""
        at = _AT.get(names)
        if at is None:
            if len(_AT) >= 256:
                _AT.clear()
            at = _AT[names] = tuple(_INDEX[n] for n in names) if all(n in _INDEX for n in names) else ()
        if not at and names:
            return None
        self._used.update(at)
        regs = self._regs
        return tuple([regs[i] for i in at])

    def used(self) -> tuple:
        """The indexes of the registers read so far, in order."""
        return tuple(sorted(self._used))

    def all_words(self) -> tuple:
        return self._regs

    def made_nothing(self) -> bool:
        """Whether gdb's frame was never made (everything asked of this frame was a register read)."""
        return self._real is None

    def is_valid(self) -> bool:
        return True if self._real is None else self._real.is_valid()

    def real(self):
        """gdb's frame #0, checked against the registers read."""
        if self._real is None:
            self._real = frame = gdb.newest_frame()
            try:
                same = frame.pc() == self._regs[16] and int(frame.read_register("sp")) & 0xFFFFFFFFFFFFFFFF == self._regs[19]
            except READ_ERRORS:
                same = True  # gdb cannot read them either: nothing to compare
            if not same:
                _PT.on = False
                LOG.warning("ptrace's registers differ from gdb's (pc %#x / %#x): direct reads turned off",
                            self._regs[16], frame.pc())
        return self._real

    def __getattr__(self, name: str):
        return getattr(self.real(), name)


def real(frame):
    """gdb's frame for a StopFrame; any other frame (or None) as it is."""
    return frame.real() if isinstance(frame, StopFrame) else frame


def words_of(lwp: int) -> tuple | None:
    """The 27 general registers of thread ``lwp`` (stopped, traced by this gdb), or None when they cannot be
    read directly (then a repeat is not recognised: repeat.py)."""
    if not (_PT.on and _PT.call is not None):
        return None
    buf = _PT.buffer
    if _PT.call(_PTRACE_GETREGS, lwp, None, buf) != 0:
        return None
    return _UNPACK(buf)


def stop_frame():
    """Frame #0 of the selected (stopped) thread: a StopFrame when ptrace can read it, else gdb's."""
    if _PT.on and _PT.load():
        try:
            thread = gdb.selected_thread()
            lwp = thread.ptid[1]
            if lwp and _PT.x86_64(thread.inferior):
                buf = _PT.buffer
                if _PT.call(_PTRACE_GETREGS, lwp, None, buf) == 0:
                    return StopFrame(_UNPACK(buf))
                LOG.info("PTRACE_GETREGS failed for LWP %d: gdb's frame instead", lwp)
        except (AttributeError, *READ_ERRORS) as exc:
            LOG.info("no direct register read: %s", exc)
    return gdb.newest_frame()
