"""What a hot hit read last time, read again in one system call to see whether anything changed.

A hit's argument values are a function of the registers they were passed in and of the memory their
readers went through (``tracer.values``: a tensor is a dozen reads, each a gdb call). ``Recorder`` keeps
every region a computation read and the bytes it got; ``Regions.unchanged()`` reads all of them again
with one ``process_vm_readv`` (gdb is the target's tracer, so the kernel lets it) and compares: when
every byte is the same, the computation would give the same result, and the one kept is used.
``process_vm_readv`` missing or refused (another kernel, a seccomp filter): the regions are read one by one
through gdb, which still spares the computation.
"""
from __future__ import annotations

import operator
import os  # os.uname, not platform (its import compiles 9 regexes)
from typing import Any

from tracer.gdb.agent.errors import READ_ERRORS
from tracer.gdb.agent.log import LOG
from tracer.gdb.agent.spans import spans_of

MAX_REGIONS = 256  # a computation that read more than this is not kept (process_vm_readv takes 1024 iovecs)
MAX_BYTES = 1 << 16


class Recorder:
    """A memory reader that keeps what it read (``failed``: some read raised: the result depends on more
    than the bytes kept, so it is not reused)."""

    def __init__(self, read) -> None:
        self.reader = read
        self.regions: list[tuple[int, int]] = []
        self.chunks: list[bytes] = []
        self.failed = False

    def __call__(self, address: int, length: int) -> bytes:
        STOP.clean = False  # read afresh: this stop's result depends on more than the regions it checked
        try:
            data = bytes(self.reader(address, length))
        except Exception:
            self.failed = True
            raise
        self.regions.append((address, len(data)))
        self.chunks.append(data)
        return data

    def regions_read(self) -> "Regions | None":
        """The regions read and their bytes, to check later; None if they cannot be (a failed read,
        too many or too much)."""
        total = sum(n for _a, n in self.regions)
        if self.failed or len(self.regions) > MAX_REGIONS or total > MAX_BYTES:
            return None
        return Regions(tuple(self.regions), b"".join(self.chunks))


class _Vm:
    """libc's process_vm_readv, loaded at first use (``on`` False: not available here)."""

    def __init__(self) -> None:
        self.call: Any = None
        self.ctypes: Any = None
        self.on = os.uname().sysname == "Linux"

    def load(self) -> bool:
        if self.call is None and self.on:
            try:
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).process_vm_readv
                fn.restype = ctypes.c_ssize_t
                fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                               ctypes.c_ulong]
                self.call, self.ctypes = fn, ctypes
            except (OSError, AttributeError) as exc:
                LOG.info("no process_vm_readv: %s", exc)
                self.on = False
        return self.on


_VM = _Vm()


class Regions:
    """Regions of the target's memory and the bytes they held when read."""

    __slots__ = ("regions", "data", "_iov")

    def __init__(self, regions: tuple, data: bytes) -> None:
        self.regions = regions
        self.data = data
        self._iov: Any = None  # (local buffer, local iovecs, remote iovecs), made at the first check

    def unchanged(self, inferior) -> bool:
        """Whether every region still holds the bytes read then."""
        if not self.regions:
            return True
        stop = STOP
        if stop.active:
            known = stop.result(self, inferior)
            if known is None:
                known = self._check(inferior)
                stop.checked.append(self)
            if not known:
                stop.clean = False
            return known
        return self._check(inferior)

    def _check(self, inferior) -> bool:
        if _VM.on and _VM.load():
            got = self._vm_read(inferior.pid)
            if got is not None:
                return got == self.data
        try:
            return b"".join(bytes(inferior.read_memory(a, n)) for a, n in self.regions) == self.data
        except READ_ERRORS:
            return False

    def _vm_read(self, pid: int) -> bytes | None:
        ct = _VM.ctypes
        if self._iov is None:
            buf = ct.create_string_buffer(len(self.data))
            base = ct.addressof(buf)
            local: list[int] = []
            remote: list[int] = []
            off = 0
            for address, length in self.regions:
                local += (base + off, length)
                remote += (address, length)
                off += length
            n = len(self.regions)
            self._iov = (buf, (ct.c_size_t * (2 * n))(*local), (ct.c_size_t * (2 * n))(*remote))
        buf, local_iov, remote_iov = self._iov
        n = len(self.regions)
        got = _VM.call(pid, local_iov, n, remote_iov, n, 0)
        if got < 0:
            errno = ct.get_errno()
            if errno in (1, 38):  # EPERM, ENOSYS: not here, ever (a seccomp filter, an old kernel)
                LOG.info("process_vm_readv refused (errno %d): regions are checked through gdb", errno)
                _VM.on = False
            return None
        return buf.raw[:got] if got != len(self.data) else buf.raw


class StopBatch:
    """The regions a breakpoint's ``stop()`` checks, read together: a hot loop's stop checks the same ones
    as the stop before (its argument values', its stack's return addresses', its Python frames'), so at the
    first check all of the last stop's are read with one ``process_vm_readv`` and each later check is a
    look-up. Measured with each step timed in gdb (thread CPU per call, 2,000 hits of bench/threads_target.py,
    load 8-10): the stack check went from 32 to 8 us (p10; median 52 to 13), the argument check, which now
    makes the one read, from 28 to 38 us (median 50 to 63): 14-26 us less of a ~110-140 us ``stop()``. Only inside ``with STOP:`` (the breakpoint's ``stop()``): what
    was read is forgotten when it returns, so no answer outlives the stop it was read at."""

    def __init__(self) -> None:
        self.active = False
        self.checked: list[Regions] = []  # checked at this stop, in order
        self.previous: list[Regions] = []  # checked at the stop before
        self.known: dict[int, bool] = {}  # id(Regions) -> unchanged, for those read together at this stop
        self.tried = False  # the read together was made (or could not be) at this stop
        # Every check of this stop found its regions unchanged and nothing was read afresh (Recorder): what
        # the stop recorded is a function of the checked regions' bytes (repeat.py).
        self.clean = True
        self._batch: Any = None  # (the Regions, their expected bytes, local buffer, iovecs, total)

    def __enter__(self) -> "StopBatch":
        self.active, self.checked, self.known, self.tried, self.clean = True, [], {}, False, True
        return self

    def __exit__(self, *_exc) -> None:
        self.active = False
        self.previous, self.checked, self.known = self.checked, [], {}

    def result(self, regions: Regions, inferior) -> bool | None:
        """Whether ``regions`` is unchanged, from the read together; None: not read together."""
        got = self.known.get(id(regions))
        if got is not None or self.tried:
            if got is not None:
                self.checked.append(regions)
            return got
        self.tried = True
        previous = self.previous
        if len(previous) < 2 or not any(r is regions for r in previous) or not (_VM.on and _VM.load()):
            return None
        data = self._read(previous, inferior.pid)
        if data is None:
            return None
        self._know(previous, data)
        got = self.known.get(id(regions))
        if got is not None:
            self.checked.append(regions)
        return got

    def same_as_before(self, regions: list, pid: int) -> bool:
        """Whether ``regions``, the very ones the stop before checked, all hold the same bytes (one read);
        if so they count as this stop's checks, so the next stop reads them together again."""
        previous = self.previous
        if len(previous) != len(regions) or not all(map(operator.is_, previous, regions)) \
                or not (_VM.on and _VM.load()):
            return False
        data = self._read(previous, pid)
        if data is None:
            return False
        self.tried = True  # what was read answers this stop's later checks (a hit that is not a repeat)
        if not self._know(previous, data):
            return False
        self.checked = list(previous)
        return True

    def _know(self, previous: list, data: bytes) -> bool:
        """Note which of ``previous`` are unchanged by ``data``, their bytes read together; whether all are."""
        if data == self._batch[1]:
            self.known = {id(r): True for r in previous}
            return True
        off = 0
        for r in previous:
            n = len(r.data)
            self.known[id(r)] = data[off:off + n] == r.data
            off += n
        return False

    def _read(self, previous: list, pid: int) -> bytes | None:
        """The bytes of ``previous``'s regions, in order, read with one ``process_vm_readv``."""
        batch = self._batch
        if batch is None or len(batch[0]) != len(previous) or not all(map(operator.is_, batch[0], previous)):
            regions = [x for r in previous for x in r.regions]
            spans, pick = spans_of(regions)
            if len(spans) > 1024:  # process_vm_readv's limit of iovecs
                return None
            ct = _VM.ctypes
            expected = b"".join(r.data for r in previous)
            size = sum(n for _a, n in spans)
            buf = ct.create_string_buffer(max(size, 1))
            base = ct.addressof(buf)
            local: list[int] = []
            remote: list[int] = []
            off = 0
            for address, length in spans:
                local += (base + off, length)
                remote += (address, length)
                off += length
            n = len(spans)
            batch = self._batch = (tuple(previous), expected, buf, (ct.c_size_t * (2 * n))(*local),
                                   (ct.c_size_t * (2 * n))(*remote), n, size, pick)
        _regs, expected, buf, local_iov, remote_iov, n, size, pick = batch
        got = _VM.call(pid, local_iov, n, remote_iov, n, 0)
        if got != size:
            return None  # a region that cannot be read: each is checked on its own
        return b"".join(pick(buf.raw))


STOP = StopBatch()
