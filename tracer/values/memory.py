"""Reading the target's memory as untrusted bytes: one reader with named failure modes and limits.

Every read goes through ``Memory``: a failed read, a null or non-canonical pointer, a misaligned one
raises ``BadValue`` with a sentence saying which; the value readers turn it into ``Unreadable(why)``.
``read_memory(address, length) -> bytes`` is whatever the caller has: gdb's
``inferior.read_memory`` inside the agent (its ``gdb.MemoryError`` is a ``RuntimeError``), or
``ProcMemory`` over ``/proc/PID/mem`` of a stopped process (tests, the probe's checks).
Standard library only.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

USER_SPACE_END = 1 << 47  # x86-64 canonical user addresses lie below this
PAGE = 4096


class BadValue(Exception):
    """What was read does not pass a check: the message says which, in one sentence."""


@dataclass(frozen=True)
class Unreadable:
    """A value pttrace could not read or that failed a sanity check: never shown as a number."""

    why: str
    type: str | None = None
    address: int | None = None

    kind = "unreadable"

    def to_dict(self) -> dict:
        out: dict[str, str | int] = {"kind": self.kind, "why": self.why}
        if self.type:
            out["type"] = self.type
        if self.address is not None:
            out["address"] = self.address
        return out

    def text(self) -> str:
        where = f" at {self.address:#x}" if self.address is not None else ""
        return f"unreadable{where}: {self.why}"


class Memory:
    """Typed reads over ``read_memory``; every failure is a ``BadValue``."""

    def __init__(self, read_memory):
        self._read = read_memory

    def bytes(self, address: int, length: int) -> bytes:
        if not 0 < address < USER_SPACE_END or address + length > USER_SPACE_END:
            raise BadValue(f"address {address:#x} is not a user-space address")
        try:
            data = bytes(self._read(address, length))
        except Exception as exc:  # noqa: BLE001 - the reader is the caller's (gdb.MemoryError, OSError, its own)
            raise BadValue(f"memory at {address:#x} cannot be read ({str(exc).strip() or type(exc).__name__})") \
                from None
        if len(data) != length:
            raise BadValue(f"memory at {address:#x} ended after {len(data)} of {length} bytes")
        return data

    def u8(self, address: int) -> int:
        return self.bytes(address, 1)[0]

    def i8(self, address: int) -> int:
        return struct.unpack("<b", self.bytes(address, 1))[0]

    def u16(self, address: int) -> int:
        return struct.unpack("<H", self.bytes(address, 2))[0]

    def u32(self, address: int) -> int:
        return struct.unpack("<I", self.bytes(address, 4))[0]

    def i64(self, address: int) -> int:
        return struct.unpack("<q", self.bytes(address, 8))[0]

    def u64(self, address: int) -> int:
        return struct.unpack("<Q", self.bytes(address, 8))[0]

    def f64(self, address: int) -> float:
        return struct.unpack("<d", self.bytes(address, 8))[0]

    def words(self, address: int, count: int, signed: bool = True) -> tuple[int, ...]:
        return struct.unpack(f"<{count}{'q' if signed else 'Q'}", self.bytes(address, 8 * count))

    def boolean(self, address: int, what: str) -> bool:
        b = self.u8(address)
        if b > 1:
            raise BadValue(f"{what} is {b}, not a bool")
        return bool(b)

    def pointer(self, address: int, what: str, null: bool = False, align: int = 8) -> int:
        """The pointer stored at ``address``; ``null``: 0 is allowed (and returned)."""
        return check_pointer(self.u64(address), what, null, align)


class Snapshot(Memory):
    """One read of ``length`` bytes at ``address`` that the typed reads inside it are answered from (a
    TensorImpl's fields: one read instead of a dozen; each costs a gdb call inside the agent). A read
    outside it, or of a block that could not be read whole (the end of a mapping), goes to memory."""

    def __init__(self, mem: Memory, address: int, length: int):
        super().__init__(mem._read)
        self.base = address
        try:
            self.data = mem.bytes(address, length)
        except BadValue:
            self.data = b""

    def bytes(self, address: int, length: int) -> bytes:
        off = address - self.base
        if 0 <= off and off + length <= len(self.data):
            return self.data[off : off + length]
        return super().bytes(address, length)


def check_pointer(value: int, what: str, null: bool = False, align: int = 8) -> int:
    """``value`` if it can be a pointer to an object of this alignment; else BadValue."""
    value &= (1 << 64) - 1
    if value == 0:
        if null:
            return 0
        raise BadValue(f"{what} is a null pointer")
    if value < PAGE or value >= USER_SPACE_END:
        raise BadValue(f"{what} is {value:#x}, not a user-space address")
    if value % align:
        raise BadValue(f"{what} is {value:#x}, not aligned to {align} bytes")
    return value


class ProcMemory:
    """``read_memory`` over ``/proc/PID/mem`` (the process must be stopped, or the caller accepts reads
    racing with it; ptrace rights over it are needed, as for gdb)."""

    def __init__(self, pid: int):
        self.pid = pid
        self._fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)

    def __call__(self, address: int, length: int) -> bytes:
        return os.pread(self._fd, length, address)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> ProcMemory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
