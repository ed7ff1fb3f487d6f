"""The stopped thread's local dispatch key sets (``c10::impl::raw_local_dispatch_key_set``, a
``thread_local`` of libc10.so: the included and excluded sets that ``no_grad``'s siblings,
``inference_mode``, ``_AutoDispatchBelowAutograd``, a ``TorchDispatchMode`` and functionalization change),
read from memory without a call into the target.

gdb finds a thread's copy of a thread-local minimal symbol itself (its TLS support, through the thread
pointer and the module's TLS block); the address is the thread's for its lifetime, so it is asked once a
thread and each hit reads its 16 bytes. The two words are kept as torch stores them (each XORed with
torch's default set, so that zeroed TLS means the defaults): the session's reader decodes them.
"""
from __future__ import annotations

import struct

import gdb  # type: ignore[import-not-found]

from tracer.gdb.agent.errors import READ_ERRORS

SYMBOL = "&'c10::impl::raw_local_dispatch_key_set'"


class LocalKeySets:
    def __init__(self) -> None:
        self._address: dict[tuple[int, int], int] = {}  # (inferior, thread's global number) -> address
        self._failed: tuple[int, str] | None = None  # (gdb's objfiles then, why): asked again once they change

    def read(self, read_memory=None) -> tuple[tuple[int, int] | None, str | None]:
        """((included, excluded) as stored, None), or (None, why they were not read). ``read_memory``: the
        reader to go through (entry.py's, which keeps what it read), else the selected inferior's."""
        try:
            thread = gdb.selected_thread()
            key = (thread.inferior.num, thread.global_num)
        except (AttributeError, *READ_ERRORS) as exc:
            return None, f"no thread selected ({exc})"
        address = self._address.get(key)
        if address is None:
            objfiles = len(gdb.objfiles())
            if self._failed is not None and self._failed[0] == objfiles:
                return None, self._failed[1]
            try:
                address = self._address[key] = int(gdb.parse_and_eval(SYMBOL)) & 0xFFFFFFFFFFFFFFFF
            except READ_ERRORS as exc:
                self._failed = (objfiles, f"gdb cannot find this thread's raw_local_dispatch_key_set in libc10.so ({exc})")
                return None, self._failed[1]
        try:
            raw = bytes((read_memory or gdb.selected_inferior().read_memory)(address, 16))
        except READ_ERRORS as exc:
            return None, f"its memory cannot be read ({exc})"
        return struct.unpack("<QQ", raw), None

    def forget(self) -> None:
        """Symbols changed (libc10 loaded, a process left): ask gdb again."""
        self._address.clear()
        self._failed = None


LOCAL = LocalKeySets()
